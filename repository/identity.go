package repository

import (
	"context"
	"encoding"
	"fmt"
	"reflect"
	"strconv"

	"github.com/gormlock/gormlock/locking"
)

// ParseID converts the text form of a primary key (a URL path segment, a
// form value) to the key's type: decimal for integer keys, the text itself
// for string keys, and UnmarshalText for keys that implement
// encoding.TextUnmarshaler (uuid.UUID). Text that is not a valid key gives
// an error matching locking.ErrInvalidArgument; so does an integer not in
// its one canonical form ("+1", "01"), so that one record has one URL.
func (r *Repository[T]) ParseID(s string) (any, error) {
	want := r.m.pk.FieldType
	v := reflect.New(want)
	if u, ok := v.Interface().(encoding.TextUnmarshaler); ok {
		if err := u.UnmarshalText([]byte(s)); err != nil {
			return nil, locking.Invalid("%s: id %q is not a valid %v: %v", r.m.table, s, want, err)
		}
		return r.m.normalizeID(v.Elem().Interface())
	}
	switch {
	case want.Kind() == reflect.String:
		v.Elem().SetString(s)
	case isUint(want.Kind()):
		n, err := strconv.ParseUint(s, 10, want.Bits())
		if err != nil || strconv.FormatUint(n, 10) != s {
			return nil, locking.Invalid("%s: id %q is not a valid %v", r.m.table, s, want)
		}
		v.Elem().SetUint(n)
	case isInt(want.Kind()):
		n, err := strconv.ParseInt(s, 10, want.Bits())
		if err != nil || strconv.FormatInt(n, 10) != s {
			return nil, locking.Invalid("%s: id %q is not a valid %v", r.m.table, s, want)
		}
		v.Elem().SetInt(n)
	default:
		return nil, fmt.Errorf("%w: %s: ids of type %v cannot be parsed from text", locking.ErrNotSupported, r.m.table, want)
	}
	return r.m.normalizeID(v.Elem().Interface())
}

// KeyAssignedByDatabase reports whether the database assigns the primary
// key (an auto-increment integer key). Adapters should then not let clients
// choose keys: an explicit key does not advance PostgreSQL's identity
// sequence, and a later assigned key would collide with it.
func (r *Repository[T]) KeyAssignedByDatabase() bool { return r.m.pk.AutoIncrement }

// Identity returns e's primary key and version, and whether the key is the
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
	if err := r.m.pk.Set(context.Background(), rv, id); err != nil {
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
