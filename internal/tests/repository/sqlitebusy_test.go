package repository_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	puresqlite "github.com/glebarez/sqlite"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// busyClients is how many clients of one file the busy-timeout test runs,
// each a pool with a gate and a lock-file descriptor of its own, as a
// process has.
const busyClients = 3

// No gormlock call fails with SQLite's "database is locked" because other
// writers kept the lock for longer than the connection's busy timeout: with
// a busy_timeout of 1 ms, clients of one file (pools of their own, as
// processes) hammer it with every kind of gormlock write, with a context
// that can end and with context.Background, and every call succeeds: each
// waited its turn. The counters grew by exactly the successful increments.
// Negative control: plain database/sql writers on the same file with the
// same busy timeout do fail with "database is locked", so the lock was
// contended for longer than the busy timeout.
func TestSQLiteBusyTimeoutNeverFailsAGormlockCall(t *testing.T) {
	// Each driver with its own database/sql driver for the negative
	// control: two copies of SQLite in one process must not open one file
	// (POSIX locks are per process: one copy's close drops the other's).
	for _, driver := range []struct {
		name, sqlDriver, dsn string
		open                 func(dsn string) gorm.Dialector
	}{
		{"go-sqlite3", "sqlite3", "?_busy_timeout=1&_journal_mode=WAL&_txlock=immediate&_synchronous=NORMAL", sqlite.Open},
		{"pure-go", "sqlite", "?_pragma=busy_timeout(1)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate", puresqlite.Open},
	} {
		t.Run(driver.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "busy.db")
			var dbs []*gorm.DB
			for i := range busyClients {
				db, err := gorm.Open(driver.open("file:"+path+driver.dsn), &gorm.Config{Logger: logger.Discard})
				require.NoError(t, err)
				t.Cleanup(func() { _ = fixtures.Close(db) })
				if i == 0 {
					require.NoError(t, fixtures.Migrate(context.Background(), db))
				}
				var busy int
				require.NoError(t, db.Raw("PRAGMA busy_timeout").Scan(&busy).Error)
				require.Equal(t, 1, busy)
				dbs = append(dbs, db)
			}
			runBusyLoad(t, dbs, driver.sqlDriver, "file:"+path+driver.dsn)
		})
	}
}

func runBusyLoad(t *testing.T, dbs []*gorm.DB, sqlDriver, dsn string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first, err := repository.New[fixtures.Account](dbs[0])
	require.NoError(t, err)
	a := &fixtures.Account{Owner: "busy"}
	require.NoError(t, first.Create(ctx, a))
	id := a.ID
	// The leases take turns on a record of their own: a lease keeps
	// other lease holders out, not the other writes.
	b := &fixtures.Account{Owner: "busy"}
	require.NoError(t, first.Create(ctx, b))
	inc := func(a *fixtures.Account) error { a.Balance++; return nil }

	var incs, creates atomic.Int64
	var mu sync.Mutex
	var failures []string
	fail := func(name string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 20 {
			failures = append(failures, fmt.Sprintf("%s: %v", name, err))
		}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	const d = 1500 * time.Millisecond
	for c, db := range dbs {
		accounts, err := repository.New[fixtures.Account](db)
		require.NoError(t, err)
		leased, err := repository.New[fixtures.Account](db, repository.WithLeases())
		require.NoError(t, err)
		calls := map[string]func(ctx context.Context) (counted bool, err error){
			"Mutate": func(ctx context.Context) (bool, error) {
				_, err := accounts.Mutate(ctx, id, inc)
				return true, err
			},
			"MutateRowLocked": func(ctx context.Context) (bool, error) {
				_, err := accounts.MutateRowLocked(ctx, id, inc)
				return true, err
			},
			"Apply": func(ctx context.Context) (bool, error) {
				_, err := accounts.Apply(ctx, id, []repository.Change{repository.Add("Balance", 1)})
				return true, err
			},
			"Update": func(ctx context.Context) (bool, error) {
				return true, locking.OnError(ctx, locking.RetryPolicy{MaxAttempts: 1000, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}, locking.IsRetryable, func(ctx context.Context) error {
					e, err := accounts.Get(ctx, id)
					if err != nil {
						return err
					}
					e.Balance++
					return accounts.Update(ctx, e)
				})
			},
			"RunInTx": func(ctx context.Context) (bool, error) {
				return true, repository.RunInTx(ctx, db, func(ctx context.Context) error {
					return accounts.DB(ctx).Exec("UPDATE accounts SET balance = balance + 1, version = version + 1 WHERE id = ?", id).Error
				})
			},
			"Create": func(ctx context.Context) (bool, error) {
				return false, accounts.Create(ctx, &fixtures.Account{Owner: "busy-new"})
			},
			"Leases": func(ctx context.Context) (bool, error) {
				e, l, err := leased.Leases().Acquire(ctx, b.ID, "busy", repository.TTL(20*time.Second))
				if errors.Is(err, locking.ErrLocked) && !locking.IsSQLiteBusy(err) {
					return false, nil // leased by another worker: not a lock wait
				}
				if err != nil {
					return false, err
				}
				e.Balance++
				return true, leased.Leases().Update(ctx, e, l)
			},
		}
		for name, call := range calls {
			for _, background := range []bool{false, true} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					callCtx := ctx
					if background {
						callCtx = context.Background()
					}
					<-start
					for end := time.Now().Add(d); time.Now().Before(end) && ctx.Err() == nil; {
						counted, err := call(callCtx)
						switch {
						case err != nil:
							fail(fmt.Sprintf("client %d %s (background %v)", c, name, background), err)
						case counted:
							incs.Add(1)
						case name == "Create":
							creates.Add(1)
						}
					}
				}()
			}
		}
	}
	// The negative control: database/sql writers with the same busy
	// timeout, beside the load, see SQLite's "database is locked".
	var plainLocked atomic.Int64
	plain, err := sql.Open(sqlDriver, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = plain.Close() })
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for end := time.Now().Add(d); time.Now().Before(end); {
				_, err := plain.Exec("UPDATE accounts SET frozen = frozen WHERE owner = 'nobody'")
				if err != nil && strings.Contains(err.Error(), "database is locked") {
					plainLocked.Add(1)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Empty(t, failures, "every gormlock call waited its turn")
	var sum int64
	require.NoError(t, dbs[0].Raw("SELECT SUM(balance) FROM accounts WHERE owner = 'busy'").Scan(&sum).Error)
	assert.Equal(t, incs.Load(), sum, "the counters grew by exactly the successful increments")
	var n int64
	require.NoError(t, dbs[0].Model(&fixtures.Account{}).Where("owner = 'busy-new'").Count(&n).Error)
	assert.Equal(t, creates.Load(), n, "every acknowledged Create stored a row")
	assert.Positive(t, incs.Load())
	assert.Positive(t, plainLocked.Load(), "negative control: plain writers with the same busy timeout got \"database is locked\"")
	t.Logf("%d increments, %d creates; plain database/sql writers: %d \"database is locked\"", incs.Load(), creates.Load(), plainLocked.Load())
}
