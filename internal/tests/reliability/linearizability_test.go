package reliability_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mysqlopen "github.com/gormlock/gormlock/opendb/mysql"
	pgopen "github.com/gormlock/gormlock/opendb/postgres"
	sqliteopen "github.com/gormlock/gormlock/opendb/sqlite"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/linearize"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// long reports whether the long variant of the suite runs.
func long() bool { return os.Getenv("GORMLOCK_RELIABILITY") == "long" }

// linConfig is what a client process of the linearizability workload is
// told, through the environment.
type linConfig struct {
	Dialect   string `json:"dialect"`
	DSN       string `json:"dsn"` // a SQLite file, a PostgreSQL DSN or a MariaDB DSN
	Seed      uint64 `json:"seed"`
	Ops       int    `json:"ops"`     // per client
	Clients   int    `json:"clients"` // per process
	Base      int    `json:"base"`    // number of the process's first client
	Keys      int    `json:"keys"`
	Unguarded bool   `json:"unguarded"`
	Out       string `json:"out"`
}

const linChildEnv = "GORMLOCK_LIN_CHILD"

// linRun is what one workload run did, for the figures.
type linRun struct {
	ops, unknown, terminated int
	result                   linearize.Result
}

// TestLinearizable runs the workload on each database over several seeds,
// and on PostgreSQL and MariaDB once more while the database terminates the
// clients' sessions at random (pg_terminate_backend, KILL CONNECTION):
// every history must be linearizable. Each client is its own Repository in
// one of 4 processes, so nothing in a process queues the callers and the
// version guard alone keeps them apart.
func TestLinearizable(t *testing.T) {
	seeds, opsPerSeed := 5, 4000
	if long() {
		seeds, opsPerSeed = 10, 20000
	}
	type variant struct {
		dialect string
		kill    bool
	}
	for _, v := range []variant{{"sqlite", false}, {"postgres", false}, {"postgres", true}, {"mariadb", false}, {"mariadb", true}} {
		name := v.dialect
		if v.kill {
			name += map[string]string{"postgres": "/pg_terminate_backend", "mariadb": "/KILL CONNECTION"}[v.dialect]
		}
		t.Run(name, func(t *testing.T) {
			began := time.Now()
			var total linRun
			for seed := 1; seed <= seeds; seed++ {
				run := linWorkload(t, v.dialect, uint64(seed), opsPerSeed, v.kill, false)
				if run.result.Outcome != porcupine.Ok {
					path := filepath.Join(os.TempDir(), fmt.Sprintf("gormlock-lin-%s-%d.html", v.dialect, seed))
					_ = run.result.WriteVisualization(path)
					t.Fatalf("seed %d: history is not linearizable (%v); visualization: %s", seed, run.result, path)
				}
				total.ops += run.ops
				total.unknown += run.unknown
				total.terminated += run.terminated
			}
			t.Logf("%s: %d seeds, %d operations checked, %d unknown outcomes, %d sessions terminated, 0 non-linearizable histories (%v)",
				name, seeds, total.ops, total.unknown, total.terminated, time.Since(began).Round(time.Millisecond))
		})
	}
}

// TestLinearizableNegativeControl runs the same clients with blind
// increments — read, add one, write back without the version guard — and
// the checker must reject the history: it can fail.
func TestLinearizableNegativeControl(t *testing.T) {
	for _, dialect := range testdb.Dialects {
		t.Run(dialect, func(t *testing.T) {
			run := linWorkload(t, dialect, 1, 2000, false, true)
			require.Equal(t, porcupine.Illegal, run.result.Outcome, "the unguarded workload loses updates; the checker must say so (%v)", run.result)
		})
	}
}

// linWorkload runs one seed of the workload: it creates the records, starts
// the client processes, optionally terminates their sessions meanwhile,
// then merges and checks the histories.
func linWorkload(t *testing.T, dialect string, seed uint64, ops int, kill, unguarded bool) linRun {
	t.Helper()
	const procs, clients, keys = 4, 2, 4
	dir := t.TempDir()
	app := "gllin" + strconv.FormatUint(rand.Uint64()%1e9, 10)
	var db *gorm.DB
	var dsn string
	switch dialect {
	case "sqlite":
		dsn = filepath.Join(dir, "lin.db")
		db = testdb.OpenSQLiteFile(t, dsn)
	case "postgres":
		dsn = fixtures.WithParam(testdb.PostgresSchema(t), "application_name", app)
		var err error
		db, err = pgopen.Open(dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = fixtures.Close(db) })
		require.NoError(t, fixtures.Migrate(context.Background(), db))
	case "mariadb":
		// A database of its own: the clients' sessions are the ones on
		// it, other than the parent's.
		dsn = testdb.MariaDBDatabase(t)
		var err error
		db, err = mysqlopen.Open(dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = fixtures.Close(db) })
		require.NoError(t, fixtures.Migrate(context.Background(), db))
		// One connection: the session list below leaves out its own,
		// and so every session of the parent.
		sqlDB, err := db.DB()
		require.NoError(t, err)
		sqlDB.SetMaxOpenConns(1)
	default:
		t.Fatalf("unknown dialect %q", dialect)
	}

	// The records exist at the start, created through the library and
	// recorded like every other operation (client 0).
	parent, err := os.Create(filepath.Join(dir, "parent.jsonl"))
	require.NoError(t, err)
	rec := linearize.NewRecorder(parent)
	accounts, err := repository.New[fixtures.Account](db)
	require.NoError(t, err)
	for k := 1; k <= keys; k++ {
		p := rec.Begin(linearize.Op{Client: 0, Key: strconv.Itoa(k), Kind: linearize.KindCreate, Value: 0})
		a := &fixtures.Account{Model: models.Model{ID: int64(k)}, Owner: "lin"}
		require.NoError(t, accounts.Create(context.Background(), a))
		require.NoError(t, p.End(linearize.ResultOK, 0, a.Version))
	}
	require.NoError(t, parent.Close())

	var terminated atomic.Int64
	stopChaos := make(chan struct{})
	var chaos sync.WaitGroup
	if kill {
		chaos.Add(1)
		go func() {
			defer chaos.Done()
			r := rand.New(rand.NewPCG(seed, 99))
			for {
				select {
				case <-stopChaos:
					return
				case <-time.After(time.Duration(20+r.IntN(60)) * time.Millisecond):
				}
				var n int64
				if dialect == "mariadb" {
					n = killMariaDBSession(db)
				} else {
					_ = db.Raw(`SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
					WHERE application_name = ? AND pid <> pg_backend_pid() ORDER BY random() LIMIT 1) t`, app).Scan(&n).Error
				}
				terminated.Add(n)
			}
		}()
	}

	var cmds []*exec.Cmd
	var outputs []*bytes.Buffer
	files := []string{parent.Name()}
	for p := range procs {
		cfg := linConfig{Dialect: dialect, DSN: dsn, Seed: seed*1000 + uint64(p), Ops: ops / (procs * clients),
			Clients: clients, Base: 1 + p*clients, Keys: keys, Unguarded: unguarded,
			Out: filepath.Join(dir, fmt.Sprintf("client-%d.jsonl", p))}
		files = append(files, cfg.Out)
		b, _ := json.Marshal(cfg)
		cmd := exec.Command(os.Args[0], "-test.run=^TestLinearizabilityChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), linChildEnv+"="+string(b))
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		require.NoError(t, cmd.Start())
		cmds = append(cmds, cmd)
		outputs = append(outputs, out)
	}
	var childErr error
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			childErr = errors.Join(childErr, fmt.Errorf("client process %d: %w\n%s", i, err, outputs[i]))
		}
	}
	close(stopChaos)
	chaos.Wait()
	require.NoError(t, childErr, "a client process failed")

	var readers []io.Reader
	for _, f := range files {
		fh, err := os.Open(f)
		require.NoError(t, err)
		defer fh.Close()
		readers = append(readers, fh)
	}
	history, err := linearize.ReadHistory(readers...)
	require.NoError(t, err)
	res, err := linearize.Check(history, 2*time.Minute)
	require.NoError(t, err)
	if res.Outcome != porcupine.Ok && !unguarded {
		// Keep the histories for a look.
		keep := filepath.Join(os.TempDir(), fmt.Sprintf("gormlock-lin-%s-%d-%s", dialect, seed, app))
		if err := os.MkdirAll(keep, 0o755); err == nil {
			for _, f := range files {
				if b, err := os.ReadFile(f); err == nil {
					_ = os.WriteFile(filepath.Join(keep, filepath.Base(f)), b, 0o644)
				}
			}
			t.Logf("histories kept in %s", keep)
		}
	}
	return linRun{ops: res.Ops, unknown: res.Unknown, terminated: int(terminated.Load()), result: res}
}

// killMariaDBSession kills, with KILL CONNECTION, one session of a client
// process at random: one on db's database other than db's own (db has one
// connection). It returns how many it killed, 0 or 1; a session that ended
// before the KILL (error 1094, unknown thread) is not counted.
func killMariaDBSession(db *gorm.DB) int64 {
	var ids []int64
	if err := db.Raw("SELECT id FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID() ORDER BY RAND() LIMIT 1").Scan(&ids).Error; err != nil || len(ids) == 0 {
		return 0
	}
	if err := db.Exec("KILL CONNECTION " + strconv.FormatInt(ids[0], 10)).Error; err != nil {
		return 0
	}
	return 1
}

// TestLinearizabilityChild is a client process of linWorkload; it does
// nothing in a normal test run.
func TestLinearizabilityChild(t *testing.T) {
	raw := os.Getenv(linChildEnv)
	if raw == "" {
		t.Skip("a client process of TestLinearizable")
	}
	var cfg linConfig
	require.NoError(t, json.Unmarshal([]byte(raw), &cfg))
	var db *gorm.DB
	var err error
	for try := 0; try < 50; try++ { // the parent may be terminating sessions
		switch cfg.Dialect {
		case "sqlite":
			db, err = sqliteopen.Open(cfg.DSN)
		case "mariadb":
			db, err = mysqlopen.Open(cfg.DSN)
		default:
			db, err = pgopen.Open(cfg.DSN)
		}
		if err == nil && cfg.Dialect == "mariadb" {
			// repository.New asks a MySQL server what it is, once per
			// pool; ask here, where a killed session is tried again,
			// and not in the clients.
			if _, err = repository.New[fixtures.Account](db); err != nil {
				_ = fixtures.Close(db)
			}
		}
		if err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, err)
	defer fixtures.Close(db)
	out, err := os.Create(cfg.Out)
	require.NoError(t, err)
	w := bufio.NewWriter(out)
	rec := linearize.NewRecorder(w)
	var g sync.WaitGroup
	errs := make([]error, cfg.Clients)
	for c := range cfg.Clients {
		g.Add(1)
		go func() {
			defer g.Done()
			errs[c] = linClient(db, rec, cfg, cfg.Base+c, rand.New(rand.NewPCG(cfg.Seed, uint64(c))))
		}()
	}
	g.Wait()
	require.NoError(t, errors.Join(errs...))
	require.NoError(t, rec.Err())
	require.NoError(t, w.Flush())
	require.NoError(t, out.Close())
}

// linClient runs one client: its own Repository, random operations on the
// keys, each recorded with what the library reported.
func linClient(db *gorm.DB, rec *linearize.Recorder, cfg linConfig, client int, r *rand.Rand) error {
	accounts, err := repository.New[fixtures.Account](db, repository.WithRetryPolicy(
		locking.RetryPolicy{MaxAttempts: 20, BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond}))
	if err != nil {
		return err
	}
	ctx := context.Background()
	seen := map[int64]int64{} // the last version this client saw of each key
	for i := 0; i < cfg.Ops; i++ {
		k := int64(1 + r.IntN(cfg.Keys))
		op := linearize.Op{Client: client, Key: strconv.FormatInt(k, 10)}
		roll := r.IntN(100)
		if cfg.Unguarded {
			roll = 25 + roll%50 // reads and increments only
		}
		switch {
		case roll < 25: // read
			op.Kind = linearize.KindRead
			p := rec.Begin(op)
			a, err := accounts.Get(ctx, k)
			switch {
			case err == nil:
				seen[k] = a.Version
				_ = p.End(linearize.ResultOK, a.Balance, a.Version)
			case errors.Is(err, locking.ErrNotFound):
				_ = p.End(linearize.ResultNotFound, 0, 0)
			default:
				_ = p.End(linearize.ResultNotApplied, 0, 0)
			}
		case roll < 75: // increment
			op.Kind, op.Delta = linearize.KindIncrement, 1
			op.Unguarded = cfg.Unguarded
			p := rec.Begin(op)
			var a *fixtures.Account
			var err error
			if cfg.Unguarded {
				a, err = blindIncrement(ctx, db, accounts, k)
			} else {
				a, err = accounts.Mutate(ctx, k, func(a *fixtures.Account) error { a.Balance++; return nil },
					repository.OpKey(fmt.Sprintf("lin-%d-%d-%d", cfg.Seed, client, i)))
			}
			switch res := linResult(err); res {
			case linearize.ResultOK:
				seen[k] = a.Version
				_ = p.End(res, a.Balance, a.Version)
			case linearize.ResultNotFound, linearize.ResultUnknown:
				_ = p.End(res, 0, 0)
			default:
				_ = p.End(linearize.ResultNotApplied, 0, 0)
			}
		case roll < 88: // guarded update at the version last seen
			if seen[k] == 0 {
				i--
				continue
			}
			op.Kind, op.Expected, op.Value = linearize.KindUpdate, seen[k], int64(r.IntN(1000))
			p := rec.Begin(op)
			a := &fixtures.Account{Model: models.Model{ID: k, Versioned: models.Versioned{Version: op.Expected}}, Owner: "lin", Balance: op.Value}
			err := accounts.Update(ctx, a)
			res := linResult(err)
			if res == linearize.ResultOK {
				seen[k] = a.Version
			}
			_ = p.End(res, 0, a.Version*b2i(res == linearize.ResultOK))
		case roll < 94: // guarded delete at the version last seen
			if seen[k] == 0 {
				i--
				continue
			}
			op.Kind, op.Expected = linearize.KindDelete, seen[k]
			p := rec.Begin(op)
			err := accounts.Delete(ctx, &fixtures.Account{Model: models.Model{ID: k, Versioned: models.Versioned{Version: op.Expected}}})
			_ = p.End(linResult(err), 0, 0)
		default: // create
			op.Kind, op.Value = linearize.KindCreate, int64(r.IntN(1000))
			p := rec.Begin(op)
			a := &fixtures.Account{Model: models.Model{ID: k}, Owner: "lin", Balance: op.Value}
			err := accounts.Create(ctx, a)
			res := linResult(err)
			if res == linearize.ResultOK {
				seen[k] = a.Version
				_ = p.End(res, 0, a.Version)
			} else {
				_ = p.End(res, 0, 0)
			}
		}
	}
	return rec.Err()
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// linResult turns what the library reported into a history result: the
// library's promise is that anything but ErrCommitUnknown, ErrRecordGone
// (applied) and the named conditions means "not applied", and the checker holds it to that.
func linResult(err error) string {
	var stale *locking.StaleDataError
	switch {
	case err == nil:
		return linearize.ResultOK
	case errors.Is(err, locking.ErrCommitUnknown):
		return linearize.ResultUnknown
	case errors.Is(err, locking.ErrRecordGone):
		// Applied (a keyed call's earlier attempt), the record deleted
		// since: the value it wrote is not known, so the checker is
		// told what it may assume, no more.
		return linearize.ResultUnknown
	case errors.As(err, &stale) && !errors.Is(err, locking.ErrRetriesExhausted):
		return linearize.ResultStale
	case errors.Is(err, locking.ErrNotFound):
		return linearize.ResultNotFound
	case errors.Is(err, locking.ErrAlreadyExists):
		return linearize.ResultExists
	}
	return linearize.ResultNotApplied
}

// blindIncrement is the negative control's increment: read, add one, write
// back by key alone, without the version guard.
func blindIncrement(ctx context.Context, db *gorm.DB, accounts *repository.Repository[fixtures.Account], k int64) (*fixtures.Account, error) {
	a, err := accounts.Get(ctx, k)
	if err != nil {
		return nil, err
	}
	a.Balance++
	a.Version = max(a.Version+1, time.Now().UnixMicro())
	res := db.WithContext(ctx).Exec("UPDATE accounts SET balance = ?, version = ? WHERE id = ?", a.Balance, a.Version, k)
	if res.Error != nil {
		return nil, res.Error
	}
	if res.RowsAffected == 0 {
		return nil, &locking.NotFoundError{Table: "accounts", ID: k}
	}
	return a, nil
}
