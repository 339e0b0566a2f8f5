package reliability_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	pgopen "github.com/gormlock/gormlock/opendb/postgres"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// cancelEnv is a database for the cancellation tests: the repositories'
// connection, and a way to hold the record (a row lock on PostgreSQL, the
// write lock on SQLite) from a connection of its own.
type cancelEnv struct {
	dialect string
	db      *gorm.DB // the repositories' database
	sqlDB   *sql.DB
	app     string // PostgreSQL application_name of db's sessions
	// hold keeps record id locked until release is closed; it returns
	// once the lock is held.
	hold func(t *testing.T, id int64, release <-chan struct{}) (done <-chan error)
}

func newCancelEnv(t *testing.T, dialect string) *cancelEnv {
	t.Helper()
	env := &cancelEnv{dialect: dialect}
	switch dialect {
	case "sqlite":
		path := filepath.Join(t.TempDir(), "cancel.db")
		env.db = testdb.OpenSQLiteFile(t, path)
		env.hold = func(t *testing.T, _ int64, release <-chan struct{}) <-chan error {
			other := testdb.RawSQLite(t, path, "_busy_timeout=0")
			tx, err := other.BeginTx(context.Background(), nil)
			require.NoError(t, err)
			_, err = tx.Exec("UPDATE accounts SET owner = owner")
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() { <-release; done <- tx.Rollback() }()
			return done
		}
	default:
		env.app = fmt.Sprintf("glcancel%d", time.Now().UnixNano()%1e9)
		dsn := fixtures.WithParam(testdb.PostgresSchema(t), "application_name", env.app)
		var err error
		env.db, err = pgopen.Open(dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = fixtures.Close(env.db) })
		require.NoError(t, fixtures.Migrate(context.Background(), env.db))
		holder, err := pgopen.Open(fixtures.WithParam(dsn, "application_name", "holder"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = fixtures.Close(holder) })
		env.hold = func(t *testing.T, id int64, release <-chan struct{}) <-chan error {
			tx := holder.Begin()
			require.NoError(t, tx.Error)
			require.NoError(t, tx.Exec("SELECT 1 FROM accounts WHERE id = ? FOR UPDATE", id).Error)
			require.NoError(t, tx.Exec("SELECT 1 FROM gormlock_leases FOR UPDATE").Error)
			done := make(chan error, 1)
			go func() { <-release; done <- tx.Rollback().Error }()
			return done
		}
	}
	var err error
	env.sqlDB, err = env.db.DB()
	require.NoError(t, err)
	return env
}

// settled checks what must hold once a cancelled call has returned: no
// connection of the pool in use, and on PostgreSQL no session of the
// repositories left in a transaction.
func (env *cancelEnv) settled(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return env.sqlDB.Stats().InUse == 0 }, 5*time.Second, 10*time.Millisecond,
		"a connection stayed in use: %+v", env.sqlDB.Stats())
	if env.app != "" {
		require.Eventually(t, func() bool {
			var n int64
			_ = env.db.Raw("SELECT count(*) FROM pg_stat_activity WHERE application_name = ? AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()", env.app).Scan(&n).Error
			return n == 0
		}, 5*time.Second, 10*time.Millisecond, "a session was left idle in a transaction")
	}
}

// TestCancellationAtEveryStage cancels a call at each stage it can wait in
// — before its read, in fn, while waiting for a lock another connection
// holds, during the retry backoff, while acquiring a lease, and while
// queueing for SQLite's write lock behind this process's own writer — and
// checks that it returns then (before the blocker lets go), with the
// context's error, writing nothing or reporting an unknown outcome, and
// that no connection or session is left behind.
func TestCancellationAtEveryStage(t *testing.T) {
	for _, dialect := range testdb.Dialects {
		t.Run(dialect, func(t *testing.T) {
			env := newCancelEnv(t, dialect)
			accounts, err := repository.New[fixtures.Account](env.db, repository.WithLeases(),
				repository.WithRetryPolicy(locking.RetryPolicy{MaxAttempts: 5, BaseDelay: 10 * time.Second, MaxDelay: 10 * time.Second}))
			require.NoError(t, err)
			inc := func(a *fixtures.Account) error { a.Balance++; return nil }

			type stage struct {
				name string
				// blocked makes the call wait: it returns a function
				// that lets go.
				blocked func(t *testing.T, a *fixtures.Account) (letGo func())
				call    func(ctx context.Context, cancel context.CancelFunc, a *fixtures.Account) error
			}
			holdRecord := func(t *testing.T, a *fixtures.Account) func() {
				release := make(chan struct{})
				done := env.hold(t, a.ID, release)
				return func() { close(release); require.NoError(t, <-done) }
			}
			stages := []stage{
				{name: "before the read", call: func(ctx context.Context, cancel context.CancelFunc, a *fixtures.Account) error {
					cancel()
					_, err := accounts.Mutate(ctx, a.ID, inc)
					return err
				}},
				{name: "in fn", call: func(ctx context.Context, cancel context.CancelFunc, a *fixtures.Account) error {
					_, err := accounts.Mutate(ctx, a.ID, func(a *fixtures.Account) error { cancel(); a.Balance++; return nil })
					return err
				}},
				{name: "in fn, with an operation key", call: func(ctx context.Context, cancel context.CancelFunc, a *fixtures.Account) error {
					_, err := accounts.Mutate(ctx, a.ID, func(a *fixtures.Account) error { cancel(); a.Balance++; return nil }, repository.OpKey(fmt.Sprintf("c%d", a.ID)))
					return err
				}},
				{name: "waiting for the lock: Update", blocked: holdRecord, call: func(ctx context.Context, cancel context.CancelFunc, a *fixtures.Account) error {
					time.AfterFunc(200*time.Millisecond, cancel)
					e := *a
					e.Balance = 99
					return accounts.Update(ctx, &e)
				}},
				{name: "waiting for the lock: MutateRowLocked", blocked: holdRecord, call: func(ctx context.Context, cancel context.CancelFunc, a *fixtures.Account) error {
					time.AfterFunc(200*time.Millisecond, cancel)
					_, err := accounts.MutateRowLocked(ctx, a.ID, inc)
					return err
				}},
				{name: "waiting for the lock: RunInTx", blocked: holdRecord, call: func(ctx context.Context, cancel context.CancelFunc, a *fixtures.Account) error {
					time.AfterFunc(200*time.Millisecond, cancel)
					return repository.RunInTx(ctx, env.db, func(ctx context.Context) error {
						_, err := accounts.Mutate(ctx, a.ID, inc)
						return err
					})
				}},
				{name: "acquiring a lease", blocked: holdRecord, call: func(ctx context.Context, cancel context.CancelFunc, a *fixtures.Account) error {
					time.AfterFunc(200*time.Millisecond, cancel)
					_, _, err := accounts.Leases().Acquire(ctx, a.ID, "me")
					return err
				}},
				{name: "in the retry backoff", call: func(ctx context.Context, cancel context.CancelFunc, a *fixtures.Account) error {
					time.AfterFunc(200*time.Millisecond, cancel)
					_, err := accounts.Mutate(ctx, a.ID, func(x *fixtures.Account) error {
						// Another writer gets in every time: the attempt is
						// stale, and Mutate backs off for up to 10 s.
						return env.db.Exec("UPDATE accounts SET version = version + 1 WHERE id = ?", a.ID).Error
					})
					return err
				}},
			}
			if dialect == "sqlite" {
				stages = append(stages, stage{name: "queueing behind this process's writer", blocked: func(t *testing.T, a *fixtures.Account) func() {
					release := make(chan struct{})
					done := make(chan error, 1)
					held := make(chan struct{})
					go func() {
						done <- repository.RunInTx(context.Background(), env.db, func(context.Context) error {
							close(held)
							<-release
							return nil
						})
					}()
					<-held
					return func() { close(release); require.NoError(t, <-done) }
				}, call: func(ctx context.Context, cancel context.CancelFunc, a *fixtures.Account) error {
					time.AfterFunc(200*time.Millisecond, cancel)
					_, err := accounts.Mutate(ctx, a.ID, inc)
					return err
				}})
			}
			for _, s := range stages {
				t.Run(s.name, func(t *testing.T) {
					a := &fixtures.Account{Owner: "cancel", Balance: 10}
					require.NoError(t, accounts.Create(context.Background(), a))
					letGo := func() {}
					if s.blocked != nil {
						letGo = s.blocked(t, a)
					}
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					var returned, released bool
					var mu sync.Mutex
					timer := time.AfterFunc(5*time.Second, func() {
						mu.Lock()
						released = !returned
						mu.Unlock()
						letGo()
					})
					start := time.Now()
					err := s.call(ctx, cancel, a)
					elapsed := time.Since(start)
					mu.Lock()
					returned = true
					wasReleased := released
					mu.Unlock()
					if timer.Stop() {
						letGo()
					}
					require.Error(t, err)
					assert.False(t, wasReleased, "returned only after the blocker let go (%v): the wait did not end with the context", elapsed)
					assert.ErrorIs(t, err, context.Canceled)
					time.Sleep(50 * time.Millisecond) // a statement still on the server finishes
					var row struct{ Balance, Version int64 }
					require.NoError(t, env.db.Raw("SELECT balance, version FROM accounts WHERE id = ?", a.ID).Scan(&row).Error)
					if errors.Is(err, locking.ErrCommitUnknown) {
						assert.Contains(t, []int64{10, 11, 99}, row.Balance, "unknown: applied or not, never half")
					} else if s.name != "in the retry backoff" {
						assert.EqualValues(t, 10, row.Balance, "not applied: %v", err)
						assert.Equal(t, a.Version, row.Version)
					}
					env.settled(t)
					t.Logf("returned after %v: %v", elapsed.Round(time.Millisecond), err)
				})
			}
		})
	}
}
