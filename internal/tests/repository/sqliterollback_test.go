package repository_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// slowIncrement adds 1 to an account's balance after a computation that
// takes far longer than the deadlines it is given here: its context ends
// while it runs, and SQLite interrupts it.
const slowIncrement = `UPDATE accounts SET balance = balance + 1 + (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 50000000) SELECT count(*) - count(*) FROM c) WHERE id = ?`

// SQLite rolls a whole transaction back when a write in it is interrupted
// (SQLITE_INTERRUPT: its context ended) and goes back to autocommit: the
// transaction's later statements each commit by themselves, and the
// COMMIT at the end fails. A caller that goes on after the error (as a
// function that logs it and carries on does) would have part of its
// transaction applied and be told that none of it was. In RunInTx the
// statements after the rollback are refused, unsent, and RunInTx reports
// the transaction not committed: nothing of it is applied. The control
// shows the partial write with a plain database/sql transaction.
func TestSQLiteTransactionRolledBackBySQLiteRefusesLaterStatements(t *testing.T) {
	for _, d := range sqliteDrivers {
		t.Run(d.name, func(t *testing.T) {
			path, db, accounts, a := d.account(t, 0)
			r := d.client(t, path)

			t.Run("control/database-sql", func(t *testing.T) {
				raw, err := sql.Open(d.sqlName, "file:"+path)
				require.NoError(t, err)
				defer raw.Close()
				before, _ := sqliteState(t, r, a.ID)
				tx, err := raw.BeginTx(context.Background(), nil)
				require.NoError(t, err)
				_, err = tx.Exec("UPDATE accounts SET balance = balance + 1 WHERE id = ?", a.ID)
				require.NoError(t, err)
				slow, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				_, err = tx.ExecContext(slow, slowIncrement, a.ID)
				cancel()
				require.Error(t, err, "the slow write was not interrupted")
				_, err = tx.Exec("UPDATE accounts SET balance = balance + 1 WHERE id = ?", a.ID)
				require.NoError(t, err, "the statement after the rollback ran in autocommit")
				require.Error(t, tx.Commit(), "COMMIT of a transaction SQLite rolled back")
				after, _ := sqliteState(t, r, a.ID)
				require.Equal(t, before+1, after, "control: the statement after SQLite's rollback committed by itself")
			})

			// The interrupted write is an Exec, or a query whose rows
			// report the interrupt (UPDATE ... RETURNING).
			for _, how := range []string{"Exec", "RETURNING"} {
				t.Run(how, func(t *testing.T) { rolledBackBySQLite(t, db, r, accounts, a.ID, how) })
			}
		})
	}
}

// rolledBackBySQLite runs, in one RunInTx, an increment, the slow
// increment with a deadline that ends while it runs (how: an Exec, or a
// query whose rows report the interrupt), a plain increment and another
// increment of gormlock's, going on past errors, and checks the outcome:
// all of it applied and RunInTx nil, or none of it and an error that says
// so. When SQLite interrupted the slow write, the statements after it
// must have been refused.
func rolledBackBySQLite(t *testing.T, db *gorm.DB, r *sql.DB, accounts *repository.Repository[fixtures.Account], id int64, how string) {
	before, _ := sqliteState(t, r, id)
	var slowErr, laterErr, applyErr error
	err := repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
		if _, err := accounts.Apply(ctx, id, []repository.Change{repository.Add("balance", 1)}); err != nil {
			return err
		}
		// The statement takes seconds: the deadline ends as it runs,
		// even on a loaded machine.
		slow, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		if how == "Exec" {
			slowErr = repository.Tx(slow, db).Exec(slowIncrement, id).Error
		} else {
			// Shorter on the pure-Go driver, which does not interrupt a
			// query while its rows are read, and runs it to its end.
			q := slowIncrement
			if d(t) == "pure-Go" {
				q = strings.Replace(q, "50000000", "2000000", 1)
			}
			var balance int64
			slowErr = repository.Tx(slow, db).Raw(q+" RETURNING balance", id).Row().Scan(&balance)
		}
		cancel()
		// Carries on, ignoring the error: a plain statement, then
		// gormlock's own write.
		laterErr = repository.Tx(ctx, db).Exec("UPDATE accounts SET balance = balance + 1 WHERE id = ?", id).Error
		_, applyErr = accounts.Apply(ctx, id, []repository.Change{repository.Add("balance", 1)})
		return nil
	})
	after, _ := sqliteState(t, r, id)
	t.Logf("slow write: %v; later: %v; RunInTx: %v", slowErr, laterErr, err)
	// Both drivers interrupt an Exec, and go-sqlite3 a query's rows too:
	// SQLite rolled the transaction back, and what follows is refused.
	// The pure-Go driver runs the query to its end (its write stays in
	// the transaction), and database/sql reports the context's error
	// when the rows are read after the deadline.
	if interrupted := how == "Exec" || d(t) == "go-sqlite3"; interrupted {
		require.Error(t, slowErr, "the slow write was not interrupted")
		require.Error(t, laterErr, "a statement after SQLite's rollback was sent")
		require.ErrorIs(t, laterErr, sql.ErrTxDone)
		require.False(t, errors.Is(laterErr, context.DeadlineExceeded), "a statement never sent is not the one interrupted: %v", laterErr)
		require.Contains(t, laterErr.Error(), "rolled the transaction back after a statement failed")
		require.Error(t, applyErr, "gormlock's write after SQLite's rollback")
		require.Error(t, err)
		require.ErrorIs(t, err, sql.ErrTxDone)
		require.Contains(t, err.Error(), "rolled the transaction back")
	}
	if err == nil {
		require.NoError(t, laterErr)
		require.NoError(t, applyErr)
		if slowErr == nil {
			require.Equal(t, before+4, after, "RunInTx committed, but not all of what it acknowledged")
		} else {
			require.Contains(t, []int64{before + 3, before + 4}, after, "RunInTx committed, but not all of what it acknowledged")
		}
	} else {
		require.False(t, errors.Is(err, locking.ErrCommitUnknown), "the outcome is known: %v", err)
		require.Equal(t, before, after, "RunInTx failed, but part of its transaction was applied")
	}

	// The connection is usable afterwards, in and out of transactions.
	require.NoError(t, repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
		_, err := accounts.Apply(ctx, id, []repository.Change{repository.Add("balance", 1)})
		return err
	}))
	_, err = accounts.Apply(context.Background(), id, []repository.Change{repository.Add("balance", 1)})
	require.NoError(t, err)
	final, _ := sqliteState(t, r, id)
	require.Equal(t, after+2, final)
}

// d is the driver a subtest of TestSQLiteTransactionRolledBackBySQLite...
// runs on: the second element of its name.
func d(t *testing.T) string { return strings.Split(t.Name(), "/")[1] }

// The same without a context: a write SQLite rolls the transaction back
// for by its own rule — a UNIQUE constraint declared ON CONFLICT ROLLBACK,
// met by an INSERT ... RETURNING (whose rows report the error) or an Exec,
// and a trigger's RAISE(ROLLBACK) met by gormlock's own Apply. The later
// statements are refused, not taken for the constraint's error (a refused
// Create does not report "already exists"), and nothing is applied. A
// failed statement SQLite does not roll back for (a plain UNIQUE
// constraint, ABORT) leaves the transaction open, and it commits.
func TestSQLiteTransactionRolledBackByAConstraintRefusesLaterStatements(t *testing.T) {
	for _, d := range sqliteDrivers {
		t.Run(d.name, func(t *testing.T) {
			path, db, accounts, a := d.account(t, 0)
			r := d.client(t, path)
			ctx := context.Background()
			require.NoError(t, db.Exec("CREATE TABLE rb_once (k INTEGER UNIQUE ON CONFLICT ROLLBACK)").Error)
			require.NoError(t, db.Exec("CREATE TABLE rb_plain (k INTEGER UNIQUE)").Error)
			require.NoError(t, db.Exec("INSERT INTO rb_once (k) VALUES (1)").Error)
			require.NoError(t, db.Exec("INSERT INTO rb_plain (k) VALUES (1)").Error)
			require.NoError(t, db.Exec("CREATE TRIGGER rb_refuse BEFORE UPDATE ON accounts WHEN NEW.balance >= 1000 BEGIN SELECT RAISE(ROLLBACK, 'balance too high'); END").Error)
			inc := []repository.Change{repository.Add("balance", 1)}

			for _, c := range []struct {
				name string
				fail func(ctx context.Context) error
			}{
				{"INSERT RETURNING", func(ctx context.Context) error {
					var k int64
					return repository.Tx(ctx, db).Raw("INSERT INTO rb_once (k) VALUES (1) RETURNING k").Row().Scan(&k)
				}},
				{"Exec", func(ctx context.Context) error {
					return repository.Tx(ctx, db).Exec("INSERT INTO rb_once (k) VALUES (1)").Error
				}},
				{"Apply RAISE(ROLLBACK)", func(ctx context.Context) error {
					_, err := accounts.Apply(ctx, a.ID, []repository.Change{repository.Add("balance", 1000)})
					return err
				}},
			} {
				t.Run(c.name, func(t *testing.T) {
					before, accountsBefore := sqliteState(t, r, a.ID)
					var failErr, laterErr, createErr error
					err := repository.RunInTx(ctx, db, func(ctx context.Context) error {
						if _, err := accounts.Apply(ctx, a.ID, inc); err != nil {
							return err
						}
						failErr = c.fail(ctx)
						laterErr = repository.Tx(ctx, db).Exec("UPDATE accounts SET balance = balance + 1 WHERE id = ?", a.ID).Error
						createErr = accounts.Create(ctx, &fixtures.Account{Owner: "later"})
						return nil
					})
					require.Error(t, failErr)
					require.Error(t, laterErr, "a statement after SQLite's rollback was sent")
					require.ErrorIs(t, laterErr, sql.ErrTxDone)
					require.Error(t, createErr)
					require.False(t, errors.Is(createErr, locking.ErrAlreadyExists), "a Create never sent reported the constraint's error: %v", createErr)
					require.Error(t, err)
					require.ErrorIs(t, err, sql.ErrTxDone)
					require.False(t, errors.Is(err, locking.ErrCommitUnknown), "the outcome is known: %v", err)
					require.False(t, errors.Is(err, locking.ErrAlreadyExists), "RunInTx reported the constraint's error for its COMMIT: %v", err)
					after, accountsAfter := sqliteState(t, r, a.ID)
					require.Equal(t, before, after, "part of a transaction SQLite rolled back was applied")
					require.Equal(t, accountsBefore, accountsAfter)
				})
			}

			// The failed write is the transaction's last statement: the
			// COMMIT that follows says it was rolled back.
			t.Run("INSERT RETURNING last", func(t *testing.T) {
				before, accountsBefore := sqliteState(t, r, a.ID)
				var failErr error
				err := repository.RunInTx(ctx, db, func(ctx context.Context) error {
					if _, err := accounts.Apply(ctx, a.ID, inc); err != nil {
						return err
					}
					var k int64
					failErr = repository.Tx(ctx, db).Raw("INSERT INTO rb_once (k) VALUES (1) RETURNING k").Row().Scan(&k)
					return nil
				})
				require.Error(t, failErr)
				require.Error(t, err)
				require.ErrorIs(t, err, sql.ErrTxDone)
				require.False(t, errors.Is(err, locking.ErrCommitUnknown), "the outcome is known: %v", err)
				after, accountsAfter := sqliteState(t, r, a.ID)
				require.Equal(t, before, after)
				require.Equal(t, accountsBefore, accountsAfter)
				_, err = accounts.Apply(ctx, a.ID, inc)
				require.NoError(t, err, "the connection is usable afterwards")
				after, _ = sqliteState(t, r, a.ID)
				require.Equal(t, before+1, after)
			})

			t.Run("ABORT keeps the transaction", func(t *testing.T) {
				before, accountsBefore := sqliteState(t, r, a.ID)
				var failErr error
				require.NoError(t, repository.RunInTx(ctx, db, func(ctx context.Context) error {
					if _, err := accounts.Apply(ctx, a.ID, inc); err != nil {
						return err
					}
					failErr = repository.Tx(ctx, db).Exec("INSERT INTO rb_plain (k) VALUES (1)").Error
					if err := repository.Tx(ctx, db).Exec("UPDATE accounts SET balance = balance + 1 WHERE id = ?", a.ID).Error; err != nil {
						return err
					}
					return accounts.Create(ctx, &fixtures.Account{Owner: "later"})
				}))
				require.ErrorContains(t, failErr, "UNIQUE")
				after, accountsAfter := sqliteState(t, r, a.ID)
				require.Equal(t, before+2, after)
				require.Equal(t, accountsBefore+1, accountsAfter)
			})
		})
	}
}
