package repository

import (
	"context"
	"fmt"

	"github.com/gormlock/gormlock/locking"
)

// KeyAssignedByDatabase reports whether the database assigns the primary
// key (a one-column auto-increment integer key). Adapters should then not let clients
// choose keys: an explicit key does not advance PostgreSQL's identity
// sequence, and a later assigned key would collide with it.
func (r *Repository[T]) KeyAssignedByDatabase() bool {
	return !r.m.composite() && r.m.pk.AutoIncrement
}

// Identity returns e's primary key (a Key for a composite one) and version, and whether the key is the
// zero value (not set). A nil e has no key: nil, 0, true.
func (r *Repository[T]) Identity(e *T) (id any, version int64, zeroID bool) {
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
func (r *Repository[T]) SetIdentity(e *T, id any, version int64) error {
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
// primary key, the version and the timestamps) from src: the "replace" of a
// PUT, applied to the record as loaded so its key, version and creation time
// stay its own.
func (r *Repository[T]) CopyWritable(dst, src *T) error {
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
