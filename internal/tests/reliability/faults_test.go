package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	mysqlopen "github.com/gormlock/gormlock/opendb/mysql"
	pgopen "github.com/gormlock/gormlock/opendb/postgres"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/faultproxy"
	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// outcome is what a call reported about its write.
type outcome int

const (
	applied outcome = iota
	notApplied
	unknown
)

func (o outcome) String() string { return [...]string{"applied", "not applied", "unknown"}[o] }

func outcomeOf(err error) outcome {
	switch {
	case err == nil:
		return applied
	case errors.Is(err, locking.ErrCommitUnknown):
		return unknown
	}
	return notApplied
}

// faultTarget is one kind of write, as the fault tests drive it: write makes
// the write through the proxy (with an operation key), done reads on a
// direct connection whether it took effect, and statements are the SQL
// texts it sends, each a point to cut at.
type faultTarget struct {
	name       string
	statements []string
	prepare    func(t *testing.T, direct *repository.Repository[fixtures.Account]) *fixtures.Account
	write      func(ctx context.Context, r *repository.Repository[fixtures.Account], a *fixtures.Account, key string) error
	done       func(t *testing.T, direct *gorm.DB, a *fixtures.Account) bool
}

// balanceIs reports whether account a has balance want.
func balanceIs(t *testing.T, db *gorm.DB, id, want int64) bool {
	t.Helper()
	var rows []int64
	require.NoError(t, db.Raw("SELECT balance FROM accounts WHERE id = ?", id).Scan(&rows).Error)
	return len(rows) == 1 && rows[0] == want
}

func faultTargets() []faultTarget {
	fresh := func(t *testing.T, direct *repository.Repository[fixtures.Account]) *fixtures.Account {
		a := &fixtures.Account{Owner: "fault", Balance: 10}
		require.NoError(t, direct.Create(context.Background(), a))
		return a
	}
	return []faultTarget{
		{
			name:       "Update",
			statements: []string{`UPDATE "accounts"`, "begin", `INSERT INTO gormlock_operations`, "commit"},
			prepare:    fresh,
			write: func(ctx context.Context, r *repository.Repository[fixtures.Account], a *fixtures.Account, key string) error {
				e := *a
				e.Balance = 99
				return r.Update(ctx, &e, repository.OpKey(key))
			},
			done: func(t *testing.T, db *gorm.DB, a *fixtures.Account) bool { return balanceIs(t, db, a.ID, 99) },
		},
		{
			name:       "Update without a key",
			statements: []string{`UPDATE "accounts"`},
			prepare:    fresh,
			write: func(ctx context.Context, r *repository.Repository[fixtures.Account], a *fixtures.Account, _ string) error {
				e := *a
				e.Balance = 99
				return r.Update(ctx, &e)
			},
			done: func(t *testing.T, db *gorm.DB, a *fixtures.Account) bool { return balanceIs(t, db, a.ID, 99) },
		},
		{
			name:       "Delete",
			statements: []string{`DELETE FROM "accounts"`, `INSERT INTO gormlock_operations`, "commit"},
			prepare:    fresh,
			write: func(ctx context.Context, r *repository.Repository[fixtures.Account], a *fixtures.Account, key string) error {
				e := *a
				return r.Delete(ctx, &e, repository.OpKey(key))
			},
			done: func(t *testing.T, db *gorm.DB, a *fixtures.Account) bool {
				var n int64
				require.NoError(t, db.Raw("SELECT count(*) FROM accounts WHERE id = ?", a.ID).Scan(&n).Error)
				return n == 0
			},
		},
		{
			name:       "Create",
			statements: []string{`INSERT INTO "accounts"`, `UPDATE "accounts"`, `INSERT INTO gormlock_operations`, "commit"},
			prepare: func(t *testing.T, _ *repository.Repository[fixtures.Account]) *fixtures.Account {
				return &fixtures.Account{Owner: fmt.Sprintf("created-%d", time.Now().UnixNano())}
			},
			write: func(ctx context.Context, r *repository.Repository[fixtures.Account], a *fixtures.Account, key string) error {
				e := *a
				return r.Create(ctx, &e, repository.OpKey(key))
			},
			done: func(t *testing.T, db *gorm.DB, a *fixtures.Account) bool {
				var n int64
				require.NoError(t, db.Raw("SELECT count(*) FROM accounts WHERE owner = ?", a.Owner).Scan(&n).Error)
				require.LessOrEqual(t, n, int64(1), "created twice")
				return n == 1
			},
		},
		{
			name:       "Mutate",
			statements: []string{`SELECT`, `UPDATE "accounts"`, `INSERT INTO gormlock_operations`, "commit"},
			prepare:    fresh,
			write: func(ctx context.Context, r *repository.Repository[fixtures.Account], a *fixtures.Account, key string) error {
				_, err := r.Mutate(ctx, a.ID, func(a *fixtures.Account) error { a.Balance++; return nil },
					repository.OpKey(key), repository.Retry(locking.RetryPolicy{MaxAttempts: 1}))
				return err
			},
			done: func(t *testing.T, db *gorm.DB, a *fixtures.Account) bool { return balanceIs(t, db, a.ID, 11) },
		},
		{
			name:       "MutateRowLocked",
			statements: []string{`FOR UPDATE`, `UPDATE "accounts"`, `INSERT INTO gormlock_operations`, "commit"},
			prepare:    fresh,
			write: func(ctx context.Context, r *repository.Repository[fixtures.Account], a *fixtures.Account, key string) error {
				_, err := r.MutateRowLocked(ctx, a.ID, func(a *fixtures.Account) error { a.Balance++; return nil },
					repository.OpKey(key), repository.Retry(locking.RetryPolicy{MaxAttempts: 1}))
				return err
			},
			done: func(t *testing.T, db *gorm.DB, a *fixtures.Account) bool { return balanceIs(t, db, a.ID, 11) },
		},
		{
			name:       "RunInTx of two updates",
			statements: []string{`UPDATE "accounts"`, "commit"},
			prepare:    fresh,
			write: func(ctx context.Context, r *repository.Repository[fixtures.Account], a *fixtures.Account, key string) error {
				return repository.RunInTx(ctx, r.DB(ctx), func(ctx context.Context) error {
					e := *a
					e.Balance = 50
					if err := r.Update(ctx, &e, repository.OpKey(key)); err != nil {
						return err
					}
					e.Balance = 51
					return r.Update(ctx, &e)
				})
			},
			done: func(t *testing.T, db *gorm.DB, a *fixtures.Account) bool {
				var b int64
				require.NoError(t, db.Raw("SELECT balance FROM accounts WHERE id = ?", a.ID).Scan(&b).Error)
				require.Contains(t, []int64{10, 51}, b, "both writes or neither, never half")
				return b == 51
			},
		},
	}
}

// faultDB is one database server the fault tests run on: the database
// reached directly (to prepare records and read the truth) and through a
// faultproxy, and what differs between the servers.
type faultDB struct {
	dialect    string
	direct     *gorm.DB
	directRepo *repository.Repository[fixtures.Account]
	proxy      *faultproxy.Proxy
	repo       *repository.Repository[fixtures.Account] // through the proxy
	// rule returns the rule that cuts at point, a fault point as
	// faultTargets names it (PostgreSQL's spelling).
	rule func(point string) faultproxy.Rule
	// exact means that every target sends every point it names, so a
	// rule that does not fire fails the test instead of skipping it.
	exact bool
	// settle returns once what the server received of a faulted call has
	// run to its end (the proxy's connections have been cut).
	settle func(t *testing.T)
	// beforeLatency and afterLatency run around each call of the latency
	// part: afterLatency returns once what the server received has run to
	// its end.
	beforeLatency, afterLatency func(t *testing.T)
	// budgets returns the times target's calls have in the latency part.
	budgets func(t *testing.T, target faultTarget) []time.Duration
}

// faultPostgres is PostgreSQL for the fault tests.
func faultPostgres(t *testing.T) *faultDB {
	dsn := testdb.PostgresSchema(t)
	direct, err := pgopen.Open(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(direct) })
	require.NoError(t, fixtures.Migrate(context.Background(), direct))
	directRepo, err := repository.New[fixtures.Account](direct)
	require.NoError(t, err)

	// The proxied sessions carry an application name of their own, so that
	// the wait below leaves out every other client of the server.
	app := fmt.Sprintf("glfaults%d", time.Now().UnixNano()%1e9)
	u, err := url.Parse(fixtures.WithParam(dsn, "application_name", app))
	require.NoError(t, err)
	proxy, err := faultproxy.Start(u.Host, faultproxy.Postgres)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	u.Host = proxy.Addr()
	viaProxy, err := pgopen.Open(u.String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(viaProxy) })
	repo, err := repository.New[fixtures.Account](viaProxy)
	require.NoError(t, err)

	return &faultDB{
		dialect: "postgres", direct: direct, directRepo: directRepo, proxy: proxy, repo: repo,
		rule: func(point string) faultproxy.Rule { return faultproxy.Rule{Match: point} },
		settle: func(t *testing.T) {
			// Let a statement the server received finish.
			time.Sleep(100 * time.Millisecond)
			require.Eventually(t, func() bool {
				var n int64
				_ = direct.Raw("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%accounts%' AND application_name = ? AND pid <> pg_backend_pid()", app).Scan(&n).Error
				return n == 0
			}, 5*time.Second, 20*time.Millisecond)
		},
		beforeLatency: func(*testing.T) {},
		afterLatency: func(*testing.T) {
			time.Sleep(300 * time.Millisecond) // what the server received runs to its end
		},
		budgets: func(*testing.T, faultTarget) []time.Duration {
			return []time.Duration{100 * time.Millisecond, 125 * time.Millisecond, 150 * time.Millisecond}
		},
	}
}

// faultMariaDB is MariaDB for the fault tests.
//
// go-sql-driver/mysql sends START TRANSACTION and COMMIT as text, and
// gormlock's transactions on MySQL begin with SET TRANSACTION ISOLATION
// LEVEL READ COMMITTED, which contains "commit" too: the COMMIT point
// skips that one match. The points are exact (every target sends all it
// names), so a skip that went wrong fails instead of skipping.
//
// Nothing is left to timing: after a fault every connection of the proxy
// is cut on both sides, and the wait is for every server session on the
// test's database other than the direct connection to end. A server
// session ends only after it has read, run and answered (into a closed
// socket) everything it was sent, and rolled back a transaction left open;
// a context that ends leaves the statement running on the server
// (go-sql-driver/mysql sends no KILL QUERY), and that too is over once the
// session is gone.
func faultMariaDB(t *testing.T) *faultDB {
	dsn := testdb.MariaDBDatabase(t)
	direct, err := mysqlopen.Open(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(direct) })
	require.NoError(t, fixtures.Migrate(context.Background(), direct))
	directRepo, err := repository.New[fixtures.Account](direct)
	require.NoError(t, err)
	// One direct connection: the session list below leaves out its own,
	// and so every direct session.
	directSQL, err := direct.DB()
	require.NoError(t, err)
	directSQL.SetMaxOpenConns(1)

	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	proxy, err := faultproxy.Start(cfg.Addr, faultproxy.MySQL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	cfg.Addr = proxy.Addr()
	viaProxy, err := mysqlopen.Open(cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(viaProxy) })
	repo, err := repository.New[fixtures.Account](viaProxy)
	require.NoError(t, err)
	viaSQL, err := viaProxy.DB()
	require.NoError(t, err)

	settle := func(t *testing.T) {
		t.Helper()
		var sessions []string
		require.Eventually(t, func() bool {
			sessions = nil
			err := direct.Raw("SELECT CONCAT(id, ' ', command, ' ', COALESCE(state, ''), ' ', COALESCE(info, '')) FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID()").Scan(&sessions).Error
			return err == nil && len(sessions) == 0
		}, 10*time.Second, 10*time.Millisecond, "server sessions of the cut connections are still there: %q", &sessions)
	}
	// A connection made without the latency, for the next call: under it,
	// the login and the session settings would take most of the call's
	// time.
	warm := func(t *testing.T) {
		proxy.SetLatency(0)
		require.NoError(t, viaSQL.PingContext(context.Background()))
		proxy.SetLatency(faultLatency)
	}
	afterLatency := func(t *testing.T) {
		proxy.CutAll()
		settle(t)
	}
	return &faultDB{
		dialect: "mariadb", direct: direct, directRepo: directRepo, proxy: proxy, repo: repo,
		rule:          mariaDBRule,
		exact:         true,
		settle:        settle,
		beforeLatency: warm,
		afterLatency:  afterLatency,
		// go-sql-driver/mysql sends a statement with arguments as a
		// prepare, an execute and a close, and a transaction begins with
		// two statements: a call makes many more round trips than with
		// pgx, which sends a statement in one. The deadlines are a fifth,
		// two fifths, ... six fifths of how long the call takes without
		// one, so they fall from its first statement to its COMMIT and
		// beyond.
		budgets: func(t *testing.T, target faultTarget) []time.Duration {
			var full time.Duration
			t.Run(target.name+"/latency without a deadline", func(t *testing.T) {
				a := target.prepare(t, directRepo)
				warm(t)
				begin := time.Now()
				err := target.write(context.Background(), repo, a, fmt.Sprintf("latency-full-%d", time.Now().UnixNano()))
				full = time.Since(begin)
				afterLatency(t)
				require.NoError(t, err)
				require.True(t, target.done(t, direct, a))
				t.Logf("%v", full)
			})
			var budgets []time.Duration
			for k := 1; k <= 6; k++ {
				budgets = append(budgets, full*time.Duration(k)/5)
			}
			return budgets
		},
	}
}

// mariaDBRule spells a fault point of faultTargets as MariaDB receives it.
func mariaDBRule(point string) faultproxy.Rule {
	switch point {
	case "begin":
		return faultproxy.Rule{Match: "START TRANSACTION"}
	case "commit":
		// The first match is SET TRANSACTION ISOLATION LEVEL READ
		// COMMITTED, which begins the transaction.
		return faultproxy.Rule{Match: "COMMIT", Skip: 1}
	}
	return faultproxy.Rule{Match: strings.ReplaceAll(point, `"`, "`")}
}

// TestFaultsAtProtocolPoints cuts the connection just before or just after
// each statement (or COMMIT) a write sends, or swallows the answer until
// the context ends, and checks that what the call reported matches what the
// database holds: applied is there, not applied is not, and an unknown
// outcome is resolved by the operation key — LookupOperation's answer
// matches the database, and repeating the call with the key applies it
// exactly once. It runs on PostgreSQL and on MariaDB.
func TestFaultsAtProtocolPoints(t *testing.T) {
	for _, dialect := range []string{"postgres", "mariadb"} {
		t.Run(dialect, func(t *testing.T) {
			var d *faultDB
			if dialect == "postgres" {
				d = faultPostgres(t)
			} else {
				d = faultMariaDB(t)
			}
			testFaults(t, d)
		})
	}
}

// faultCallTime is the time each faulted call has; faultReturnGrace is how
// long after that it may take to return, on a loaded machine.
const faultCallTime, faultReturnGrace = 500 * time.Millisecond, 5 * time.Second

// faultLatency is how long the latency part holds each message to the
// server.
const faultLatency = 40 * time.Millisecond

func testFaults(t *testing.T, d *faultDB) {
	direct, directRepo, proxy, repo := d.direct, d.directRepo, d.proxy, d.repo
	began := time.Now()
	counts := map[outcome]int{}
	faults := 0
	for _, target := range faultTargets() {
		for _, stmt := range target.statements {
			for _, action := range []faultproxy.Action{faultproxy.CutBefore, faultproxy.CutAfter, faultproxy.Blackhole} {
				rule := d.rule(stmt)
				rule.Action = action
				name := fmt.Sprintf("%s/%s %s", target.name, action, rule.Match)
				t.Run(name, func(t *testing.T) {
					a := target.prepare(t, directRepo)
					key := fmt.Sprintf("fault-%d", time.Now().UnixNano())
					before := proxy.Fired()
					proxy.Arm(rule)
					ctx, cancel := context.WithTimeout(context.Background(), faultCallTime)
					ret := make(chan error, 1)
					go func() { ret <- target.write(ctx, repo, a, key) }()
					var err error
					select {
					case err = <-ret:
					case <-time.After(faultCallTime + faultReturnGrace):
						// A call must return by its deadline; one that
						// waits on a silent connection past it is a
						// failure. Cutting the connections ends the wait,
						// and what it then reports is checked as usual.
						t.Errorf("%s did not return within %v of its deadline (%s at %q): it waits on the silent connection regardless of its context",
							target.name, faultReturnGrace, action, rule.Match)
						proxy.CutAll()
						err = <-ret
					}
					cancel()
					fired := proxy.Fired() > before
					proxy.Disarm()
					proxy.CutAll()
					if !fired {
						if d.exact {
							t.Fatalf("%s sends %q, but the rule %+v did not fire (err %v)", target.name, stmt, rule, err)
						}
						t.Skipf("%s does not send %q", target.name, stmt)
					}
					faults++
					got := outcomeOf(err)
					counts[got]++
					d.settle(t)
					isDone := target.done(t, direct, a)
					switch got {
					case applied:
						assert.True(t, isDone, "reported applied, but the database does not have it")
					case notApplied:
						assert.False(t, isDone, "reported not applied (%v), but the database has it", err)
					case unknown:
						if target.name == "Update without a key" {
							break // nothing to resolve it with: either is true
						}
						op, lerr := repository.LookupOperation(context.Background(), direct, key)
						require.NoError(t, lerr)
						assert.Equal(t, isDone, op != nil, "LookupOperation says applied=%v, the database %v", op != nil, isDone)
						if target.name == "RunInTx of two updates" {
							break // the repeat would be the caller's whole transaction
						}
						// Repeat with the key on a healthy connection: it
						// applies exactly once.
						rerr := target.write(context.Background(), repo, a, key)
						require.NoError(t, rerr)
						assert.True(t, target.done(t, direct, a), "the repeat applied it")
					}
					t.Logf("reported %s (%v); database: applied=%v", got, err, isDone)
				})
			}
		}
	}
	// Latency: every message to the server is held 40 ms and the calls
	// have deadlines (d.budgets) that fall at every stage of their
	// statements. What each reports still matches the database.
	proxy.SetLatency(faultLatency)
	for _, target := range faultTargets() {
		for i, budget := range d.budgets(t, target) {
			t.Run(fmt.Sprintf("%s/latency %d", target.name, i), func(t *testing.T) {
				a := target.prepare(t, directRepo)
				key := fmt.Sprintf("latency-%d", time.Now().UnixNano())
				d.beforeLatency(t)
				ctx, cancel := context.WithTimeout(context.Background(), budget)
				err := target.write(ctx, repo, a, key)
				cancel()
				faults++
				got := outcomeOf(err)
				counts[got]++
				d.afterLatency(t)
				isDone := target.done(t, direct, a)
				switch got {
				case applied:
					assert.True(t, isDone, "reported applied, but the database does not have it")
				case notApplied:
					assert.False(t, isDone, "reported not applied (%v), but the database has it", err)
				case unknown:
					if target.name != "Update without a key" {
						op, lerr := repository.LookupOperation(context.Background(), direct, key)
						require.NoError(t, lerr)
						assert.Equal(t, isDone, op != nil, "LookupOperation and the database disagree")
					}
				}
				t.Logf("reported %s (%v); database: applied=%v", got, err, isDone)
			})
		}
	}
	proxy.SetLatency(0)
	verdict := "every report matched the database"
	if t.Failed() {
		verdict = "see the failures above"
	}
	t.Logf("%s: %d faults injected: %d reported applied, %d not applied, %d unknown; %s (%v)",
		d.dialect, faults, counts[applied], counts[notApplied], counts[unknown], verdict, time.Since(began).Round(time.Millisecond))
	require.Zero(t, proxy.Unparsed(), "a connection the proxy could not read: no rule could fire on it")
	require.Positive(t, counts[unknown], "some cut must leave the outcome unknown")
	require.Positive(t, counts[notApplied], "some cut must be a definite failure")
}
