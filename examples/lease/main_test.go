package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/testdb"
)

// want is the whole output of run after its first line; every line is a row
// of the seed's table or the expiry.
const want = `alice  get-and-lock                       -> ok: "Quarterly report" at version v1, fence 1, lease of 10s
bob    get-and-lock                       -> ErrLeased (held by alice)
bob    get                                -> ok: "Quarterly report", leased by alice
bob    release with a wrong token         -> ErrLeased
bob    update without the token           -> ErrLeased (even at the right version v1)
bob    delete without the token           -> ErrLeased
alice  update with the token              -> ok: now version v2, lease released
bob    get-and-lock                       -> ok: "Quarterly report, final", fence 2
bob    release with the token             -> ok
alice  release with her used lease        -> ErrLeaseExpired
alice  get-and-lock for 200ms, then stalls
bob    get-and-lock after the expiry      -> ok, fence 4 (alice had 3)
alice  wakes up, update with her lease    -> ErrLeaseExpired: her lease ended, bob's edit stays
final: "Bob's edit" at version v3
`

func TestStory(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			dsn, name := filepath.Join(t.TempDir(), "lease.db"), d
			switch d {
			case "postgres":
				dsn = testdb.PostgresSchema(t)
			case "mariadb":
				dsn, name = testdb.MariaDBDatabase(t), "mysql" // GORM's dialector name
			}
			var out bytes.Buffer
			require.NoError(t, run(context.Background(), &out, dsn))
			require.Equal(t, fmt.Sprintf("gormlock lease: two editors, one document, on %s\n", name)+want, out.String())
		})
	}
}
