package reliability_test

import (
	"context"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/repository"
)

// hostileColumnsCases are Columns': names that are not a field Update
// writes, repeated names and no name are refused before any I/O; a stale
// entity limited to some columns is stale like any other.
func hostileColumnsCases() []hostileCase {
	update := func(ctx context.Context, f *hostileFixture, mod func(*fixtures.Account), names ...string) error {
		a := f.a2
		a.Owner = "'; DROP TABLE accounts; --"
		if mod != nil {
			mod(&a)
		}
		return f.accts.Update(ctx, &a, repository.Columns(names...))
	}
	var out []hostileCase
	for _, tc := range []struct {
		input string
		names []string
		want  hostileWant
	}{
		{"no name", nil, hostileInvalid},
		{"an unknown name", []string{"Nope"}, hostileInvalid},
		{"SQL as a name", []string{"owner = 'x', balance"}, hostileInvalid},
		{"the key", []string{"ID"}, hostileInvalid},
		{"the version", []string{"version"}, hostileInvalid},
		{"the creation time", []string{"CreatedAt"}, hostileInvalid},
		{"a name twice, as field and column", []string{"Owner", "owner"}, hostileInvalid},
		{"an empty name", []string{""}, hostileInvalid},
	} {
		out = append(out, hostileCase{api: "Update", uses: []string{"Columns"}, input: "Columns: " + tc.input, want: tc.want,
			call: func(ctx context.Context, f *hostileFixture) error { return update(ctx, f, nil, tc.names...) }})
	}
	out = append(out, hostileCase{api: "Update", uses: []string{"Columns"}, input: "Columns of a stale entity", want: hostileStale,
		call: func(ctx context.Context, f *hostileFixture) error {
			return update(ctx, f, func(a *fixtures.Account) { a.Version-- }, "Owner")
		}})
	return out
}
