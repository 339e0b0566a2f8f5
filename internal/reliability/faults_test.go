package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/exampledb"
	"github.com/gormlock/gormlock/internal/faultproxy"
	"github.com/gormlock/gormlock/internal/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/opendb"
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
	prepare    func(t *testing.T, direct *repository.Repository[models.Account]) *models.Account
	write      func(ctx context.Context, r *repository.Repository[models.Account], a *models.Account, key string) error
	done       func(t *testing.T, direct *gorm.DB, a *models.Account) bool
}

// balanceIs reports whether account a has balance want.
func balanceIs(t *testing.T, db *gorm.DB, id, want int64) bool {
	t.Helper()
	var rows []int64
	require.NoError(t, db.Raw("SELECT balance FROM accounts WHERE id = ?", id).Scan(&rows).Error)
	return len(rows) == 1 && rows[0] == want
}

func faultTargets() []faultTarget {
	fresh := func(t *testing.T, direct *repository.Repository[models.Account]) *models.Account {
		a := &models.Account{Owner: "fault", Balance: 10}
		require.NoError(t, direct.Create(context.Background(), a))
		return a
	}
	return []faultTarget{
		{
			name:       "Update",
			statements: []string{`UPDATE "accounts"`, "begin", `INSERT INTO gormlock_operations`, "commit"},
			prepare:    fresh,
			write: func(ctx context.Context, r *repository.Repository[models.Account], a *models.Account, key string) error {
				e := *a
				e.Balance = 99
				return r.Update(ctx, &e, repository.OpKey(key))
			},
			done: func(t *testing.T, db *gorm.DB, a *models.Account) bool { return balanceIs(t, db, a.ID, 99) },
		},
		{
			name:       "Update without a key",
			statements: []string{`UPDATE "accounts"`},
			prepare:    fresh,
			write: func(ctx context.Context, r *repository.Repository[models.Account], a *models.Account, _ string) error {
				e := *a
				e.Balance = 99
				return r.Update(ctx, &e)
			},
			done: func(t *testing.T, db *gorm.DB, a *models.Account) bool { return balanceIs(t, db, a.ID, 99) },
		},
		{
			name:       "Delete",
			statements: []string{`DELETE FROM "accounts"`, `INSERT INTO gormlock_operations`, "commit"},
			prepare:    fresh,
			write: func(ctx context.Context, r *repository.Repository[models.Account], a *models.Account, key string) error {
				e := *a
				return r.Delete(ctx, &e, repository.OpKey(key))
			},
			done: func(t *testing.T, db *gorm.DB, a *models.Account) bool {
				var n int64
				require.NoError(t, db.Raw("SELECT count(*) FROM accounts WHERE id = ?", a.ID).Scan(&n).Error)
				return n == 0
			},
		},
		{
			name:       "Create",
			statements: []string{`INSERT INTO "accounts"`, `UPDATE "accounts"`, `INSERT INTO gormlock_operations`, "commit"},
			prepare: func(t *testing.T, _ *repository.Repository[models.Account]) *models.Account {
				return &models.Account{Owner: fmt.Sprintf("created-%d", time.Now().UnixNano())}
			},
			write: func(ctx context.Context, r *repository.Repository[models.Account], a *models.Account, key string) error {
				e := *a
				return r.Create(ctx, &e, repository.OpKey(key))
			},
			done: func(t *testing.T, db *gorm.DB, a *models.Account) bool {
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
			write: func(ctx context.Context, r *repository.Repository[models.Account], a *models.Account, key string) error {
				_, err := r.Mutate(ctx, a.ID, func(a *models.Account) error { a.Balance++; return nil },
					repository.OpKey(key), repository.Retry(locking.RetryPolicy{MaxAttempts: 1}))
				return err
			},
			done: func(t *testing.T, db *gorm.DB, a *models.Account) bool { return balanceIs(t, db, a.ID, 11) },
		},
		{
			name:       "MutateLocked",
			statements: []string{`FOR UPDATE`, `UPDATE "accounts"`, `INSERT INTO gormlock_operations`, "commit"},
			prepare:    fresh,
			write: func(ctx context.Context, r *repository.Repository[models.Account], a *models.Account, key string) error {
				_, err := r.MutateLocked(ctx, a.ID, func(a *models.Account) error { a.Balance++; return nil },
					repository.OpKey(key), repository.Retry(locking.RetryPolicy{MaxAttempts: 1}))
				return err
			},
			done: func(t *testing.T, db *gorm.DB, a *models.Account) bool { return balanceIs(t, db, a.ID, 11) },
		},
		{
			name:       "RunInTx of two updates",
			statements: []string{`UPDATE "accounts"`, "commit"},
			prepare:    fresh,
			write: func(ctx context.Context, r *repository.Repository[models.Account], a *models.Account, key string) error {
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
			done: func(t *testing.T, db *gorm.DB, a *models.Account) bool {
				var b int64
				require.NoError(t, db.Raw("SELECT balance FROM accounts WHERE id = ?", a.ID).Scan(&b).Error)
				require.Contains(t, []int64{10, 51}, b, "both writes or neither, never half")
				return b == 51
			},
		},
	}
}

// TestFaultsAtProtocolPoints cuts the connection just before or just after
// each statement (or COMMIT) a write sends, or swallows the answer until
// the context ends, and checks that what the call reported matches what the
// database holds: applied is there, not applied is not, and an unknown
// outcome is resolved by the operation key — LookupOperation's answer
// matches the database, and repeating the call with the key applies it
// exactly once.
func TestFaultsAtProtocolPoints(t *testing.T) {
	dsn := testdb.PostgresSchema(t)
	direct, err := opendb.Postgres(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = opendb.Close(direct) })
	require.NoError(t, exampledb.Migrate(context.Background(), direct))
	directRepo, err := repository.New[models.Account](direct)
	require.NoError(t, err)

	u, err := url.Parse(dsn)
	require.NoError(t, err)
	proxy, err := faultproxy.Start(u.Host, faultproxy.Postgres)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	u.Host = proxy.Addr()
	viaProxy, err := opendb.Postgres(u.String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = opendb.Close(viaProxy) })
	repo, err := repository.New[models.Account](viaProxy)
	require.NoError(t, err)

	counts := map[outcome]int{}
	faults := 0
	for _, target := range faultTargets() {
		for _, stmt := range target.statements {
			for _, action := range []faultproxy.Action{faultproxy.CutBefore, faultproxy.CutAfter, faultproxy.Blackhole} {
				name := fmt.Sprintf("%s/%s %s", target.name, action, stmt)
				t.Run(name, func(t *testing.T) {
					a := target.prepare(t, directRepo)
					key := fmt.Sprintf("fault-%d", time.Now().UnixNano())
					before := proxy.Fired()
					proxy.Arm(faultproxy.Rule{Match: stmt, Action: action})
					ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
					err := target.write(ctx, repo, a, key)
					cancel()
					fired := proxy.Fired() > before
					proxy.Disarm()
					proxy.CutAll()
					if !fired {
						t.Skipf("%s does not send %q", target.name, stmt)
					}
					faults++
					got := outcomeOf(err)
					counts[got]++
					// Let a statement the server received finish.
					time.Sleep(100 * time.Millisecond)
					require.Eventually(t, func() bool {
						var n int64
						_ = direct.Raw("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%accounts%' AND pid <> pg_backend_pid()").Scan(&n).Error
						return n == 0
					}, 5*time.Second, 20*time.Millisecond)
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
	// have 150 ms, so their deadlines fall at every stage of their
	// statements. What each reports still matches the database.
	proxy.SetLatency(40 * time.Millisecond)
	for _, target := range faultTargets() {
		for i := range 3 {
			t.Run(fmt.Sprintf("%s/latency %d", target.name, i), func(t *testing.T) {
				a := target.prepare(t, directRepo)
				key := fmt.Sprintf("latency-%d", time.Now().UnixNano())
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(100+25*i)*time.Millisecond)
				err := target.write(ctx, repo, a, key)
				cancel()
				faults++
				got := outcomeOf(err)
				counts[got]++
				time.Sleep(300 * time.Millisecond) // what the server received runs to its end
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
	t.Logf("%d faults injected: %d reported applied, %d not applied, %d unknown; every report matched the database",
		faults, counts[applied], counts[notApplied], counts[unknown])
	require.Positive(t, counts[unknown], "some cut must leave the outcome unknown")
	require.Positive(t, counts[notApplied], "some cut must be a definite failure")
}
