package repository_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/repository"
)

// lockedNow reports whether another session finds the account row locked:
// SELECT ... FOR UPDATE NOWAIT in a transaction of its own, which fails at
// once on a row another transaction holds. An error other than the lock
// fails the test.
func lockedNow(t *testing.T, db *gorm.DB, id int64) bool {
	t.Helper()
	locked := false
	err := db.Transaction(func(tx *gorm.DB) error {
		var got []int64
		err := tx.Raw("SELECT id FROM accounts WHERE id = ? FOR UPDATE NOWAIT", id).Scan(&got).Error
		if err != nil {
			locked = true
			return err
		}
		if len(got) != 1 {
			return fmt.Errorf("account %d: %d rows", id, len(got))
		}
		return nil
	})
	if err != nil && !locked {
		require.NoError(t, err)
	}
	return locked
}

// sleepSQL is a statement of each server that runs for 2 s.
var sleepSQL = map[string]string{
	"postgres": "SELECT pg_sleep(2)",
	"mariadb":  "SELECT SLEEP(2)",
}

// RunInTx returns only after the server has ended its transaction, also
// when ctx ends while one of fn's statements runs — a sleep, or a wait for
// another session's row lock: right after it returns, another session's
// SELECT ... FOR UPDATE NOWAIT on the row fn wrote gets it, 100 rounds of
// 100 for each kind of statement. (Left to the drivers, the server goes on
// running the statement and holds the row: see the negative control.)
func TestRunInTxEndsOnTheServerWhenCtxEndsMidStatement(t *testing.T) {
	const rounds = 100
	for _, d := range []string{"postgres", "mariadb"} {
		t.Run(d, func(t *testing.T) {
			db := testdb.Open(t, d)
			accounts, _ := repos(t, db)
			a := newAccount(t, accounts, "ann", 10)
			b := newAccount(t, accounts, "bob", 10)
			for _, kind := range []string{"sleep", "lock wait"} {
				t.Run(kind, func(t *testing.T) {
					held := 0
					for i := range rounds {
						var blocker *gorm.DB
						if kind == "lock wait" {
							blocker = db.Begin()
							require.NoError(t, blocker.Error)
							t.Cleanup(func() { blocker.Rollback() })
							var got []int64
							require.NoError(t, blocker.Raw("SELECT id FROM accounts WHERE id = ? FOR UPDATE", b.ID).Scan(&got).Error)
						}
						ctx, cancel := context.WithCancel(testdb.Ctx(t))
						timer := time.AfterFunc(time.Duration(20+i%20)*time.Millisecond, cancel)
						err := repository.RunInTx(ctx, db, func(ctx context.Context) error {
							x, err := accounts.Get(ctx, a.ID)
							if err != nil {
								return err
							}
							x.Balance++
							if err := accounts.Update(ctx, x); err != nil {
								return err
							}
							if kind == "sleep" {
								return repository.Tx(ctx, db).Exec(sleepSQL[d]).Error
							}
							var got []int64
							return repository.Tx(ctx, db).Raw("SELECT id FROM accounts WHERE id = ? FOR UPDATE", b.ID).Scan(&got).Error
						})
						if lockedNow(t, db, a.ID) {
							held++
						}
						timer.Stop()
						cancel()
						require.ErrorIs(t, err, context.Canceled, "round %d", i)
						if blocker != nil {
							require.NoError(t, blocker.Rollback().Error)
						}
					}
					assert.Zero(t, held, "rounds of %d in which fn's row was still locked after RunInTx returned", rounds)
					requireRow(t, db, a.ID, 10, a.Version, "every round rolled back")
				})
			}
		})
	}
	t.Run("sqlite", func(t *testing.T) {
		path := t.TempDir() + "/cancel.db"
		db := testdb.OpenSQLiteFile(t, path)
		other := testdb.RawSQLite(t, path, "_busy_timeout=0")
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)
		for i := range 20 {
			ctx, cancel := context.WithCancel(testdb.Ctx(t))
			timer := time.AfterFunc(time.Duration(20+i)*time.Millisecond, cancel)
			err := repository.RunInTx(ctx, db, func(ctx context.Context) error {
				x, err := accounts.Get(ctx, a.ID)
				if err != nil {
					return err
				}
				x.Balance++
				if err := accounts.Update(ctx, x); err != nil {
					return err
				}
				var n int64
				return repository.Tx(ctx, db).Raw(`WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000)
					SELECT count(*) FROM c`).Scan(&n).Error
			})
			// Another connection, which does not wait: the write lock is free.
			_, werr := other.Exec("UPDATE accounts SET owner = owner WHERE id = ?", a.ID)
			timer.Stop()
			cancel()
			require.NoError(t, werr, "round %d: a write right after RunInTx returned", i)
			require.Error(t, err, "round %d", i)
		}
		requireRow(t, db, a.ID, 10, a.Version, "every round rolled back")
	})
}

// The negative control: a plain GORM transaction whose context ends while
// its statement sleeps on MariaDB returns while the server still runs the
// statement, holding the row the transaction wrote.
func TestPlainGormTransactionLeavesRowsLockedWhenCtxEndsMidStatement(t *testing.T) {
	db := testdb.Open(t, "mariadb")
	accounts, _ := repos(t, db)
	a := newAccount(t, accounts, "ann", 10)
	held := 0
	const rounds = 3
	for i := range rounds {
		ctx, cancel := context.WithCancel(testdb.Ctx(t))
		timer := time.AfterFunc(30*time.Millisecond, cancel)
		err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Exec("UPDATE accounts SET balance = balance + 1 WHERE id = ?", a.ID).Error; err != nil {
				return err
			}
			return tx.Exec("SELECT SLEEP(0.5)").Error
		})
		if lockedNow(t, db, a.ID) {
			held++
		}
		timer.Stop()
		cancel()
		require.Error(t, err, "round %d", i)
		// Wait for the server to end the orphaned statement.
		require.NoError(t, db.Transaction(func(tx *gorm.DB) error {
			var got []int64
			return tx.Raw("SELECT id FROM accounts WHERE id = ? FOR UPDATE", a.ID).Scan(&got).Error
		}))
	}
	t.Logf("plain GORM: the row was still locked after return in %d of %d rounds", held, rounds)
	assert.Positive(t, held, "the unguarded path must show the row still locked at least once")
	requireRow(t, db, a.ID, 10, a.Version, "the orphaned transactions rolled back in the end")
}
