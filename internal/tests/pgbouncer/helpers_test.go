//go:build linux

package pgbouncer_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	pgopen "github.com/gormlock/gormlock/opendb/postgres"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/pgbouncer"
	"github.com/gormlock/gormlock/repository"
)

// gormDB is gorm.DB, shorter in lists of pools.
type gormDB = gorm.DB

// poolSize is each pool's MaxOpenConns. Two pools stay below
// default_pool_size (20), so that in session mode no client queues in
// PgBouncer for a server connection.
const poolSize = 8

// open opens dsn with postgres.Open, as an application would, with a pool
// of poolSize connections, closed when the test ends.
func open(t *testing.T, dsn string) *gorm.DB {
	t.Helper()
	db, err := pgopen.Open(dsn)
	require.NoError(t, err)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	sqlDB.SetMaxOpenConns(poolSize)
	t.Cleanup(func() { _ = fixtures.Close(db) })
	return db
}

// env is one database reached through one PgBouncer by two separate pools,
// a and b, as two processes of an application would, and directly, past
// the pooler, for checking.
type env struct {
	mode   pgbouncer.Mode
	dsn    string
	a, b   *gorm.DB
	direct *gorm.DB
}

// newEnv creates a database on c's server and opens it through the
// PgBouncer of mode twice, and once directly.
func newEnv(t *testing.T, c *pgbouncer.Cluster, mode pgbouncer.Mode) *env {
	t.Helper()
	name := c.CreateDatabase(t)
	e := &env{mode: mode, dsn: c.DSN(mode, name)}
	e.a = open(t, e.dsn)
	e.b = open(t, e.dsn)
	e.direct = open(t, c.DirectDSN(name))
	return e
}

func accounts(t *testing.T, db *gorm.DB, opts ...repository.Option) *repository.Repository[fixtures.Account] {
	t.Helper()
	r, err := repository.New[fixtures.Account](db, opts...)
	require.NoError(t, err)
	return r
}

func increment(a *fixtures.Account) error { a.Balance++; return nil }

// sqlstate returns the SQLSTATE the server sent with err, or "".
func sqlstate(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// together runs fn(i) for i in [0, n) on n goroutines released at once from
// a start barrier, and waits for them all.
func together(n int, fn func(i int)) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			fn(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}

// holder holds a row lock in a transaction on its own goroutine until
// released.
type holder struct {
	release chan struct{}
	result  chan error
}

// holdLock locks account id in a transaction on db (LockRow) and keeps the
// transaction open until release is called; it returns once the lock is
// held.
func holdLock(t *testing.T, ctx context.Context, db *gorm.DB, id int64) *holder {
	t.Helper()
	repo := accounts(t, db)
	h := &holder{release: make(chan struct{}), result: make(chan error, 1)}
	locked := make(chan struct{})
	go func() {
		h.result <- repository.RunInTx(ctx, db, func(ctx context.Context) error {
			if _, err := repo.LockRow(ctx, id); err != nil {
				return err
			}
			close(locked)
			select {
			case <-h.release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	select {
	case <-locked:
	case err := <-h.result:
		t.Fatalf("holding the lock of account %d: %v", id, err)
	case <-ctx.Done():
		t.Fatalf("holding the lock of account %d: %v", id, ctx.Err())
	}
	t.Cleanup(h.done)
	return h
}

// done ends the holder's transaction (committing it) and returns its error;
// later calls return nil.
func (h *holder) done() {
	select {
	case <-h.release:
		return
	default:
		close(h.release)
	}
	<-h.result
}

// end releases the lock and requires that the holder's transaction
// committed.
func (h *holder) end(t *testing.T) {
	t.Helper()
	close(h.release)
	require.NoError(t, <-h.result, "the lock holder's transaction")
}
