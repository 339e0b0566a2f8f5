package repository_test

import (
	"context"
	"errors"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/sqlitegate"
	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/repository"
)

// goroutinesCreated is how many goroutines the process has started.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// goroutinesPerCall is the mean number of goroutines f starts per call.
func goroutinesPerCall(n int, f func()) float64 {
	before := goroutinesCreated()
	for range n {
		f()
	}
	return float64(goroutinesCreated()-before) / float64(n)
}

// On SQLite gormlock's statements start no goroutine with a context that
// can end: go-sqlite3 runs a statement, and each step of a query's rows,
// in a goroutine of its own so that it can interrupt it, and database/sql
// starts one per query. gormlock's Update, Get, Mutate, Apply (with SQL of
// the caller's too) and Create look at the context before each statement
// and send it with one that does not end. The control: the same UPDATE through database/sql
// with the same context starts at least one per statement.
func TestSQLiteStatementsStartNoGoroutine(t *testing.T) {
	defer sqlitegate.SetWriterLinger(time.Minute)() // no linger timer fires
	db := testdb.Open(t, "sqlite")
	sqlDB, err := db.DB()
	require.NoError(t, err)
	accounts, err := repository.New[fixtures.Account](db)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := newAccount(t, accounts, "ann", 0)
	calls := map[string]func(){
		"Update": func() {
			a.Balance++
			require.NoError(t, accounts.Update(ctx, a))
		},
		"Get": func() {
			_, err := accounts.Get(ctx, a.ID)
			require.NoError(t, err)
		},
		"Mutate": func() {
			out, err := accounts.Mutate(ctx, a.ID, func(x *fixtures.Account) error { x.Balance++; return nil })
			require.NoError(t, err)
			a = out
		},
		"Apply/Expr": func() {
			out, err := accounts.Apply(ctx, a.ID, []repository.Change{repository.Expr("balance", "balance + ?", 1)})
			require.NoError(t, err)
			a = out
		},
		"Create": func() {
			require.NoError(t, accounts.Create(ctx, &fixtures.Account{Owner: "new"}))
		},
	}
	for name, f := range calls {
		for range 10 {
			f() // connections and statements settle
		}
		n := goroutinesPerCall(50, f)
		t.Logf("%s: %.2f goroutines per call", name, n)
		require.Less(t, n, 0.5, "%s started goroutines with a context that can end", name)
	}
	raw := goroutinesPerCall(50, func() {
		_, err := sqlDB.ExecContext(ctx, "UPDATE accounts SET balance = balance + 1 WHERE id = ?", a.ID)
		require.NoError(t, err)
	})
	t.Logf("database/sql: %.2f goroutines per statement", raw)
	require.GreaterOrEqual(t, raw, 1.0, "the control: the driver's goroutine per statement was not counted")
	_, err = accounts.Get(ctx, a.ID)
	require.NoError(t, err)
}

// Once sent, a guarded write of one record on SQLite runs to its end when
// the context ends meanwhile, and the caller is told what it did: here a
// trigger makes the UPDATE take far longer than the context lasts, and the
// write is applied and reported applied (go-sqlite3 would have interrupted
// it; either way the answer must match the row). A call whose context ended
// before its statement was sent writes nothing and says so.
func TestSQLiteKeyedWriteRunsToItsEndOnceSent(t *testing.T) {
	db := testdb.Open(t, "sqlite")
	accounts, err := repository.New[fixtures.Account](db)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, db.Exec("CREATE TABLE nums (x INTEGER)").Error)
	require.NoError(t, db.Exec("INSERT INTO nums WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 6000) SELECT x FROM c").Error)
	require.NoError(t, db.Exec("CREATE TRIGGER slow AFTER UPDATE ON accounts BEGIN SELECT count(*) FROM nums a, nums b; END").Error)
	a := newAccount(t, accounts, "ann", 0)

	// How long the slow UPDATE takes here.
	begin := time.Now()
	require.NoError(t, db.Exec("UPDATE accounts SET owner = owner WHERE id = ?", a.ID).Error)
	slow := time.Since(begin)
	t.Logf("the UPDATE with its trigger takes %v", slow)

	applied := 0
	for try := 0; try < 3 && applied == 0; try++ {
		wctx, cancel := context.WithTimeout(ctx, slow/3)
		a.Balance++
		err := accounts.Update(wctx, a)
		cancel()
		balance, version, found := rawAccount(t, db, a.ID)
		require.True(t, found)
		switch {
		case err == nil:
			applied++
			require.Equal(t, a.Balance, balance, "reported applied")
			require.Equal(t, a.Version, version, "reported applied")
		case errors.Is(err, context.DeadlineExceeded):
			// Ended before the statement was sent (a slow machine):
			// nothing written.
			a.Balance--
			require.Equal(t, a.Balance, balance, "reported not applied: %v", err)
			require.Equal(t, a.Version, version, "reported not applied: %v", err)
		default:
			t.Fatalf("Update whose context ended while it ran = %v", err)
		}
	}
	require.Equal(t, 1, applied, "no write ran to its end in 3 tries: each ended with its context")

	// Ended before it was sent: not applied, ctx's error.
	dead, cancel := context.WithCancel(ctx)
	cancel()
	a.Balance++
	err = accounts.Update(dead, a)
	require.ErrorIs(t, err, context.Canceled)
	a.Balance--
	balance, version, _ := rawAccount(t, db, a.ID)
	require.Equal(t, a.Balance, balance)
	require.Equal(t, a.Version, version)
}
