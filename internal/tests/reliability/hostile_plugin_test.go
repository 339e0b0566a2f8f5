package reliability_test

import (
	"context"
	"errors"
	"math"
	"sync/atomic"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// hostilePluginCases are the GORM plugin's: unusable databases and
// conflicting options are refused, never a panic; a plain GORM write the
// plugin refuses (a stale copy with GuardGORMUpdates, an unguarded write
// with StrictGORMWrites) writes nothing, whatever SQL its values hold. The
// cases that register the plugin run on a database of their own.
func hostilePluginCases() []hostileCase {
	use := func(f *hostileFixture, opts ...repository.PluginOption) error {
		return f.db.Use(repository.Plugin(opts...))
	}
	return []hostileCase{
		{api: "Plugin", input: "nil *gorm.DB", want: hostileInvalid, call: func(context.Context, *hostileFixture) error {
			return repository.Plugin().Initialize(nil)
		}},
		{api: "Plugin", input: "zero *gorm.DB", want: hostileInvalid, call: func(context.Context, *hostileFixture) error {
			return repository.Plugin().Initialize(&gorm.DB{})
		}},
		{api: "Plugin", input: "nil PluginOption, then registered twice", fresh: true, want: hostileIs(gorm.ErrRegistered),
			call: func(_ context.Context, f *hostileFixture) error {
				if err := use(f, nil); err != nil {
					return hostileCheck("the first registration failed: %v", err)
				}
				return use(f)
			}},
		{api: "Plugin", uses: []string{"StrictGORMWrites"}, input: "StrictGORMWrites refusing and not", fresh: true, want: hostileInvalid,
			call: func(_ context.Context, f *hostileFixture) error {
				return use(f, repository.StrictGORMWrites(true), repository.StrictGORMWrites(false))
			}},
		{api: "Plugin", uses: []string{"StrictGORMWrites"}, input: "refused: an unguarded plain GORM update with SQL in its value", fresh: true,
			want: hostileIs(locking.ErrUnguardedWrite), call: func(ctx context.Context, f *hostileFixture) error {
				if err := use(f, repository.StrictGORMWrites(true)); err != nil {
					return err
				}
				return f.db.WithContext(ctx).Model(&fixtures.Account{}).Where("id = ?", f.a2.ID).
					Update("owner", "'; DELETE FROM accounts; --").Error
			}},
		{api: "Plugin", uses: []string{"StrictGORMWrites"}, input: "refused: an unguarded plain GORM delete", fresh: true,
			want: hostileIs(locking.ErrUnguardedWrite), call: func(ctx context.Context, f *hostileFixture) error {
				if err := use(f, repository.StrictGORMWrites(true)); err != nil {
					return err
				}
				a := f.a3
				return f.db.WithContext(ctx).Delete(&a).Error
			}},
		{api: "Plugin", uses: []string{"GuardGORMUpdates"}, input: "Save of a stale copy with SQL in its values", fresh: true,
			want: hostileStale, call: func(ctx context.Context, f *hostileFixture) error {
				if err := use(f, repository.GuardGORMUpdates()); err != nil {
					return err
				}
				a := f.a2
				a.Version--
				a.Owner = "x'); DROP TABLE accounts; --"
				err := f.db.WithContext(ctx).Save(&a).Error
				var stale *locking.StaleDataError
				if errors.As(err, &stale) && (stale.Expected != f.a2.Version-1 || stale.Actual != f.a2.Version) {
					return hostileCheck("the error says versions %d and %d", stale.Expected, stale.Actual)
				}
				return err
			}},
		{api: "Plugin", uses: []string{"GuardGORMUpdates"}, input: "Save of a missing record: not inserted", fresh: true,
			want: hostileIs(locking.ErrStaleData, locking.ErrNotFound), call: func(ctx context.Context, f *hostileFixture) error {
				if err := use(f, repository.GuardGORMUpdates()); err != nil {
					return err
				}
				a := f.a2
				a.ID, a.Owner = math.MaxInt64, "ghost"
				return f.db.WithContext(ctx).Save(&a).Error
			}},
		{api: "ObserverPlugin", input: "nil Observer: refused, nothing registered", fresh: true, want: hostileInvalid,
			call: func(_ context.Context, f *hostileFixture) error {
				err := f.db.Use(repository.ObserverPlugin(nil))
				if _, ok := f.db.Config.Plugins["gormlock:observer"]; ok {
					return hostileCheck("a nil Observer was registered")
				}
				return err
			}},
		{api: "ObserverPlugin", input: "registered twice", fresh: true, want: hostileIs(gorm.ErrRegistered),
			call: func(_ context.Context, f *hostileFixture) error {
				if err := f.db.Use(repository.ObserverPlugin(&countingObserver{})); err != nil {
					return hostileCheck("the first registration failed: %v", err)
				}
				return f.db.Use(repository.ObserverPlugin(&countingObserver{}))
			}},
		{api: "New", uses: []string{"WithObserver", "ObserverPlugin"}, input: "WithObserver(nil) beside a registered Observer: observes nothing",
			fresh: true, want: hostileNotFound, call: func(ctx context.Context, f *hostileFixture) error {
				registered := &countingObserver{}
				if err := f.db.Use(repository.ObserverPlugin(registered)); err != nil {
					return err
				}
				r, err := repository.New[fixtures.Account](f.db, repository.WithObserver(nil))
				if err != nil {
					return err
				}
				_, err = r.Mutate(ctx, int64(math.MaxInt64), func(a *fixtures.Account) error { a.Balance++; return nil })
				if n := registered.calls.Load(); n != 0 {
					return hostileCheck("the registered Observer heard %d calls", n)
				}
				return err
			}},
	}
}

// countingObserver is a repository.Observer that counts the calls it is
// told of.
type countingObserver struct{ calls atomic.Int64 }

func (o *countingObserver) StartCall(ctx context.Context, _ repository.Call) context.Context {
	o.calls.Add(1)
	return ctx
}
func (*countingObserver) Attempt(context.Context, repository.Call, repository.Attempt) {}
func (*countingObserver) EndCall(context.Context, repository.Call, repository.CallEnd) {}
func (*countingObserver) Wait(context.Context, repository.Wait)                        {}
func (*countingObserver) UnknownOutcome(context.Context, repository.UnknownOutcome)    {}
