package repository

import (
	"github.com/gormlock/gormlock/locking"
)

// WriteOption adjusts any guarded write: Create, Update, Delete, Restore,
// ForceIncrement. OpKey is one. Every WriteOption is also an UpdateOption
// and a DeleteOption.
type WriteOption interface {
	UpdateOption
	DeleteOption
	applyWrite(*writeConfig) error
}

// UpdateOption adjusts one Update: the WriteOptions, and SkipAssociations.
type UpdateOption interface {
	applyUpdate(*writeConfig) error
}

// DeleteOption adjusts one Delete: the WriteOptions, and Permanently.
type DeleteOption interface {
	applyDelete(*writeConfig) error
}

// MutateOption adjusts one Mutate or Upsert call: Retry, Report and OpKey.
// Every MutateOption is also a LockedMutateOption.
type MutateOption interface {
	LockedMutateOption
	applyMutate(*mutateConfig) error
}

// LockedMutateOption adjusts one MutateRowLocked call: the MutateOptions
// (Retry, Report, OpKey) and the LockWaitOptions (NoWait, LockTimeout). A
// LockWaitOption is not a MutateOption, so passing NoWait() to Mutate does
// not compile; ForShare is not a LockedMutateOption (a shared lock cannot
// be written under).
type LockedMutateOption interface {
	applyLockedMutate(*mutateConfig) error
}

type writeConfig struct {
	op          *OperationKey
	permanently bool     // Delete of a soft-delete model: DELETE, not deleted_at
	skipAssoc   bool     // Update: write the row even with association fields set
	columns     []string // Update: write only these fields (Columns), as given
	// guard: Mutate's write of unversioned fields fn changed, guarded by
	// the values it read (see valueGuard).
	guard *valueGuard
}

// updateFunc is an UpdateOption made of a function.
type updateFunc func(*writeConfig) error

func (f updateFunc) applyUpdate(c *writeConfig) error { return f(c) }

// deleteFunc is a DeleteOption made of a function.
type deleteFunc func(*writeConfig) error

func (f deleteFunc) applyDelete(c *writeConfig) error { return f(c) }

// Permanently makes Delete of a model with soft delete (a gorm.DeletedAt
// field) remove the row, guarded like any Delete, instead of setting
// deleted_at: GORM's Unscoped().Delete. It also removes a soft-deleted
// record (read with IncludeDeleted). For other models every Delete is
// permanent and the option changes nothing.
func Permanently() DeleteOption {
	return deleteFunc(func(c *writeConfig) error {
		c.permanently = true
		return nil
	})
}

// SkipAssociations lets Update write an entity whose association fields
// (has one, has many, belongs to, many to many) hold records: it writes the
// entity's own row, guarded as always, and leaves the associated records as
// they are in the database. Without it such an Update is refused, naming
// the fields, so that nothing is dropped silently.
func SkipAssociations() UpdateOption {
	return updateFunc(func(c *writeConfig) error {
		c.skipAssoc = true
		return nil
	})
}

// Columns makes Update (and UpdateMany) write only the named fields — Go
// field names or column names — besides the version and the update time,
// in the same guarded statement: GORM's Select("Name", "Status").Updates(e)
// with the guard. Fields left out keep what the database has, whatever the
// entity holds. Hooks, soft delete, leases and OpKey work as for a full
// Update; a Before hook's changes to other fields are not written. A name
// that is not a field Update writes (the key, the version, a creation,
// update or deletion time, a read-only field), a repeated name, or no name
// at all makes the call fail with an error matching
// locking.ErrInvalidArgument before any I/O.
func Columns(names ...string) UpdateOption {
	return updateFunc(func(c *writeConfig) error {
		if len(names) == 0 {
			return locking.Invalid("Columns: no column named")
		}
		c.columns = append(c.columns, names...)
		return nil
	})
}

// ReadOption adjusts one Get: IncludeDeleted and Preload, which Find takes
// too.
type ReadOption interface {
	applyRead(*readConfig) error
}

// QueryOption is an option Get, Find and Claim take: IncludeDeleted,
// Preload.
type QueryOption interface {
	ReadOption
	FindOption
	ClaimOption
}

type readConfig struct {
	includeDeleted bool
	preloads       []preload
}

type preload struct {
	name string
	args []any
}

// IncludeDeleted makes Get and Find return soft-deleted records too (GORM's
// Unscoped), for a model with a gorm.DeletedAt field; its DeletedAt tells
// them apart. Use it to look at or Restore a deleted record. For other
// models it changes nothing.
func IncludeDeleted() QueryOption {
	return includeDeleted{}
}

type includeDeleted struct{}

func (includeDeleted) applyRead(c *readConfig) error { c.includeDeleted = true; return nil }
func (includeDeleted) applyFind(q *findQuery) error  { q.includeDeleted = true; return nil }
func (includeDeleted) applyClaim(q *findQuery) error { q.includeDeleted = true; return nil }

// Preload makes Get and Find also load the association name (a field of
// the model: "Items", nested "Items.Parts", or clause.Associations for all)
// with GORM's Preload, in the same transaction when there is one; args are
// GORM's (conditions on the associated records). An unknown association is
// an error matching locking.ErrInvalidArgument.
//
// Preloaded records are for reading: Update refuses an entity whose
// association fields hold records (see SkipAssociations).
func Preload(name string, args ...any) QueryOption {
	return preloadOpt{preload{name: name, args: args}}
}

type preloadOpt struct{ p preload }

func (o preloadOpt) applyRead(c *readConfig) error { c.preloads = append(c.preloads, o.p); return nil }
func (o preloadOpt) applyFind(q *findQuery) error  { q.preloads = append(q.preloads, o.p); return nil }
func (o preloadOpt) applyClaim(q *findQuery) error { q.preloads = append(q.preloads, o.p); return nil }

func readConfigOf(opts []ReadOption) (readConfig, error) {
	var c readConfig
	err := applyOpts(opts, &c, ReadOption.applyRead)
	return c, err
}

type mutateConfig struct {
	retry    locking.RetryPolicy
	attempts *int
	lock     []LockOption // MutateRowLocked only
	op       *OperationKey
	report   *MutateReport
}

// mutateFunc is a MutateOption made of a function.
type mutateFunc func(*mutateConfig) error

func (f mutateFunc) applyMutate(c *mutateConfig) error       { return f(c) }
func (f mutateFunc) applyLockedMutate(c *mutateConfig) error { return f(c) }

// Retry sets the retry policy of this call, overriding the repository's. An
// invalid policy gives an error matching locking.ErrInvalidArgument.
func Retry(p locking.RetryPolicy) MutateOption {
	return mutateFunc(func(c *mutateConfig) error {
		if err := p.Validate(); err != nil {
			return err
		}
		c.retry = p
		return nil
	})
}

func (r *Repository[T]) mutateConfig(opts []MutateOption) (mutateConfig, error) {
	c := mutateConfig{retry: r.retry}
	err := applyOpts(opts, &c, MutateOption.applyMutate)
	return c, err
}

func (r *Repository[T]) lockedMutateConfig(opts []LockedMutateOption) (mutateConfig, error) {
	c := mutateConfig{retry: r.retry}
	err := applyOpts(opts, &c, LockedMutateOption.applyLockedMutate)
	return c, err
}

func writeConfigOf(opts []WriteOption) (writeConfig, error) {
	if len(opts) == 0 {
		return writeConfig{}, nil // no option: nothing escapes to the heap
	}
	var c writeConfig
	err := applyOpts(opts, &c, WriteOption.applyWrite)
	return c, err
}

func updateConfigOf(opts []UpdateOption) (writeConfig, error) {
	if len(opts) == 0 {
		return writeConfig{}, nil // no option: nothing escapes to the heap
	}
	var c writeConfig
	err := applyOpts(opts, &c, UpdateOption.applyUpdate)
	return c, err
}

func deleteConfigOf(opts []DeleteOption) (writeConfig, error) {
	if len(opts) == 0 {
		return writeConfig{}, nil
	}
	var c writeConfig
	err := applyOpts(opts, &c, DeleteOption.applyDelete)
	return c, err
}

// applyOpts applies every option of opts that is not nil to c, in order,
// and stops at the first error. Each option family calls it with its own
// apply method.
func applyOpts[O comparable, C any](opts []O, c *C, apply func(O, *C) error) error {
	var none O
	for _, opt := range opts {
		if opt == none {
			continue
		}
		if err := apply(opt, c); err != nil {
			return err
		}
	}
	return nil
}
