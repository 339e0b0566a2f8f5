package repository

import (
	"slices"
	"sort"
	"strings"
	"sync"

	"gorm.io/gorm/schema"

	"github.com/gormlock/gormlock/internal/store"
	"github.com/gormlock/gormlock/locking"
)

// columnSet is the fields an Update limited by Columns writes, in the
// model's order, and its guarded statement.
type columnSet struct {
	fields []*schema.Field
	stmt   store.Stmt
}

// columnSets caches a repository's column-limited statements by their
// fields' column names, sorted and joined by commas, and
// writeUnversioned's statements by shape, apart (a column's name is never
// taken for a shape).
type columnSets struct {
	sets sync.Map // string -> *columnSet
	// unversioned holds writeUnversioned's statements by shape (see
	// unversionedWrite): string -> store.Stmt.
	unversioned sync.Map
}

// columnSet resolves the names Columns gave (nil when it gave none: the
// whole row) and returns the set with its statement, built once per set.
func (r *Repository[T]) columnSet(names []string, method string) (*columnSet, error) {
	if len(names) == 0 {
		return nil, nil
	}
	var fields []*schema.Field
	for _, name := range names {
		f := r.m.schema.LookUpField(name)
		switch {
		case f == nil:
			return nil, locking.Invalid("%s: %s: Columns: no field or column %q", r.m.table, method, name)
		case r.m.isUnversionedField(f):
			return nil, locking.Invalid("%s: %s: Columns: %s is tagged gormlock:\"unversioned\": a guarded write never writes it from the entity (a stale copy would put back the value it read); change it with Apply, or with Mutate, which guards it by the value it read", r.m.table, method, f.Name)
		case !slices.Contains(r.m.setCols, f):
			return nil, locking.Invalid("%s: %s: Columns: %s is not a field Update writes (the key, the version, a creation, update or deletion time, or a read-only field)", r.m.table, method, f.Name)
		case slices.Contains(fields, f):
			return nil, locking.Invalid("%s: %s: Columns: %s named twice", r.m.table, method, f.Name)
		}
		fields = append(fields, f)
	}
	// The model's order, so that one set named in any order is one
	// statement.
	sort.SliceStable(fields, func(i, j int) bool {
		return slices.Index(r.m.setCols, fields[i]) < slices.Index(r.m.setCols, fields[j])
	})
	key := make([]string, len(fields))
	for i, f := range fields {
		key[i] = f.DBName
	}
	k := strings.Join(key, ",")
	if c, ok := r.cols.sets.Load(k); ok {
		return c.(*columnSet), nil
	}
	c := &columnSet{fields: fields, stmt: r.m.updateOf(r.st.Gorm, fields)}
	actual, _ := r.cols.sets.LoadOrStore(k, c)
	return actual.(*columnSet), nil
}
