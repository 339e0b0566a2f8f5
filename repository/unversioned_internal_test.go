package repository

import (
	"database/sql"
	"reflect"
	"testing"
	"time"
)

type (
	namedInt    int32
	namedString string
)

// agree checks that convertReturned stores src in a T as database/sql's
// Scan does (sql.Null's Scan converts as Rows.Scan does), or declines;
// want says whether it must convert.
func agree[T any](t *testing.T, src any, want bool) {
	t.Helper()
	v := reflect.New(reflect.TypeFor[T]()).Elem()
	got := convertReturned(v, src)
	if got != want {
		t.Errorf("convertReturned(%T, %T %v) = %v, want %v", v.Interface(), src, src, got, want)
		return
	}
	if !got {
		return
	}
	var n sql.Null[T]
	if err := n.Scan(src); err != nil {
		t.Errorf("convertReturned(%T, %T %v) converted what database/sql refuses: %v", v.Interface(), src, src, err)
		return
	}
	if !reflect.DeepEqual(v.Interface(), n.V) {
		t.Errorf("convertReturned(%T, %T %v) = %#v, database/sql gives %#v", v.Interface(), src, src, v.Interface(), n.V)
	}
}

// convertReturned converts as database/sql does, and leaves to it what it
// would refuse or what convertReturned does not know.
func TestConvertReturnedAgreesWithDatabaseSQL(t *testing.T) {
	now := time.Now()
	agree[int64](t, int64(-7), true)
	agree[int](t, int64(1<<40), true)
	agree[namedInt](t, int64(12), true)
	agree[int8](t, int64(300), false) // database/sql: out of range
	agree[uint8](t, int64(200), true)
	agree[uint](t, int64(-1), false) // database/sql: out of range
	agree[float64](t, 1.25, true)
	agree[float32](t, 1.25, false) // left to database/sql
	agree[int64](t, 1.25, false)   // left to database/sql
	agree[string](t, "abc", true)
	agree[string](t, []byte("abc"), true)
	agree[namedString](t, "x", true)
	agree[string](t, int64(5), false) // left to database/sql
	agree[[]byte](t, []byte{1, 2}, true)
	agree[bool](t, true, true)
	agree[time.Time](t, now, true)
	agree[*int64](t, int64(3), true)
	agree[*string](t, "p", true)
	agree[sql.NullInt64](t, int64(9), true)
	agree[sql.NullString](t, "n", true)
	agree[sql.NullTime](t, now, true)

	// NULL: a pointer takes it, a value is left to database/sql (which
	// refuses it); a Scanner takes it as database/sql gives it.
	p := reflect.New(reflect.TypeFor[*int64]()).Elem()
	p.Set(reflect.ValueOf(new(int64)))
	if !convertReturned(p, nil) || !p.IsNil() {
		t.Errorf("NULL into *int64: %v", p)
	}
	if convertReturned(reflect.New(reflect.TypeFor[int64]()).Elem(), nil) {
		t.Error("NULL into int64 converted")
	}
	ns := reflect.New(reflect.TypeFor[sql.NullInt64]()).Elem()
	if !convertReturned(ns, nil) || ns.Interface().(sql.NullInt64).Valid {
		t.Errorf("NULL into sql.NullInt64: %v", ns)
	}

	// The bytes are the value's own, not the driver's buffer.
	buf := []byte("abc")
	b := reflect.New(reflect.TypeFor[[]byte]()).Elem()
	convertReturned(b, buf)
	buf[0] = 'X'
	if string(b.Bytes()) != "abc" {
		t.Errorf("[]byte shares the driver's buffer: %q", b.Bytes())
	}
}
