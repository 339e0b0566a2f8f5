package repository

import (
	"context"
	"fmt"

	"github.com/gormlock/gormlock/locking"
)

// Adapter is the part of a repository that code exposing it over another
// protocol needs (package rest uses it): ids parsed from text, an entity's
// key and version read and set, the columns a write may change copied.
// Applications call the Repository; adapters build on it and its Adapter.
type Adapter[T any] struct{ r *Repository[T] }

// Adapter returns the repository's adapter helpers.
func (r *Repository[T]) Adapter() *Adapter[T] { return &Adapter[T]{r: r} }

// ParseID converts s, a key as text (a URL path segment, a header, a
// form value) to the key's type: decimal for integer keys, the text itself
// for string keys, and UnmarshalText for keys that implement
// encoding.TextUnmarshaler (uuid.UUID). Text that is not a valid key gives
// an error matching locking.ErrInvalidArgument; so does an integer not in
// its one canonical form ("+1", "01"), so that one record has one URL.
//
// A composite key (see Key) is the columns' text forms in order, joined by
// commas, each with '%' written %25 and ',' written %2C: "acme,42" is
// Key{"acme", 42}. It returns a Key.
func (a *Adapter[T]) ParseID(s string) (any, error) { return a.r.parseID(s) }

// KeyAssignedByDatabase reports whether the database assigns the primary
// key (a one-column auto-increment integer key). Adapters should then not let clients
// choose keys: an explicit key does not advance PostgreSQL's identity
// sequence, and a later assigned key would collide with it.
func (a *Adapter[T]) KeyAssignedByDatabase() bool {
	return !a.r.m.composite() && a.r.m.pk.AutoIncrement
}

// Identity returns e's primary key (a Key for a composite one) and version, and whether the key is the
// zero value (not set). A nil e has no key: nil, 0, true.
func (a *Adapter[T]) Identity(e *T) (id any, version int64, zeroID bool) {
	r := a.r
	if e == nil {
		return nil, 0, true
	}
	rv := reflectElem(e)
	id, zeroID = r.idOf(context.Background(), rv)
	return id, r.versionOf(context.Background(), rv), zeroID
}

// SetIdentity sets e's primary key and version, for adapters that build an
// entity from outside input (a request body) and must not let that input
// choose which record, or which version, it writes. id must suit the key
// (see Get).
func (a *Adapter[T]) SetIdentity(e *T, id any, version int64) error {
	r := a.r
	if e == nil {
		return locking.Invalid("%s: SetIdentity: entity is nil", r.m.table)
	}
	id, err := r.m.normalizeID(id)
	if err != nil {
		return err
	}
	rv := reflectElem(e)
	if err := r.m.setKey(context.Background(), rv, id); err != nil {
		return fmt.Errorf("%s: SetIdentity: %w", r.m.table, err)
	}
	r.setVersion(context.Background(), rv, version)
	return nil
}

// CopyWritable copies into dst every column Update writes (all but the
// primary key, the version, the timestamps and the fields tagged
// gormlock:"unversioned") from src: the "replace" of a PUT, applied to the
// record as loaded so its key, version and creation time stay its own.
func (a *Adapter[T]) CopyWritable(dst, src *T) error {
	r := a.r
	if dst == nil || src == nil {
		return locking.Invalid("%s: CopyWritable: nil entity", r.m.table)
	}
	ctx := context.Background()
	d, s := reflectElem(dst), reflectElem(src)
	for _, f := range r.m.setCols {
		v, _ := f.ValueOf(ctx, s)
		if err := f.Set(ctx, d, v); err != nil {
			return fmt.Errorf("%s: CopyWritable: %s: %w", r.m.table, f.Name, err)
		}
	}
	return nil
}

// Differing returns the names of the fields Update writes whose values
// differ between a and b, in the model's order: what a stale write's
// caller changed or missed (see StaleError).
func (a *Adapter[T]) Differing(x, y *T) []string {
	if x == nil || y == nil {
		return nil
	}
	return a.r.differing(context.Background(), reflectElem(x), reflectElem(y))
}

// ChangedUnversioned returns the names of the fields tagged
// gormlock:"unversioned" whose values differ between x and y, in the
// model's order: an HTTP adapter refuses a PATCH that changes one, which a
// guarded write would not write.
func (a *Adapter[T]) ChangedUnversioned(x, y *T) []string {
	if x == nil || y == nil {
		return nil
	}
	ctx := context.Background()
	var out []string
	for _, f := range a.r.m.unversioned {
		v, _ := f.ValueOf(ctx, reflectElem(x))
		w, _ := f.ValueOf(ctx, reflectElem(y))
		if !sameValue(v, w) {
			out = append(out, f.Name)
		}
	}
	return out
}
