package otelgormlock_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	mysqlopen "github.com/gormlock/gormlock/opendb/mysql"
	pgopen "github.com/gormlock/gormlock/opendb/postgres"

	"github.com/gormlock/gormlock/internal/tests/faultproxy"
	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/otelgormlock"
	"github.com/gormlock/gormlock/repository"
)

// A forced conflict: another writer changes the record between the first
// attempt's read and its write. Adaptive Mutate (the default) then takes
// the row lock for the second attempt: 1 conflict, 2 attempts, 1
// escalation, one span with an event per attempt.
func TestConflictEscalates(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		tm := newTelemetry(t, db)
		mine, other := tm.repo(t, db), plain(t, db)
		a := newAccount(t, other, "ann")

		calls := 0
		got, err := mine.Mutate(ctx, a.ID, func(x *fixtures.Account) error {
			calls++
			if calls == 1 {
				_, err := other.Mutate(context.Background(), a.ID, func(y *fixtures.Account) error { y.Balance += 100; return nil })
				require.NoError(t, err)
			}
			return increment(x)
		})
		require.NoError(t, err)
		require.Equal(t, int64(101), got.Balance)
		require.Equal(t, 2, calls)

		assert.Equal(t, map[string]int64{
			"db.operation.name=mutate,gormlock.attempt.locked=false,gormlock.attempt.outcome=conflict": 1,
			"db.operation.name=mutate,gormlock.attempt.locked=true,gormlock.attempt.outcome=applied":   1,
		}, tm.counts(t, "gormlock.mutate.attempts"))
		assert.Equal(t, map[string]int64{
			"db.operation.name=mutate,gormlock.attempt.locked=false,gormlock.attempt.outcome=conflict": 1,
		}, tm.counts(t, "gormlock.mutate.conflicts"))
		assert.Equal(t, map[string]int64{"db.operation.name=mutate": 1}, tm.counts(t, "gormlock.mutate.escalations"))
		assert.Equal(t, map[string]int64{"db.operation.name=mutate": 1}, tm.counts(t, "gormlock.call.duration"))
		assert.Empty(t, tm.counts(t, "gormlock.mutate.give_ups"))
		assert.Empty(t, tm.counts(t, "gormlock.write.unknown_outcomes"))
		assert.Empty(t, tm.counts(t, "gormlock.mutate.lock_releases"))
		if tm.system == "sqlite" {
			// The first attempt's UPDATE, and the locked attempt's BEGIN:
			// the locked read inside holds the write lock already.
			assert.Equal(t, map[string]int64{"": 2}, tm.counts(t, "gormlock.sqlite.gate.wait_time"))
			assert.Empty(t, tm.counts(t, "gormlock.row_lock.wait_time"))
		} else {
			assert.Equal(t, map[string]int64{"": 1}, tm.counts(t, "gormlock.row_lock.wait_time"))
			assert.Empty(t, tm.counts(t, "gormlock.sqlite.gate.wait_time"))
		}

		// Whether the locked read took long enough to count as a wait
		// depends on the machine's load: gormlock.waited is left out.
		assert.Equal(t, []spanView{{
			Name:   "mutate accounts",
			Kind:   "internal",
			Attrs:  tm.callAttrs("mutate", "gormlock.attempts", "2", "gormlock.locked_attempts", "1", "gormlock.escalated", "true"),
			Events: []string{attempt(1, false, "conflict"), attempt(2, true, "applied")},
			Status: "Unset",
		}}, tm.ended("gormlock.waited"))
	})
}

// Every attempt loses: with two attempts allowed (and adaptive Mutate off,
// so each loses the same way), the call gives up: 1 give-up, 2 conflicts,
// and a span with status Error.
func TestGiveUp(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		tm := newTelemetry(t, db)
		mine, other := tm.repo(t, db, repository.WithAdaptive(false)), plain(t, db)
		a := newAccount(t, other, "ann")

		policy := repository.Retry(locking.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond})
		_, err := mine.Mutate(ctx, a.ID, func(x *fixtures.Account) error {
			_, err := other.Mutate(context.Background(), a.ID, increment)
			require.NoError(t, err)
			return increment(x)
		}, policy)
		var exhausted *locking.RetryExhaustedError
		require.ErrorAs(t, err, &exhausted)
		require.Equal(t, 2, exhausted.Attempts)

		conflict := "db.operation.name=mutate,gormlock.attempt.locked=false,gormlock.attempt.outcome=conflict"
		assert.Equal(t, map[string]int64{conflict: 2}, tm.counts(t, "gormlock.mutate.attempts"))
		assert.Equal(t, map[string]int64{conflict: 2}, tm.counts(t, "gormlock.mutate.conflicts"))
		assert.Equal(t, map[string]int64{"db.operation.name=mutate": 1}, tm.counts(t, "gormlock.mutate.give_ups"))
		assert.Equal(t, map[string]int64{"db.operation.name=mutate,error.type=retries_exhausted": 1}, tm.counts(t, "gormlock.call.duration"))
		assert.Empty(t, tm.counts(t, "gormlock.mutate.escalations"))
		assert.Empty(t, tm.counts(t, "gormlock.write.unknown_outcomes"))

		assert.Equal(t, []spanView{{
			Name:   "mutate accounts",
			Kind:   "internal",
			Attrs:  tm.callAttrs("mutate", "gormlock.attempts", "2", "gormlock.locked_attempts", "0", "error.type", "retries_exhausted"),
			Events: []string{attempt(1, false, "conflict"), attempt(2, false, "conflict")},
			Status: "Error: " + err.Error(),
		}}, tm.ended())
	})
}

// MutateRowLocked waits for a row lock another transaction holds: one
// sample in the row-lock histogram (PostgreSQL, MariaDB), or in the SQLite
// gate's, where the wait is for the database's write lock at BEGIN.
func TestLockWait(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		tm := newTelemetry(t, db)
		mine := tm.repo(t, db)
		a := newAccount(t, plain(t, db), "ann")

		release := holdLock(t, db, a.ID)
		done := make(chan error, 1)
		go func() {
			_, err := mine.MutateRowLocked(ctx, a.ID, increment)
			done <- err
		}()
		waitBlocked(t, db)
		release()
		require.NoError(t, <-done)

		if tm.system == "sqlite" {
			assert.Equal(t, map[string]int64{"": 1}, tm.counts(t, "gormlock.sqlite.gate.wait_time"))
			assert.Empty(t, tm.counts(t, "gormlock.row_lock.wait_time"))
		} else {
			assert.Equal(t, map[string]int64{"": 1}, tm.counts(t, "gormlock.row_lock.wait_time"))
			assert.Empty(t, tm.counts(t, "gormlock.sqlite.gate.wait_time"))
		}
		assert.Equal(t, map[string]int64{
			"db.operation.name=mutateRowLocked,gormlock.attempt.locked=true,gormlock.attempt.outcome=applied": 1,
		}, tm.counts(t, "gormlock.mutate.attempts"))
		assert.Equal(t, []spanView{{
			Name:   "mutateRowLocked accounts",
			Kind:   "internal",
			Attrs:  tm.callAttrs("mutateRowLocked", "gormlock.attempts", "1", "gormlock.locked_attempts", "1"),
			Events: []string{attempt(1, true, "applied")},
			Status: "Unset",
		}}, tm.ended())
	})
}

// holdLock locks record id in a transaction of its own, outside any
// observed repository, until release is called: on PostgreSQL and MariaDB
// its row lock, on SQLite the database's write lock.
func holdLock(t *testing.T, db *gorm.DB, id int64) (release func()) {
	t.Helper()
	locked, stop, done := make(chan error, 1), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
			_, err := plain(t, db).LockRow(ctx, id)
			locked <- err
			<-stop
			return err
		})
	}()
	require.NoError(t, <-locked)
	var once bool
	release = func() {
		if !once {
			once = true
			close(stop)
			require.NoError(t, <-done)
		}
	}
	t.Cleanup(release)
	return release
}

// waitBlocked waits until a server session waits for a lock on the test's
// database. SQLite cannot tell: there it gives the waiter a moment, and the
// counts hold whether or not it had to wait.
func waitBlocked(t *testing.T, db *gorm.DB) {
	t.Helper()
	query := map[string]string{
		"postgres": "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database() AND query LIKE '%accounts%'",
		// A statement of this test's database that has run for 50 ms:
		// waiting for the lock.
		"mysql": `SELECT count(*) FROM information_schema.processlist
			WHERE db = DATABASE() AND command IN ('Query', 'Execute') AND info LIKE '%accounts%' AND id <> CONNECTION_ID() AND time_ms >= 50`,
	}[db.Dialector.Name()]
	if query == "" {
		time.Sleep(100 * time.Millisecond)
		return
	}
	require.Eventually(t, func() bool {
		var n int64
		require.NoError(t, db.Raw(query).Scan(&n).Error)
		return n > 0
	}, 10*time.Second, 5*time.Millisecond, "the locked read never waited")
}

// A lost answer: the server runs the UPDATE, and the connection is cut
// before its answer reaches the client (internal/tests/faultproxy). The
// outcome is unknown: 1 unknown outcome, the attempt's outcome "unknown",
// and a span with status Error; nothing is retried.
func TestUnknownOutcome(t *testing.T) {
	for _, d := range []string{"sqlite", "postgres", "mariadb"} {
		t.Run(d, func(t *testing.T) {
			var direct, proxied *gorm.DB
			var proxy *faultproxy.Proxy
			switch d {
			case "sqlite":
				t.Skip("SQLite runs in the process: a write's outcome is never unknown")
			case "postgres":
				direct, proxied, proxy = viaProxyPostgres(t)
			case "mariadb":
				direct, proxied, proxy = viaProxyMariaDB(t)
			}
			ctx := testdb.Ctx(t)
			tm := newTelemetry(t, direct)
			mine := tm.repo(t, proxied)
			a := newAccount(t, plain(t, direct), "ann")

			update := `UPDATE "accounts" SET`
			if d == "mariadb" {
				update = "UPDATE `accounts` SET"
			}
			proxy.Arm(faultproxy.Rule{Match: update, Action: faultproxy.CutAfter})
			_, err := mine.Mutate(ctx, a.ID, increment)
			require.ErrorIs(t, err, locking.ErrCommitUnknown)
			require.Equal(t, 1, proxy.Fired())
			require.Eventually(t, func() bool {
				got, err := plain(t, direct).Get(ctx, a.ID)
				require.NoError(t, err)
				return got.Balance == 1
			}, 10*time.Second, 10*time.Millisecond, "the server ran the UPDATE whose answer was lost")

			assert.Equal(t, map[string]int64{"": 1}, tm.counts(t, "gormlock.write.unknown_outcomes"))
			assert.Equal(t, map[string]int64{
				"db.operation.name=mutate,gormlock.attempt.locked=false,gormlock.attempt.outcome=unknown": 1,
			}, tm.counts(t, "gormlock.mutate.attempts"))
			assert.Equal(t, map[string]int64{"db.operation.name=mutate,error.type=commit_unknown": 1}, tm.counts(t, "gormlock.call.duration"))
			assert.Empty(t, tm.counts(t, "gormlock.mutate.conflicts"))
			assert.Empty(t, tm.counts(t, "gormlock.mutate.give_ups"))
			assert.Equal(t, []spanView{{
				Name:   "mutate accounts",
				Kind:   "internal",
				Attrs:  tm.callAttrs("mutate", "gormlock.attempts", "1", "gormlock.locked_attempts", "0", "error.type", "commit_unknown"),
				Events: []string{attempt(1, false, "unknown")},
				Status: "Error: " + err.Error(),
			}}, tm.ended())
		})
	}
}

// viaProxyPostgres returns a fresh, migrated PostgreSQL schema reached
// directly and through a faultproxy.
func viaProxyPostgres(t *testing.T) (direct, proxied *gorm.DB, proxy *faultproxy.Proxy) {
	t.Helper()
	dsn := testdb.PostgresSchema(t)
	direct, err := pgopen.Open(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(direct) })
	require.NoError(t, fixtures.Migrate(context.Background(), direct))
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	proxy, err = faultproxy.Start(u.Host, faultproxy.Postgres)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	u.Host = proxy.Addr()
	proxied, err = pgopen.Open(u.String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(proxied) })
	return direct, proxied, proxy
}

// viaProxyMariaDB returns a fresh, migrated MariaDB database reached
// directly and through a faultproxy. When the test ends it waits for the
// server sessions of the proxied connections to end, so that dropping the
// database does not wait for them.
func viaProxyMariaDB(t *testing.T) (direct, proxied *gorm.DB, proxy *faultproxy.Proxy) {
	t.Helper()
	dsn := testdb.MariaDBDatabase(t)
	direct, err := mysqlopen.Open(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(direct) })
	require.NoError(t, fixtures.Migrate(context.Background(), direct))
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	proxy, err = faultproxy.Start(cfg.Addr, faultproxy.MySQL)
	require.NoError(t, err)
	cfg.Addr = proxy.Addr()
	proxied, err = mysqlopen.Open(cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = fixtures.Close(proxied)
		_ = proxy.Close()
		var n int64
		assert.Eventually(t, func() bool {
			return direct.Raw("SELECT count(*) FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID()").Scan(&n).Error == nil && n == 0
		}, 10*time.Second, 10*time.Millisecond, "server sessions of the proxied connections are still there")
	})
	return direct, proxied, proxy
}

// Without an Observer nothing is recorded: the same forced conflict as
// TestConflictEscalates through a repository built without one, and
// through one that opts out of the one registered on the database.
func TestNoObserverRecordsNothing(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		tm := newTelemetry(t, db)
		require.NoError(t, db.Use(repository.ObserverPlugin(tm.obs)))
		other := plain(t, db, repository.WithObserver(nil))
		for _, mine := range []*repository.Repository[fixtures.Account]{
			plain(t, db, repository.WithObserver(nil)),
			repoWithoutPlugin(t, db),
		} {
			a := newAccount(t, other, "ann")
			calls := 0
			_, err := mine.Mutate(ctx, a.ID, func(x *fixtures.Account) error {
				calls++
				if calls == 1 {
					_, err := other.Mutate(context.Background(), a.ID, increment)
					require.NoError(t, err)
				}
				return increment(x)
			})
			require.NoError(t, err)
			require.Equal(t, 2, calls)
		}
		for _, name := range []string{"gormlock.mutate.attempts", "gormlock.mutate.conflicts", "gormlock.call.duration",
			"gormlock.sqlite.gate.wait_time", "gormlock.row_lock.wait_time"} {
			assert.Empty(t, tm.counts(t, name), name)
		}
		assert.Empty(t, tm.ended())
	})
}

// repoWithoutPlugin returns a repository of accounts on a session of db
// that has no plugin registered.
func repoWithoutPlugin(t *testing.T, db *gorm.DB) *repository.Repository[fixtures.Account] {
	t.Helper()
	cfg := *db.Config
	cfg.Plugins = map[string]gorm.Plugin{}
	bare := db.Session(&gorm.Session{NewDB: true})
	bare.Config = &cfg
	return plain(t, bare)
}

// Registered on the database with ObserverPlugin, the Observer hears from
// every repository built afterwards, and from RunInTx, which takes the
// *gorm.DB; WithObserver(nil) opts one repository out. The plugin adds no
// GORM callback: gormlock's statements stay on their direct path, where a
// Raw callback never sees them (the control: WithCallbacks(true) routes
// them through GORM's callbacks, and the Raw callback does see them).
func TestObserverPlugin(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		tm := newTelemetry(t, db)
		raw := 0
		count := func(*gorm.DB) { raw++ }
		require.NoError(t, db.Callback().Raw().Before("gorm:raw").Register("otelgormlock_test:count", count))
		require.NoError(t, db.Callback().Row().Before("gorm:row").Register("otelgormlock_test:count", count))
		require.NoError(t, db.Use(repository.ObserverPlugin(tm.obs)))
		require.ErrorIs(t, db.Use(repository.ObserverPlugin(tm.obs)), gorm.ErrRegistered)

		observed, optedOut := plain(t, db), plain(t, db, repository.WithObserver(nil))
		a := newAccount(t, optedOut, "ann")
		_, err := observed.Mutate(ctx, a.ID, increment)
		require.NoError(t, err)
		_, err = optedOut.Mutate(ctx, a.ID, increment)
		require.NoError(t, err)
		require.NoError(t, repository.RunInTx(ctx, db, func(ctx context.Context) error {
			_, err := optedOut.Mutate(ctx, a.ID, increment)
			return err
		}))
		assert.Zero(t, raw, "with the observer plugin registered, gormlock's statements bypass GORM's callbacks")

		assert.Equal(t, map[string]int64{"db.operation.name=mutate": 1}, tm.counts(t, "gormlock.call.duration"))
		if tm.system == "sqlite" {
			// The observed Mutate's UPDATE, and RunInTx's BEGIN: RunInTx
			// is told with no table.
			assert.Equal(t, map[string]int64{"": 1, "no db.collection.name": 1}, tm.counts(t, "gormlock.sqlite.gate.wait_time"))
		}

		viaCallbacks := plain(t, db, repository.WithCallbacks(true))
		_, err = viaCallbacks.Mutate(ctx, a.ID, increment)
		require.NoError(t, err)
		assert.Positive(t, raw, "the control: WithCallbacks(true) sends the statements through GORM's callbacks")
		assert.Equal(t, map[string]int64{"db.operation.name=mutate": 2}, tm.counts(t, "gormlock.call.duration"))

		require.ErrorIs(t, repository.ObserverPlugin(nil).Initialize(db), locking.ErrInvalidArgument)
	})
}

// New refuses a nil provider, and an Observer made with the global
// providers (OpenTelemetry's no-op ones, unless the application set its
// own) records nothing and fails nothing.
func TestNew(t *testing.T) {
	_, err := otelgormlock.New(otelgormlock.WithMeterProvider(nil))
	require.ErrorIs(t, err, locking.ErrInvalidArgument)
	_, err = otelgormlock.New(otelgormlock.WithTracerProvider(nil))
	require.ErrorIs(t, err, locking.ErrInvalidArgument)

	obs, err := otelgormlock.New()
	require.NoError(t, err)
	db := testdb.Open(t, "sqlite")
	r, err := repository.New[fixtures.Account](db, repository.WithObserver(obs))
	require.NoError(t, err)
	a := newAccount(t, r, "ann")
	got, err := r.Mutate(context.Background(), a.ID, increment)
	require.NoError(t, err)
	require.Equal(t, int64(1), got.Balance)
}

// Lease calls: a grant, a release, a renewal of the released lease
// (expired), a second grant, and a write with the first lease after it
// (fenced off): one count each, and a span per call with its lease event.
func TestLeaseEvents(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		tm := newTelemetry(t, db)
		leases := tm.repo(t, db, repository.WithLeases()).Leases()
		a := newAccount(t, plain(t, db), "ann")

		_, alice, err := leases.Acquire(ctx, a.ID, "alice")
		require.NoError(t, err)
		require.NoError(t, leases.Release(ctx, alice))
		require.ErrorIs(t, leases.Renew(ctx, alice), locking.ErrLeaseExpired)
		e, _, err := leases.Acquire(ctx, a.ID, "bob")
		require.NoError(t, err)
		require.ErrorIs(t, leases.Update(ctx, e, alice), locking.ErrLeased)

		assert.Equal(t, map[string]int64{"db.operation.name=leaseAcquire": 2}, tm.counts(t, "gormlock.lease.grants"))
		assert.Equal(t, map[string]int64{"db.operation.name=leaseRenew": 1}, tm.counts(t, "gormlock.lease.expiries"))
		assert.Equal(t, map[string]int64{"db.operation.name=leaseUpdate": 1}, tm.counts(t, "gormlock.lease.fencing_refusals"))
		assert.Equal(t, map[string]int64{
			"db.operation.name=leaseAcquire":                        2,
			"db.operation.name=leaseRelease":                        1,
			"db.operation.name=leaseRenew,error.type=lease_expired": 1,
			"db.operation.name=leaseUpdate,error.type=leased":       1,
		}, tm.counts(t, "gormlock.call.duration"))
		assert.Empty(t, tm.counts(t, "gormlock.mutate.attempts"))

		var names, events []string
		for _, s := range tm.ended() {
			names = append(names, s.Name)
			events = append(events, s.Attrs["gormlock.lease.event"]+"/"+s.Attrs["error.type"])
			assert.Equal(t, tm.system, s.Attrs["db.system.name"])
			assert.Equal(t, "accounts", s.Attrs["db.collection.name"])
			assert.Empty(t, s.Events)
		}
		assert.Equal(t, []string{"leaseAcquire accounts", "leaseRelease accounts", "leaseRenew accounts", "leaseAcquire accounts", "leaseUpdate accounts"}, names)
		assert.Equal(t, []string{"granted/", "/", "expired/lease_expired", "granted/", "fenced/leased"}, events)
	})
}

// A lost answer to COMMIT: MutateRowLocked's transaction commits on the
// server, and the connection is cut before the answer reaches the client.
// The unknown outcome is counted once, by the COMMIT, and the locked
// attempt's outcome is "unknown".
func TestUnknownCommit(t *testing.T) {
	for _, d := range []string{"postgres", "mariadb"} {
		t.Run(d, func(t *testing.T) {
			var direct, proxied *gorm.DB
			var proxy *faultproxy.Proxy
			if d == "postgres" {
				direct, proxied, proxy = viaProxyPostgres(t)
			} else {
				direct, proxied, proxy = viaProxyMariaDB(t)
			}
			ctx := testdb.Ctx(t)
			tm := newTelemetry(t, direct)
			mine := tm.repo(t, proxied)
			a := newAccount(t, plain(t, direct), "ann")

			rule := faultproxy.Rule{Match: "COMMIT", Action: faultproxy.CutAfter}
			if d == "mariadb" {
				rule.Skip = 1 // the transaction's SET ... READ COMMITTED
			}
			proxy.Arm(rule)
			_, err := mine.MutateRowLocked(ctx, a.ID, increment)
			require.ErrorIs(t, err, locking.ErrCommitUnknown)
			require.Equal(t, 1, proxy.Fired())
			require.Eventually(t, func() bool {
				got, err := plain(t, direct).Get(ctx, a.ID)
				require.NoError(t, err)
				return got.Balance == 1
			}, 10*time.Second, 10*time.Millisecond, "the server committed the transaction whose answer was lost")

			assert.Equal(t, map[string]int64{"": 1}, tm.counts(t, "gormlock.write.unknown_outcomes"))
			assert.Equal(t, map[string]int64{
				"db.operation.name=mutateRowLocked,gormlock.attempt.locked=true,gormlock.attempt.outcome=unknown": 1,
			}, tm.counts(t, "gormlock.mutate.attempts"))
			assert.Equal(t, map[string]int64{"db.operation.name=mutateRowLocked,error.type=commit_unknown": 1}, tm.counts(t, "gormlock.call.duration"))
			spans := tm.ended()
			require.Len(t, spans, 1)
			assert.Equal(t, []string{attempt(1, true, "unknown")}, spans[0].Events)
			assert.Equal(t, "commit_unknown", spans[0].Attrs["error.type"])
		})
	}
}

// fn writes its own record through another connection while its call
// holds the row lock: the locked attempt's transaction is rolled back
// after its time limit, which releases the lock, and the call goes on
// optimistic. One lock release, the attempt outcomes "released" then
// "applied", and the span says so.
func TestLockReleased(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx, cancel := context.WithTimeout(testdb.Ctx(t), 60*time.Second)
		defer cancel()
		tm := newTelemetry(t, db)
		mine, other := tm.repo(t, db), plain(t, db)
		a := newAccount(t, other, "ann")

		// A lost race makes the record hot: the next call starts locked.
		first := true
		_, err := mine.Mutate(ctx, a.ID, func(x *fixtures.Account) error {
			if first {
				first = false
				_, err := other.Mutate(context.Background(), a.ID, increment)
				require.NoError(t, err)
			}
			return nil
		})
		require.NoError(t, err)

		var rep repository.MutateReport
		_, err = mine.Mutate(ctx, a.ID, func(x *fixtures.Account) error {
			if err := db.WithContext(ctx).Model(&fixtures.Account{}).Where("id = ?", x.ID).Update("owner", "bob").Error; err != nil {
				return err
			}
			return increment(x)
		}, repository.Report(&rep))
		require.NoError(t, err)
		require.True(t, rep.Hot && rep.Released, "%v", rep)

		assert.Equal(t, map[string]int64{"db.operation.name=mutate": 1}, tm.counts(t, "gormlock.mutate.lock_releases"))
		assert.Equal(t, map[string]int64{
			"db.operation.name=mutate,gormlock.attempt.locked=false,gormlock.attempt.outcome=conflict": 1,
			"db.operation.name=mutate,gormlock.attempt.locked=true,gormlock.attempt.outcome=applied":   1,
			"db.operation.name=mutate,gormlock.attempt.locked=true,gormlock.attempt.outcome=released":  1,
			"db.operation.name=mutate,gormlock.attempt.locked=false,gormlock.attempt.outcome=applied":  1,
		}, tm.counts(t, "gormlock.mutate.attempts"))
		spans := tm.ended("gormlock.waited")
		require.Len(t, spans, 2)
		assert.Equal(t, []string{attempt(1, true, "released"), attempt(2, false, "applied")}, spans[1].Events)
		assert.Equal(t, tm.callAttrs("mutate", "gormlock.attempts", "2", "gormlock.locked_attempts", "1",
			"gormlock.hot", "true", "gormlock.released", "true"), spans[1].Attrs)
	})
}
