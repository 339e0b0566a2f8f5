package repository

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/callbacks"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/gormlock/gormlock/locking"
)

// hooks says which of the update and delete hooks a model has, and
// whether it has AfterFind.
type hooks struct {
	beforeSave, beforeUpdate, afterUpdate, afterSave bool
	beforeDelete, afterDelete                        bool
	afterFind                                        bool
}

func hooksOf(s *schema.Schema) hooks {
	return hooks{
		beforeSave: s.BeforeSave, beforeUpdate: s.BeforeUpdate, afterUpdate: s.AfterUpdate, afterSave: s.AfterSave,
		beforeDelete: s.BeforeDelete, afterDelete: s.AfterDelete, afterFind: s.AfterFind,
	}
}

func (h hooks) update() bool { return h.beforeSave || h.beforeUpdate || h.afterUpdate || h.afterSave }
func (h hooks) delete() bool { return h.beforeDelete || h.afterDelete }

// hookRun is one guarded write's hooks: which to run, on which entity.
type hookRun struct {
	on     bool // the write runs hooks at all
	update bool // update hooks (else delete hooks)
	// unscoped: the write is a permanent delete (GORM's Unscoped().Delete):
	// the hooks' statement is Unscoped too, and with the config's
	// PropagateUnscoped so is every statement they start from it.
	unscoped bool
}

// hooksFor returns the hooks a write of kind update (or delete) runs: none
// for a model without them, or on a database session with SkipHooks.
func (r *Repository[T]) hooksFor(update bool) hookRun {
	if r.st.Gorm.Statement.SkipHooks {
		return hookRun{}
	}
	if update {
		return hookRun{on: r.m.hooks.update(), update: true}
	}
	return hookRun{on: r.m.hooks.delete()}
}

// hookDB returns the *gorm.DB a hook receives: a session on the
// transaction of ctx whose Statement describes the entity being written,
// as GORM's own hooks see it — and, as in GORM, a condition a Before hook
// adds to it (tx.Statement.Where(...)) applies to the write: stmt is the
// statement such conditions land in.
func (r *Repository[T]) hookDB(ctx context.Context, h hookRun, e *T, rv reflect.Value) (tx *gorm.DB, stmt *gorm.Statement) {
	db, _ := r.st.Conn(ctx)
	// Model returns an instance whose Statement belongs to it: a hook's
	// tx.Statement.Where adds to that statement, as GORM's callbacks
	// pass hooks a session sharing the write's statement.
	inst := db.Session(&gorm.Session{NewDB: true, Context: ctx}).Model(e)
	inst.Statement.Schema = r.m.schema
	inst.Statement.Table = r.m.table
	inst.Statement.Dest = e
	inst.Statement.ReflectValue = rv
	inst.Statement.Unscoped = h.unscoped
	return inst.Session(&gorm.Session{NewDB: true}), inst.Statement
}

// before runs the Before hooks of h on e, in the transaction of ctx, and
// returns the conditions they added to the write (see hookDB).
func (r *Repository[T]) before(ctx context.Context, h hookRun, e *T, rv reflect.Value) ([]clause.Expression, error) {
	if !h.on {
		return nil, nil
	}
	tx, stmt := r.hookDB(ctx, h, e, rv)
	var err error
	if h.update {
		if r.m.hooks.beforeSave {
			err = call(err, "BeforeSave", func() error { return any(e).(callbacks.BeforeSaveInterface).BeforeSave(tx) })
		}
		if r.m.hooks.beforeUpdate {
			err = call(err, "BeforeUpdate", func() error { return any(e).(callbacks.BeforeUpdateInterface).BeforeUpdate(tx) })
		}
	} else if r.m.hooks.beforeDelete {
		err = call(err, "BeforeDelete", func() error { return any(e).(callbacks.BeforeDeleteInterface).BeforeDelete(tx) })
	}
	if err := r.hookError(err, tx); err != nil {
		return nil, err
	}
	if _, ok := stmt.Clauses["SET"]; ok {
		return nil, fmt.Errorf("%s: %w", r.m.table, &HookError{Hook: "Before hook", Err: fmt.Errorf("%w: it added a SET clause to the write; gormlock writes the entity's fields: set the fields on the entity instead", locking.ErrNotSupported)})
	}
	if c, ok := stmt.Clauses["WHERE"]; ok {
		if w, ok := c.Expression.(clause.Where); ok && len(w.Exprs) > 0 {
			return w.Exprs, nil
		}
	}
	return nil, nil
}

// after runs the After hooks of h on e, in the transaction of ctx.
func (r *Repository[T]) after(ctx context.Context, h hookRun, e *T, rv reflect.Value) error {
	if !h.on {
		return nil
	}
	tx, _ := r.hookDB(ctx, h, e, rv)
	var err error
	if h.update {
		if r.m.hooks.afterUpdate {
			err = call(err, "AfterUpdate", func() error { return any(e).(callbacks.AfterUpdateInterface).AfterUpdate(tx) })
		}
		if r.m.hooks.afterSave {
			err = call(err, "AfterSave", func() error { return any(e).(callbacks.AfterSaveInterface).AfterSave(tx) })
		}
	} else if r.m.hooks.afterDelete {
		err = call(err, "AfterDelete", func() error { return any(e).(callbacks.AfterDeleteInterface).AfterDelete(tx) })
	}
	return r.hookError(err, tx)
}

// call runs hook unless an earlier one failed, and names it in its error.
func call(prev error, name string, hook func() error) error {
	if prev != nil {
		return prev
	}
	if err := hook(); err != nil {
		return &HookError{Hook: name, Err: err}
	}
	return nil
}

// hookError returns the error of the hooks, or the error a hook left in
// its *gorm.DB (tx.AddError), as GORM does.
func (r *Repository[T]) hookError(err error, tx *gorm.DB) error {
	if err == nil && tx.Error != nil {
		err = &HookError{Hook: "hook", Err: tx.Error}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", r.m.table, err)
	}
	return nil
}

// HookError is the error a model's hook (BeforeUpdate, AfterDelete, ...)
// returned from a gormlock write; the write was not applied. Unwrap gives
// the hook's error.
type HookError struct {
	Hook string // the hook's method name
	Err  error
}

// Error implements error.
func (e *HookError) Error() string { return e.Hook + " hook: " + e.Err.Error() }

// Unwrap returns the hook's error.
func (e *HookError) Unwrap() error { return e.Err }

// associationsOf returns the model's own associations (not the back
// references other models register in its schema), by field name.
func associationsOf(s *schema.Schema) []*schema.Relationship {
	var out []*schema.Relationship
	for name, rel := range s.Relationships.Relations {
		if rel.Field == nil || strings.HasPrefix(name, "_") || rel.Field.Schema != s {
			continue
		}
		out = append(out, rel)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// heldAssociations names the association fields of rv that hold records:
// a non-empty slice, a non-nil pointer, a non-zero struct.
func (r *Repository[T]) heldAssociations(ctx context.Context, rv reflect.Value) []string {
	var held []string
	for _, rel := range r.m.assocs {
		v := rel.Field.ReflectValueOf(ctx, rv)
		switch v.Kind() {
		case reflect.Slice, reflect.Map:
			if v.Len() == 0 {
				continue
			}
		default:
			if v.IsZero() {
				continue
			}
		}
		held = append(held, rel.Name)
	}
	return held
}

// refuseAssociations refuses an Update of an entity whose association
// fields hold records: gormlock's guarded UPDATE writes the record's own
// row, and silently dropping the rest is what it must never do.
func (r *Repository[T]) refuseAssociations(ctx context.Context, rv reflect.Value, method string, id any) error {
	if len(r.m.assocs) == 0 {
		return nil
	}
	held := r.heldAssociations(ctx, rv)
	if len(held) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s: %s id=%v: field %s holds associated records, and gormlock's %s writes only the %s row: write them through their own repository in the same RunInTx (then ForceIncrement this record, so its version covers them), or pass repository.SkipAssociations() to write this row alone",
		locking.ErrInvalidArgument, r.m.table, method, id, strings.Join(held, ", "), method, r.m.table)
}

// versionNewAssociations gives the associated records Create is about to
// insert through GORM a first version, when their model has a gormlock
// version field still at zero: every record gets a real version. The
// version is this process's clock reading (see "Versions").
func versionNewAssociations(ctx context.Context, s *schema.Schema, rv reflect.Value, depth int) {
	if depth > 8 {
		return
	}
	for _, rel := range associationsOf(s) {
		fs := rel.FieldSchema
		vf := versionFieldOf(fs)
		v := rel.Field.ReflectValueOf(ctx, rv)
		if v.Kind() != reflect.Slice && v.IsZero() {
			// A has-one or belongs-to field left at its zero value: GORM
			// saves no record for it, and a version would make it look
			// set (a phantom row, and a foreign key pointing at it).
			continue
		}
		each := func(ev reflect.Value) {
			for ev.Kind() == reflect.Pointer {
				if ev.IsNil() {
					return
				}
				ev = ev.Elem()
			}
			if ev.Kind() != reflect.Struct {
				return
			}
			if vf != nil {
				if f := vf.ReflectValueOf(ctx, ev); f.CanSet() && f.CanInt() && f.Int() == 0 {
					n, _ := nextVersion(0)
					f.SetInt(n)
				}
			}
			versionNewAssociations(ctx, fs, ev, depth+1)
		}
		switch v.Kind() {
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				each(v.Index(i))
			}
		default:
			each(v)
		}
	}
}

// versionFieldOf is the field a repository of s would use as its version,
// or nil.
func versionFieldOf(s *schema.Schema) *schema.Field {
	f, err := versionField(s)
	if err != nil {
		return nil
	}
	return f
}
