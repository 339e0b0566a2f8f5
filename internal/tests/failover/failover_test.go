//go:build linux

package failover_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/pgpair"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// A failover under 8 writers.
//
// Every writer increments an account of its own in a loop through the
// two-host DSN (target_session_attrs=read-write), one logical operation per
// call, and records what each call reported. Mid-run the primary goes away
// and the standby is promoted; the writers reconnect on their own (the pool
// drops the broken connections, and a new connection finds the server that
// takes writes) and go on until each has 10 more acknowledged writes. Then,
// on the promoted server, account checks every call: see account.
//
// The scenarios:
//
//   - sync, stop-primary: synchronous replication, the primary stopped at once
//     and the standby promoted. Nothing acknowledged may be missing.
//   - sync, lose-lag: the walreceiver stopped until every writer's commit
//     waits for it, then the WAL in flight is lost (pgpair.LoseLag). Those
//     commits were never acknowledged: exactly one unknown outcome per writer,
//     and nothing acknowledged missing.
//   - remote_apply, replay-paused: replay paused until every writer's commit
//     waits for it and the standby has received their WAL; then the primary
//     stops. The commits were never acknowledged but survive: exactly one
//     unknown outcome per writer, and every one was applied. Half the writers
//     use no operation key: the negative control that shows an unknown
//     outcome cannot be resolved without one — a blind retry applies each of
//     theirs twice.
//   - async, lose-lag: the negative control of replication. Writes
//     acknowledged while the walreceiver is stopped are lost: every one of
//     them is missing after the failover, and the test counts them.
func TestFailover(t *testing.T) {
	keyed8 := []writerMode{keyedOnce, keyedOnce, keyedOnce, keyedOnce, keyedOnce, keyedOnce, keyedOnce, keyedOnce}
	type scenario struct {
		name     string
		mode     pgpair.Replication
		writers  []writerMode
		lossless bool
		fault    func(t *testing.T, ctx context.Context, p *pgpair.Pair, w *workload)
		check    func(t *testing.T, ctx context.Context, db *gorm.DB, w *workload, ty tally)
	}
	allWaiting := func(t *testing.T, ctx context.Context, p *pgpair.Pair, n int) {
		waitFor(t, ctx, "every writer's commit waiting for the standby", func() bool {
			waiting, err := p.SyncRepWaiters(ctx)
			require.NoError(t, err)
			return waiting == n
		})
	}
	scenarios := []scenario{
		{
			name: "sync/stop-primary", mode: pgpair.Sync, writers: keyed8, lossless: true,
			fault: func(t *testing.T, ctx context.Context, p *pgpair.Pair, w *workload) {
				w.phase.Store(outage)
				require.NoError(t, p.StopPrimary(ctx))
				require.NoError(t, p.Promote(ctx))
			},
		},
		{
			name: "sync/lose-lag", mode: pgpair.Sync, writers: keyed8, lossless: true,
			fault: func(t *testing.T, ctx context.Context, p *pgpair.Pair, w *workload) {
				loss, err := p.LoseLag(ctx, func(ctx context.Context) error {
					w.phase.Store(window)
					allWaiting(t, ctx, p, len(w.writers))
					w.phase.Store(outage)
					return nil
				})
				require.NoError(t, err)
				t.Logf("WAL the promoted server never had: %d bytes (%s..%s)", loss.Bytes, loss.StandbyLSN, loss.PrimaryLSN)
				require.Positive(t, loss.Bytes)
			},
			check: func(t *testing.T, _ context.Context, _ *gorm.DB, w *workload, ty tally) {
				require.Equal(t, len(w.writers), ty.unknown, "one unknown outcome per writer: its commit waiting for the standby")
			},
		},
		{
			name: "remote_apply/replay-paused", mode: pgpair.RemoteApply, lossless: true,
			writers: []writerMode{keyedOnce, unkeyed, keyedOnce, unkeyed, keyedOnce, unkeyed, keyedOnce, unkeyed},
			fault: func(t *testing.T, ctx context.Context, p *pgpair.Pair, w *workload) {
				w.phase.Store(window)
				require.NoError(t, p.PauseReplay(ctx))
				allWaiting(t, ctx, p, len(w.writers))
				require.NoError(t, p.WaitReceived(ctx))
				w.phase.Store(outage)
				require.NoError(t, p.StopPrimary(ctx))
				require.NoError(t, p.Promote(ctx))
			},
			check: func(t *testing.T, ctx context.Context, db *gorm.DB, w *workload, ty tally) {
				require.Equal(t, len(w.writers), ty.unknown, "one unknown outcome per writer: its commit waiting for the standby")
				require.Equal(t, ty.keyedWriters, ty.unknownIn, "the standby had them all: every keyed unknown was applied")
				require.Equal(t, ty.plainWriters, ty.unkeyedUnknownApplied, "and every unkeyed one")
				// The negative control: without a key nothing tells which
				// unknown call was applied. A blind retry repeats each
				// logical operation, and every one that was applied is now
				// applied twice.
				var intended, doubled int64
				for _, wr := range w.writers {
					if wr.mode != unkeyed {
						continue
					}
					for _, o := range wr.ops {
						if o.outcome != notApplied {
							intended++
						}
						if o.outcome == unknown {
							_, err := wr.repo.Mutate(ctx, wr.acct, increment, once)
							require.NoError(t, err)
						}
					}
					doubled += balance(t, ctx, db, wr.acct)
				}
				doubled -= intended
				t.Logf("negative control: a blind retry of the %d unkeyed unknown outcomes applied %d operations twice", ty.unkeyedUnknown, doubled)
				require.Equal(t, int64(ty.unkeyedUnknownApplied), doubled)
				require.Positive(t, doubled)
			},
		},
		{
			name: "async/lose-lag", mode: pgpair.Async, writers: keyed8, lossless: false,
			fault: func(t *testing.T, ctx context.Context, p *pgpair.Pair, w *workload) {
				loss, err := p.LoseLag(ctx, func(ctx context.Context) error {
					w.phase.Store(window)
					waitFor(t, ctx, "40 writes acknowledged by the primary alone", func() bool { return w.ackedTotal(window) >= 40 })
					w.phase.Store(outage)
					return nil
				})
				require.NoError(t, err)
				t.Logf("WAL the promoted server never had: %d bytes (%s..%s)", loss.Bytes, loss.StandbyLSN, loss.PrimaryLSN)
				require.Positive(t, loss.Bytes)
			},
			check: func(t *testing.T, _ context.Context, _ *gorm.DB, _ *workload, ty tally) {
				t.Logf("negative control: asynchronous replication lost %d acknowledged writes", ty.lost)
				require.GreaterOrEqual(t, ty.ackedByPhase[window], 40)
				require.Equal(t, ty.ackedByPhase[window], ty.lostByPhase[window],
					"every write the primary acknowledged while the standby received nothing is lost")
				require.Zero(t, ty.lostByPhase[after], "writes after the promotion are kept")
				require.Equal(t, ty.acked, ty.present+ty.lost)
			},
		},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			ctx := testdb.Ctx(t)
			p := pgpair.Start(t, pgpair.Options{Replication: sc.mode})
			db := migrated(t, ctx, p.FailoverDSN())
			w := startWorkload(t, ctx, db, sc.writers...)
			waitFor(t, ctx, "10 acknowledged writes per writer", func() bool { return w.acked(before) >= 10 })

			sc.fault(t, ctx, p, w)
			w.phase.Store(after)
			waitFor(t, ctx, "10 acknowledged writes per writer on the promoted server", func() bool { return w.acked(after) >= 10 })
			w.halt()

			var port int
			var inRecovery bool
			require.NoError(t, db.WithContext(ctx).Raw("SELECT inet_server_port(), pg_is_in_recovery()").Row().Scan(&port, &inRecovery))
			_, standby := p.Ports()
			require.Equal(t, standby, port, "the two-host DSN now reaches the promoted standby")
			require.False(t, inRecovery)

			ty := account(t, ctx, db, w, sc.lossless)
			t.Logf("%s: %v", sc.name, ty)
			require.Empty(t, ty.misreported, "calls reported as not applied whose write was applied")
			if sc.lossless {
				require.Zero(t, ty.lost)
			}
			require.Equal(t, ty.unknown, ty.unknownIn+ty.unknownOut+ty.unkeyedUnknown)
			if sc.check != nil {
				sc.check(t, ctx, db, w, ty)
			}
		})
	}
}

// TestKeyedRetryKeepsAnUnknownOutcomeUnknown: Mutate, Upsert and
// MutateRowLocked with an operation key and the default retry policy retry an
// attempt whose outcome was unknown. When the retry then fails before it
// could learn the first attempt's fate (it cannot connect: the primary is
// gone and the standby not yet promoted), the call's outcome is still
// unknown, and must be reported so: the first attempt's COMMIT may have been
// applied, and here it was.
//
// The setup makes it certain: with remote_apply and the standby's replay
// paused, each call's COMMIT waits for the standby after the standby has the
// WAL; the primary is stopped (the COMMIT's outcome is unknown to the
// client), the retry finds no server that takes writes (the call asks about
// its key until its deadline), and only after every call returned is the
// standby promoted — with the first attempts' writes.
func TestKeyedRetryKeepsAnUnknownOutcomeUnknown(t *testing.T) {
	ctx := testdb.Ctx(t)
	p := pgpair.Start(t, pgpair.Options{Replication: pgpair.RemoteApply})
	db := migrated(t, ctx, p.FailoverDSN())
	repo := accounts(t, db)
	calls := map[string]func(ctx context.Context, id int64, key string) error{
		"Mutate": func(ctx context.Context, id int64, key string) error {
			_, err := repo.Mutate(ctx, id, increment, repository.OpKey(key))
			return err
		},
		"Upsert": func(ctx context.Context, id int64, key string) error {
			_, err := repo.Upsert(ctx, id, nil, increment, repository.OpKey(key))
			return err
		},
		"MutateRowLocked": func(ctx context.Context, id int64, key string) error {
			_, err := repo.MutateRowLocked(ctx, id, increment, repository.OpKey(key))
			return err
		},
	}
	ids := map[string]int64{}
	for name := range calls {
		a := &fixtures.Account{Owner: name}
		require.NoError(t, repo.Create(ctx, a))
		ids[name] = a.ID
	}
	require.NoError(t, p.CatchUp(ctx))
	require.NoError(t, p.PauseReplay(ctx))

	// A keyed call whose outcome is unknown keeps asking about its key
	// while no server answers, until its context ends: give the calls a
	// deadline that ends while the standby is not yet promoted.
	callCtx, cancelCalls := context.WithTimeout(ctx, 20*time.Second)
	defer cancelCalls()
	errs := make(map[string]error)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, call := range calls {
		wg.Go(func() {
			err := call(callCtx, ids[name], "retry-"+name)
			mu.Lock()
			errs[name] = err
			mu.Unlock()
		})
	}
	waitFor(t, ctx, "every call's COMMIT waiting for the standby", func() bool {
		n, err := p.SyncRepWaiters(ctx)
		require.NoError(t, err)
		return n == len(calls)
	})
	require.NoError(t, p.WaitReceived(ctx))
	require.NoError(t, p.StopPrimary(ctx))
	wg.Wait()
	require.NoError(t, p.Promote(ctx))

	for name := range calls {
		op, err := repository.LookupOperation(ctx, db, "retry-"+name)
		require.NoError(t, err)
		require.NotNil(t, op, "%s: the first attempt was applied (the premise)", name)
		require.Equal(t, int64(1), balance(t, ctx, db, ids[name]), name)
		t.Logf("%s returned: %v", name, errs[name])
		assert.ErrorIs(t, errs[name], locking.ErrCommitUnknown,
			"%s: the write was applied, so the call must not report it as not applied", name)
	}
}
