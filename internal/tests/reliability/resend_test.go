package reliability_test

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/stretchr/testify/require"
	gormpg "gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/gormlock/gormlock/internal/tests/faultproxy"
	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	pgopen "github.com/gormlock/gormlock/opendb/postgres"
	"github.com/gormlock/gormlock/repository"
)

// resendCalls is how many writes each run makes; every third has its answer
// cut after the server received it.
const resendCalls = 45

// viaProxy returns dsn pointed at proxy, with extra settings.
func viaProxy(t *testing.T, dsn string, proxy *faultproxy.Proxy, set map[string]string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	u.Host = proxy.Addr()
	q := u.Query()
	for k, v := range set {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Writes outside a transaction, in every pgx mode gormlock accepts, through
// a proxy that loses the answer to every third UPDATE after the server ran
// it: the counter grows by the acknowledged writes plus some of the unknown
// ones — never more. A write is never sent twice behind the caller's back,
// and never reported done or failed when it ran.
func TestLostAnswersNeverApplyTwice(t *testing.T) {
	dsn := testdb.PostgresSchema(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	proxy, err := faultproxy.Start(u.Host, faultproxy.Postgres)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })

	setup, err := pgopen.Open(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(setup) })
	require.NoError(t, fixtures.Migrate(context.Background(), setup))

	type mode struct {
		name string
		open func() (*gorm.DB, error)
	}
	modes := []mode{}
	for _, m := range []string{"", "cache_statement", "exec", "cache_describe", "describe_exec", "simple_protocol"} {
		modes = append(modes, mode{"default_query_exec_mode=" + m, func() (*gorm.DB, error) {
			set := map[string]string{}
			if m != "" {
				set["default_query_exec_mode"] = m
			}
			return pgopen.Open(viaProxy(t, dsn, proxy, set))
		}})
	}
	modes = append(modes, mode{"PreferSimpleProtocol", func() (*gorm.DB, error) {
		return gorm.Open(gormpg.New(gormpg.Config{DSN: viaProxy(t, dsn, proxy, nil), PreferSimpleProtocol: true}), &gorm.Config{Logger: logger.Discard})
	}})
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			db, err := m.open()
			require.NoError(t, err)
			t.Cleanup(func() { _ = fixtures.Close(db) })
			accounts, err := repository.New[fixtures.Account](db)
			require.NoError(t, err)
			ctx := context.Background()
			for _, call := range []string{"Apply", "Mutate", "Update"} {
				a := &fixtures.Account{Owner: "resend-" + call}
				require.NoError(t, accounts.Create(ctx, a))
				var acked, unknown, failed int
				for i := range resendCalls {
					if i%3 == 0 {
						proxy.Arm(faultproxy.Rule{Match: `UPDATE "accounts" SET`, Action: faultproxy.CutAfter})
					}
					cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
					switch call {
					case "Apply":
						_, err = accounts.Apply(cctx, a.ID, []repository.Change{repository.Add("Balance", 1)})
					case "Mutate":
						_, err = accounts.Mutate(cctx, a.ID, func(x *fixtures.Account) error { x.Balance++; return nil })
					case "Update":
						var cur *fixtures.Account
						cur, err = accounts.Get(cctx, a.ID)
						if err == nil {
							cur.Balance++
							err = accounts.Update(cctx, cur)
						}
					}
					cancel()
					proxy.Disarm()
					switch {
					case err == nil:
						acked++
					case errors.Is(err, locking.ErrCommitUnknown):
						unknown++
					default:
						failed++
						if failed < 3 {
							t.Logf("%s failed: %v", call, err)
						}
					}
				}
				var n int64
				require.NoError(t, setup.Raw("SELECT balance FROM accounts WHERE id = ?", a.ID).Scan(&n).Error)
				t.Logf("%s: %d calls: %d acknowledged, %d unknown, %d failed; counter %d", call, resendCalls, acked, unknown, failed, n)
				require.GreaterOrEqual(t, n, int64(acked), "an acknowledged write is missing")
				require.LessOrEqual(t, n, int64(acked+unknown), "a write applied although reported failed, or applied twice")
			}
		})
	}
}

// Negative control: database/sql with pgx's simple protocol, the same
// proxy, an UPDATE per call on the pool: pgx marks the lost answer safe to
// retry, database/sql sends the statement again on another connection, and
// the call returns ok for a write that ran twice.
func TestLostAnswersPlainDatabaseSQLApplyTwice(t *testing.T) {
	dsn := testdb.PostgresSchema(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	proxy, err := faultproxy.Start(u.Host, faultproxy.Postgres)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	db, err := sql.Open("pgx", viaProxy(t, dsn, proxy, map[string]string{"default_query_exec_mode": "simple_protocol"}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	_, err = db.ExecContext(ctx, "CREATE TABLE counters (id INT PRIMARY KEY, n BIGINT NOT NULL)")
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, "INSERT INTO counters VALUES (1, 0)")
	require.NoError(t, err)
	var ok, failed int
	for i := range resendCalls {
		if i%3 == 0 {
			proxy.Arm(faultproxy.Rule{Match: "UPDATE counters", Action: faultproxy.CutAfter})
		}
		_, err := db.ExecContext(ctx, "UPDATE counters SET n = n + $1 WHERE id = 1", 1)
		proxy.Disarm()
		if err == nil {
			ok++
		} else {
			failed++
		}
	}
	var n int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT n FROM counters WHERE id = 1").Scan(&n))
	t.Logf("%d calls: %d ok, %d failed; counter %d", resendCalls, ok, failed, n)
	require.Greater(t, n, ok, "database/sql resent statements that had run: the counter grew by more than the calls that said ok (none said unknown)")
}

// A write outside a transaction that cannot get a connection — the server
// (here: the proxy in front of it) refuses the dial, or the pool has none
// to lend before the deadline — sent nothing: it is a definite "not
// applied", never ErrCommitUnknown.
func TestWriteThatGotNoConnectionIsNotApplied(t *testing.T) {
	for _, server := range []struct {
		name string
		open func(t *testing.T) *faultDB
	}{{"postgres", faultPostgres}, {"mariadb", faultMariaDB}} {
		t.Run(server.name, func(t *testing.T) {
			f := server.open(t)
			ctx := context.Background()
			a := &fixtures.Account{Owner: "unreachable", Balance: 10}
			require.NoError(t, f.directRepo.Create(ctx, a))
			sqlDB, err := f.repo.DB(ctx).DB()
			require.NoError(t, err)

			// The pool has no connection to lend before the deadline.
			sqlDB.SetMaxOpenConns(1)
			held, err := sqlDB.Conn(ctx)
			require.NoError(t, err)
			short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			_, err = f.repo.Apply(short, a.ID, []repository.Change{repository.Add("Balance", 1)})
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.NotErrorIs(t, err, locking.ErrCommitUnknown, "waiting for the pool sends nothing")
			require.NoError(t, held.Close())

			// Every connection must be dialled, and the dial is refused.
			sqlDB.SetMaxOpenConns(0)
			sqlDB.SetMaxIdleConns(0)
			require.NoError(t, f.proxy.Close())
			cur := *a
			calls := map[string]func() error{
				"Update":         func() error { e := cur; e.Balance = 99; return f.repo.Update(ctx, &e) },
				"Delete":         func() error { e := cur; return f.repo.Delete(ctx, &e) },
				"ForceIncrement": func() error { e := cur; return f.repo.ForceIncrement(ctx, &e) },
				"Apply": func() error {
					_, err := f.repo.Apply(ctx, a.ID, []repository.Change{repository.Add("Balance", 1)})
					return err
				},
				"Apply with OpKey": func() error {
					_, err := f.repo.Apply(ctx, a.ID, []repository.Change{repository.Add("Balance", 1)}, repository.OpKey("unreachable-apply"))
					return err
				},
				"Mutate": func() error {
					_, err := f.repo.Mutate(ctx, a.ID, func(x *fixtures.Account) error { x.Balance++; return nil })
					return err
				},
				"UpdateMany": func() error { e := cur; e.Balance = 98; return f.repo.UpdateMany(ctx, []*fixtures.Account{&e}) },
				"Create":     func() error { return f.repo.Create(ctx, &fixtures.Account{Owner: "never"}) },
			}
			for name, call := range calls {
				err := call()
				require.Error(t, err, name)
				require.NotErrorIs(t, err, locking.ErrCommitUnknown, "%s: %v", name, err)
			}
			got, err := f.directRepo.Get(ctx, a.ID)
			require.NoError(t, err)
			require.Equal(t, a.Version, got.Version, "nothing was applied")
		})
	}
}
