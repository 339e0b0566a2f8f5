package repository

import (
	"bytes"
	"cmp"
	"context"
	"encoding"
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/gormlock/gormlock/locking"
)

// Key is the primary key of a record whose model has a composite primary key
// (several columns tagged primaryKey, as in a multi-tenant (TenantID, ID)):
// one value per key column, in the order the model declares the columns.
//
//	doc, err := docs.Get(ctx, repository.Key{"acme", 42})
//
// Every call that takes an id takes a Key for such a model, and
// Adapter.Identity returns one; a model with a one-column key takes the
// plain value. Its text form (Adapter.ParseID, the HTTP adapter's URLs) is the columns' text forms joined
// by commas, each with '%' and ',' percent-encoded: "acme,42".
type Key []any

// String returns the key's text form, as Adapter.ParseID reads it.
func (k Key) String() string { return keyString(k) }

// composite reports whether the model's primary key has several columns.
func (m *meta) composite() bool { return len(m.pks) > 1 }

// keyNames names the key's fields, for messages: "ID" or "(TenantID, ID)".
func (m *meta) keyNames() string {
	if !m.composite() {
		return m.pk.Name
	}
	names := make([]string, len(m.pks))
	for i, f := range m.pks {
		names[i] = f.Name
	}
	return "(" + strings.Join(names, ", ") + ")"
}

// normalizeID checks that id can be the primary key of the model and converts
// numeric ids to the key's type, so a mistyped id is refused before any I/O.
// A composite key is a Key (or []any) with one value per key column.
func (m *meta) normalizeID(id any) (any, error) {
	if !m.composite() {
		return m.normalizePart(m.pk, id)
	}
	var parts []any
	switch k := id.(type) {
	case nil:
		return nil, locking.Invalid("%s: id is nil", m.table)
	case Key:
		parts = k
	case []any:
		parts = k
	default:
		return nil, locking.Invalid("%s: id %v: the primary key has %d columns %s; pass a repository.Key with one value per column, in that order", m.table, id, len(m.pks), m.keyNames())
	}
	if len(parts) != len(m.pks) {
		return nil, locking.Invalid("%s: id %v has %d values; the primary key %s has %d columns", m.table, id, len(parts), m.keyNames(), len(m.pks))
	}
	out := make(Key, len(parts))
	for i, f := range m.pks {
		v, err := m.normalizePart(f, parts[i])
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// normalizePart is normalizeID for the value of one key column.
func (m *meta) normalizePart(f *schema.Field, id any) (any, error) {
	if id == nil {
		return nil, locking.Invalid("%s: id is nil", m.table)
	}
	want := f.FieldType
	v := reflect.ValueOf(id)
	got := v.Type()
	switch {
	case got == want:
		if v.IsZero() {
			return nil, locking.Invalid("%s: id is the zero value of %v (primary key %s)", m.table, want, f.Name)
		}
		return id, nil // as given: no copy of the value
	case isInt(got.Kind()) && isInt(want.Kind()):
		if !intFits(v, want) {
			return nil, locking.Invalid("%s: id %v does not fit the primary key %s (%v)", m.table, id, f.Name, want)
		}
		v = v.Convert(want)
	case got.Kind() == reflect.String && want.Kind() == reflect.String:
		v = v.Convert(want)
	case got.AssignableTo(want):
	default:
		return nil, locking.Invalid("%s: id %v has type %v, the primary key %s is %v", m.table, id, got, f.Name, want)
	}
	if v.IsZero() {
		return nil, locking.Invalid("%s: id is the zero value of %v (primary key %s)", m.table, want, f.Name)
	}
	return v.Interface(), nil
}

// keyOf returns the entity's primary key (a Key for a composite one) and
// whether it is not set: the key, or any of its columns, is the zero value.
func (m *meta) keyOf(ctx context.Context, rv reflect.Value) (any, bool) {
	if !m.composite() {
		return m.pk.ValueOf(ctx, rv)
	}
	k := make(Key, len(m.pks))
	anyZero := false
	for i, f := range m.pks {
		v, zero := f.ValueOf(ctx, rv)
		k[i] = v
		anyZero = anyZero || zero
	}
	return k, anyZero
}

// setKey stores id, a normalized key, in the entity.
func (m *meta) setKey(ctx context.Context, rv reflect.Value, id any) error {
	if !m.composite() {
		return m.pk.Set(ctx, rv, id)
	}
	for i, f := range m.pks {
		if err := f.Set(ctx, rv, id.(Key)[i]); err != nil {
			return err
		}
	}
	return nil
}

// keyArgs appends the statement arguments of key id, one per key column.
func (m *meta) keyArgs(args []any, id any) []any {
	if k, ok := id.(Key); ok {
		return append(args, k...)
	}
	return append(args, id)
}

// keyCond is the GORM condition "primary key = id" on the current table.
func (m *meta) keyCond(id any) clause.Expression {
	if !m.composite() {
		return clause.Eq{Column: clause.Column{Table: clause.CurrentTable, Name: m.pk.DBName}, Value: id}
	}
	k := id.(Key)
	eqs := make([]clause.Expression, len(m.pks))
	for i, f := range m.pks {
		eqs[i] = clause.Eq{Column: clause.Column{Table: clause.CurrentTable, Name: f.DBName}, Value: k[i]}
	}
	return clause.And(eqs...)
}

// keyString is a primary key as text: for comparing keys in Go, naming
// records in operation keys, and ParseID's input. For a one-column key it
// is what fmt.Sprint prints, without its cost for the common key types
// (Mutate calls it on every call); a Key joins its values' text with
// commas, each with '%' and ',' escaped.
func keyString(id any) string {
	switch v := id.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case int:
		return strconv.Itoa(v)
	case Key:
		parts := make([]string, len(v))
		for i, p := range v {
			parts[i] = keyPartEscaper.Replace(keyString(p))
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(id)
}

var keyPartEscaper = strings.NewReplacer("%", "%25", ",", "%2C")

// parseID is Adapter.ParseID.
func (r *Repository[T]) parseID(s string) (any, error) {
	m := r.m
	if !m.composite() {
		return m.parsePart(m.pk, s)
	}
	texts := strings.Split(s, ",")
	if len(texts) != len(m.pks) {
		return nil, locking.Invalid("%s: id %q has %d comma-separated values; the primary key %s has %d columns", m.table, s, len(texts), m.keyNames(), len(m.pks))
	}
	k := make(Key, len(texts))
	for i, f := range m.pks {
		text, err := url.PathUnescape(texts[i])
		if err != nil {
			return nil, locking.Invalid("%s: id %q: value %d is not validly escaped: %v", m.table, s, i+1, err)
		}
		if k[i], err = m.parsePart(f, text); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// parsePart is ParseID for one key column.
func (m *meta) parsePart(f *schema.Field, s string) (any, error) {
	want := f.FieldType
	v := reflect.New(want)
	if u, ok := v.Interface().(encoding.TextUnmarshaler); ok {
		if err := u.UnmarshalText([]byte(s)); err != nil {
			return nil, locking.Invalid("%s: id %q is not a valid %v: %v", m.table, s, want, err)
		}
		return m.normalizePart(f, v.Elem().Interface())
	}
	switch {
	case want.Kind() == reflect.String:
		v.Elem().SetString(s)
	case isUint(want.Kind()):
		n, err := strconv.ParseUint(s, 10, want.Bits())
		if err != nil || strconv.FormatUint(n, 10) != s {
			return nil, locking.Invalid("%s: id %q is not a valid %v", m.table, s, want)
		}
		v.Elem().SetUint(n)
	case isInt(want.Kind()):
		n, err := strconv.ParseInt(s, 10, want.Bits())
		if err != nil || strconv.FormatInt(n, 10) != s {
			return nil, locking.Invalid("%s: id %q is not a valid %v", m.table, s, want)
		}
		v.Elem().SetInt(n)
	default:
		return nil, fmt.Errorf("%w: %s: ids of type %v cannot be parsed from text", locking.ErrNotSupported, m.table, want)
	}
	return m.normalizePart(f, v.Elem().Interface())
}

// compareKeys orders two primary keys of the same type: integers by value,
// strings and byte arrays (UUIDs) bytewise, composite keys column by
// column, anything else by its printed form. Any consistent total order
// will do: it is the order in which batch writes take their row locks.
func compareKeys(a, b any) int {
	if ka, ok := a.(Key); ok {
		if kb, ok := b.(Key); ok {
			for i := 0; i < len(ka) && i < len(kb); i++ {
				if c := compareKeys(ka[i], kb[i]); c != 0 {
					return c
				}
			}
			return cmp.Compare(len(ka), len(kb))
		}
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() == vb.Type() {
		switch {
		case va.CanInt():
			return cmp.Compare(va.Int(), vb.Int())
		case va.CanUint():
			return cmp.Compare(va.Uint(), vb.Uint())
		case va.Kind() == reflect.String:
			return cmp.Compare(va.String(), vb.String())
		case va.Kind() == reflect.Array && va.Type().Elem().Kind() == reflect.Uint8:
			return bytes.Compare(arrayBytes(va), arrayBytes(vb))
		}
	}
	return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

func arrayBytes(v reflect.Value) []byte {
	b := make([]byte, v.Len())
	reflect.Copy(reflect.ValueOf(b), v)
	return b
}
