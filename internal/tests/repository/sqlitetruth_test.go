package repository_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// sqliteWrites are gormlock's write paths on one account, each applying
// one increment of its balance (Create: one more account).
func sqliteWrites(accounts *repository.Repository[fixtures.Account], id int64) map[string]func(ctx context.Context) error {
	current := func() fixtures.Account {
		a, err := accounts.Get(context.Background(), id)
		if err != nil {
			panic(fmt.Sprintf("reading account %d: %v", id, err))
		}
		return *a
	}
	inc := func(a *fixtures.Account) error { a.Balance++; return nil }
	return map[string]func(ctx context.Context) error{
		"Update": func(ctx context.Context) error { a := current(); a.Balance++; return accounts.Update(ctx, &a) },
		"Mutate": func(ctx context.Context) error { _, err := accounts.Mutate(ctx, id, inc); return err },
		"MutateRowLocked": func(ctx context.Context) error {
			_, err := accounts.MutateRowLocked(ctx, id, inc)
			return err
		},
		"Apply/Add": func(ctx context.Context) error {
			_, err := accounts.Apply(ctx, id, []repository.Change{repository.Add("balance", 1)})
			return err
		},
		// SQL of the caller's: an expression, and a condition.
		"Apply/Expr": func(ctx context.Context) error {
			_, err := accounts.Apply(ctx, id, []repository.Change{repository.Expr("balance", "balance + ?", 1)})
			return err
		},
		"Apply/If": func(ctx context.Context) error {
			_, err := accounts.Apply(ctx, id, []repository.Change{repository.Add("balance", 1)}, repository.If("balance >= ?", 0))
			return err
		},
		"Create": func(ctx context.Context) error { return accounts.Create(ctx, &fixtures.Account{Owner: "new"}) },
	}
}

// sqliteDriver is one of the SQLite drivers gormlock's openers use: how to
// open a file with gormlock's opener, and with plain database/sql as a
// second client of it (driver name, and the DSN's parameters for a busy
// timeout of 0).
type sqliteDriver struct {
	name, sqlName, busy0 string
	open                 func(t *testing.T, path string) *gorm.DB
}

var sqliteDrivers = []sqliteDriver{
	{"pure-Go", "sqlite", "_pragma=busy_timeout(0)", func(t *testing.T, path string) *gorm.DB { return openPureGo(t, path) }},
	{"go-sqlite3", "sqlite3", "_busy_timeout=0", func(t *testing.T, path string) *gorm.DB { return testdb.OpenSQLiteFile(t, path) }},
}

// account opens a new SQLite file with gormlock's opener and creates an
// account with the given balance in it.
func (d sqliteDriver) account(t *testing.T, balance int64) (path string, db *gorm.DB, accounts *repository.Repository[fixtures.Account], a *fixtures.Account) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "test.db")
	db = d.open(t, path)
	accounts, err := repository.New[fixtures.Account](db)
	require.NoError(t, err)
	a = &fixtures.Account{Owner: "ann", Balance: balance}
	require.NoError(t, accounts.Create(context.Background(), a))
	return path, db, accounts, a
}

// client opens the SQLite file at path a second time with plain
// database/sql, one connection: to read what the writes did, or to hold
// the write lock. A connection of its own, since the pure-Go driver can
// leave a statement's interrupt for the connection's next statement (a
// read with no deadline failed with SQLITE_INTERRUPT after an UPDATE whose
// deadline had ended).
func (d sqliteDriver) client(t *testing.T, path string) *sql.DB {
	t.Helper()
	c, err := sql.Open(d.sqlName, "file:"+path+"?"+d.busy0)
	require.NoError(t, err)
	c.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// sqliteState is what the writes of sqliteWrites change: the account's
// balance and the number of accounts.
func sqliteState(t *testing.T, r *sql.DB, id int64) (balance, accounts int64) {
	t.Helper()
	require.NoError(t, r.QueryRow("SELECT balance, (SELECT count(*) FROM accounts) FROM accounts WHERE id = ?", id).Scan(&balance, &accounts))
	return balance, accounts
}

// On SQLite a write whose context ends while it runs is applied exactly
// when it says so, with either driver. Given a context that can end, the
// pure-Go driver (github.com/glebarez/go-sqlite) answers nil for an Exec
// it never ran when the context ends as it starts (with the previous
// statement's rows affected: the control below), and can interrupt the
// connection's next statement instead of the one it was meant for;
// modernc.org/sqlite v1.60.1 answers the context's error for UPDATEs that
// committed. gormlock sends its statements with a context that does not
// end, after looking at ctx, so the answer is what the statement did.
// Each write runs with deadlines from 0 to twice the time it takes (and
// one round in 60 with a minute): some end before it is sent, some as it
// runs, some after. Every error must be the context's, definite (not
// ErrCommitUnknown), with nothing written; every success must have written
// one increment, also the ones whose deadline ended as they ran. A plain
// GORM update the plugin guards is one of the writes.
func TestSQLiteWriteOutcomeIsTheTruthWhenItsContextEnds(t *testing.T) {
	for _, d := range sqliteDrivers {
		t.Run(d.name, func(t *testing.T) {
			path, db, accounts, a := d.account(t, 0)
			reader := d.client(t, path)
			// A plain GORM update the plugin guards, without GORM's
			// default transaction: its outcome is the statement's rows
			// affected.
			plain := d.open(t, path)
			require.NoError(t, plain.Use(repository.Plugin(repository.GuardGORMUpdates())))
			plain = plain.Session(&gorm.Session{SkipDefaultTransaction: true})
			writes := sqliteWrites(accounts, a.ID)
			writes["plugin: Updates"] = func(ctx context.Context) error {
				var cur fixtures.Account
				if err := plain.Where("id = ?", a.ID).Take(&cur).Error; err != nil {
					return fmt.Errorf("reading: %w", err)
				}
				return plain.WithContext(ctx).Model(&cur).Updates(map[string]any{"balance": cur.Balance + 1}).Error
			}
			const rounds = 300
			lateAll := 0 // writes whose deadline ended as they ran, on every path
			for name, write := range writes {
				t.Run(name, func(t *testing.T) {
					// How long the write takes here, with a context that
					// can end (but does not): the deadlines run from 0 to
					// twice that.
					took := make([]time.Duration, 21)
					for i := range took {
						ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
						begin := time.Now()
						require.NoError(t, write(ctx))
						took[i] = time.Since(begin)
						cancel()
					}
					slices.Sort(took)
					typical := took[len(took)/2]
					var applied, ended, late int
					for i := range rounds {
						balance, n := sqliteState(t, reader, a.ID)
						d := typical * time.Duration(i%60) / 30
						if i%60 == 59 {
							d = time.Minute
						}
						ctx, cancel := context.WithTimeout(context.Background(), d)
						err := write(ctx)
						over := ctx.Err() != nil
						cancel()
						balance2, n2 := sqliteState(t, reader, a.ID)
						written := balance2 != balance || n2 != n
						if err == nil {
							applied++
							if over {
								late++ // its deadline ended as it ran
							}
							require.True(t, written, "round %d: reported applied, nothing written", i)
							require.Equal(t, int64(1), balance2-balance+n2-n, "round %d: one increment", i)
							continue
						}
						ended++
						require.ErrorIs(t, err, context.DeadlineExceeded, "round %d", i)
						require.NotErrorIs(t, err, locking.ErrCommitUnknown, "round %d: a definite outcome", i)
						require.False(t, written, "round %d: reported not applied (%v), but written", i, err)
					}
					t.Logf("a write takes %v; %d applied (%d as their deadline ended), %d ended by their deadline", typical, applied, late, ended)
					require.NotZero(t, applied, "no write got through")
					require.NotZero(t, ended, "no deadline ended a write")
					lateAll += late
				})
			}
			require.NotZero(t, lateAll, "no deadline ended as a write ran")
			if d.name != "pure-Go" {
				return
			}
			t.Run("control: database/sql", func(t *testing.T) {
				sqlDB, err := db.DB()
				require.NoError(t, err)
				conn, err := sqlDB.Conn(context.Background())
				require.NoError(t, err)
				defer conn.Close()
				// The lie shows within a few hundred tries on 2 CPUs, a few
				// thousand on one (seconds under -race).
				var lies, errs, i int
				for begin := time.Now(); lies == 0 && time.Since(begin) < time.Minute; i++ {
					balance, _ := sqliteState(t, reader, a.ID)
					ctx, cancel := context.WithCancel(context.Background())
					cancel()
					res, err := conn.ExecContext(ctx, "UPDATE accounts SET balance = balance + 1 WHERE id = ?", a.ID)
					balance2, _ := sqliteState(t, reader, a.ID)
					if err != nil {
						errs++
						continue
					}
					if n, _ := res.RowsAffected(); balance2 == balance {
						lies++
						t.Logf("try %d: nil error, %d row(s) affected, and the UPDATE did not run", i, n)
					}
				}
				require.NotZero(t, lies, "in %d writes whose context had ended the driver answered %d errors, each for a write not applied", i, errs)
			})
		})
	}
}

// While another connection holds SQLite's write lock, a write whose
// deadline ends its wait fails with the context's error, definite, and
// writes nothing — on every write path, with either driver, many times
// over, with deadlines from 0.5 to 5 ms that end the wait at any point of
// its tries. (Given the caller's context, the pure-Go driver answered nil
// for a BEGIN IMMEDIATE it never ran as the deadline ended, about once in
// 100 waits, and Create then failed with SQLITE_INTERRUPT, without the
// context's error.)
func TestSQLiteWriteWaitEndsWithItsContextOnEveryPath(t *testing.T) {
	for _, d := range sqliteDrivers {
		t.Run(d.name, func(t *testing.T) {
			path, _, accounts, a := d.account(t, 10)
			reader := d.client(t, path)
			other := d.client(t, path)
			const rounds = 150
			for name, write := range sqliteWrites(accounts, a.ID) {
				t.Run(name, func(t *testing.T) {
					balance, n := sqliteState(t, reader, a.ID)
					for i := range rounds {
						tx, err := other.BeginTx(context.Background(), nil)
						require.NoError(t, err)
						_, err = tx.Exec("UPDATE accounts SET owner = owner")
						require.NoError(t, err)
						ctx, cancel := context.WithTimeout(context.Background(), 500*time.Microsecond+time.Duration(i%10)*500*time.Microsecond)
						err = write(ctx)
						cancel()
						require.NoError(t, tx.Rollback())
						require.Error(t, err, "round %d: written while the lock was held", i)
						require.ErrorIs(t, err, context.DeadlineExceeded, "round %d", i)
						require.NotErrorIs(t, err, locking.ErrCommitUnknown, "round %d: a definite outcome", i)
						require.False(t, errors.Is(err, locking.ErrLocked), "round %d: a wait is not SQLite's busy error: %v", i, err)
					}
					balance2, n2 := sqliteState(t, reader, a.ID)
					require.Equal(t, balance, balance2, "nothing written")
					require.Equal(t, n, n2, "nothing created")
				})
			}
		})
	}
}
