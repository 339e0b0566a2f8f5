package reliability_test

// Helpers of the hostile-input tests (hostile_test.go): a seeded database
// with a checksum of its whole content, a panic trap, the expectations a
// hostile call is held to, and a raw HTTP client. Every top-level name here
// starts with "hostile": the package is shared with the other parts of the
// reliability suite.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// hostileFixture is one seeded database: a few rows in every example
// table, two held leases, one released lease and two operation records.
type hostileFixture struct {
	dialect string
	db      *gorm.DB
	accts   *repository.Repository[fixtures.Account]  // WithLeaseTTL(1 min, 1 h)
	docs    *repository.Repository[fixtures.Document] // WithLeaseTTL(1 min, 1 h)
	jobs    *repository.Repository[fixtures.Job]
	plain   *repository.Repository[fixtures.Document] // no leases

	a1, a2, a3 fixtures.Account  // a1 is leased by "owner-a"
	d1, d2, d3 fixtures.Document // d1 is leased by "owner-d"; d2's lease was released
	j1, j2     fixtures.Job

	leaseA1, leaseD1 repository.Lease // held for an hour
	releasedD2       repository.Lease // unlocked: no longer held
}

const (
	hostileSeedUpdateKey = "seed-update-a2"   // the operation key a2's seed update was made with
	hostileSeedCreateKey = "seed-create-d3"   // the operation key d3 was created with
	hostileLeaseTTL      = time.Hour          // the seeded leases outlast every test
	hostileCallTimeout   = 15 * time.Second   // one hostile call; a hang fails instead of blocking
	hostileMB            = 1 << 20            // "1 MB"
	hostileOwnerD        = "owner-d"          // holder of d1's lease
	hostileOwnerA        = "owner-a"          // holder of a1's lease
	hostileRandSeed      = 0x9e3779b97f4a7c15 // fixed: the "random" strings are the same on every run
)

// hostileSeed seeds db (fresh and migrated) and returns the fixture.
func hostileSeed(t *testing.T, db *gorm.DB) *hostileFixture {
	t.Helper()
	ctx := testdb.Ctx(t)
	f := &hostileFixture{dialect: hostileDialect(db), db: db}
	var err error
	f.accts, err = repository.New[fixtures.Account](db, repository.WithLeaseTTL(time.Minute, hostileLeaseTTL))
	require.NoError(t, err)
	f.docs, err = repository.New[fixtures.Document](db, repository.WithLeaseTTL(time.Minute, hostileLeaseTTL))
	require.NoError(t, err)
	f.jobs, err = repository.New[fixtures.Job](db)
	require.NoError(t, err)
	f.plain, err = repository.New[fixtures.Document](db)
	require.NoError(t, err)

	docs := []*fixtures.Document{
		{ID: "d1", Title: "one", Attrs: fixtures.Attributes{"k": "v"}},
		{ID: "d2", Title: "two", Attrs: fixtures.Attributes{}},
		{ID: "d3", Title: "three", Attrs: fixtures.Attributes{"x": "y"}},
	}
	require.NoError(t, f.docs.Create(ctx, docs[0]))
	require.NoError(t, f.docs.Create(ctx, docs[1]))
	require.NoError(t, f.docs.Create(ctx, docs[2], repository.OpKey(hostileSeedCreateKey)))
	accts := []*fixtures.Account{
		{Owner: "ann", Balance: 100},
		{Owner: "bob", Balance: 50},
		{Owner: "o'hara \"q\" `b`", Balance: 7},
	}
	for _, a := range accts {
		require.NoError(t, f.accts.Create(ctx, a))
	}
	accts[1].Balance++
	require.NoError(t, f.accts.Update(ctx, accts[1], repository.OpKey(hostileSeedUpdateKey)))
	for i := range 2 {
		require.NoError(t, f.jobs.Create(ctx, &fixtures.Job{Queue: "q", Payload: fmt.Sprint("p", i), Status: fixtures.JobPending}))
	}

	_, l, err := f.docs.Leases().Acquire(ctx, "d1", hostileOwnerD, repository.TTL(hostileLeaseTTL))
	require.NoError(t, err)
	f.leaseD1 = *l
	_, l, err = f.accts.Leases().Acquire(ctx, accts[0].ID, hostileOwnerA, repository.TTL(hostileLeaseTTL))
	require.NoError(t, err)
	f.leaseA1 = *l
	_, l, err = f.docs.Leases().Acquire(ctx, "d2", "owner-gone")
	require.NoError(t, err)
	require.NoError(t, f.docs.Leases().Release(ctx, l))
	f.releasedD2 = *l

	f.reload(t)
	return f
}

// hostileDialect is db's dialect by testdb's name for it ("sqlite",
// "postgres", "mariadb"): GORM calls MariaDB's dialector "mysql".
func hostileDialect(db *gorm.DB) string {
	if name := db.Dialector.Name(); name != "mysql" {
		return name
	}
	return "mariadb"
}

// hostileFixtureFor opens a fresh database of dialect and seeds it.
func hostileFixtureFor(t *testing.T, dialect string) *hostileFixture {
	t.Helper()
	return hostileSeed(t, testdb.Open(t, dialect))
}

// reload reads the seeded records again, after a write that (wrongly or
// legally) changed them, so that later cases start from what is stored.
func (f *hostileFixture) reload(t *testing.T) {
	t.Helper()
	ctx := testdb.Ctx(t)
	var accts []fixtures.Account
	require.NoError(t, f.db.WithContext(ctx).Order("id").Find(&accts).Error)
	for i, dst := range []*fixtures.Account{&f.a1, &f.a2, &f.a3} {
		if i < len(accts) {
			*dst = accts[i]
		}
	}
	for id, d := range map[string]*fixtures.Document{"d1": &f.d1, "d2": &f.d2, "d3": &f.d3} {
		if got, err := f.docs.Get(ctx, id); err == nil {
			*d = *got
		}
	}
	var jobs []fixtures.Job
	require.NoError(t, f.db.WithContext(ctx).Order("id").Find(&jobs).Error)
	for i, dst := range []*fixtures.Job{&f.j1, &f.j2} {
		if i < len(jobs) {
			*dst = jobs[i]
		}
	}
}

// Fresh copies of the seeded records, so that a call that changes its
// entity in memory leaves the fixture alone.

func (f *hostileFixture) acct(a fixtures.Account) *fixtures.Account { return &a }

func (f *hostileFixture) doc(d fixtures.Document) *fixtures.Document {
	d.Attrs = maps.Clone(d.Attrs)
	return &d
}

func (f *hostileFixture) lease(l repository.Lease) *repository.Lease { return &l }

// hostileSnapshot is the content of every table of a database: per table,
// a digest of its rows (order-independent) and the rows themselves, each
// shortened, for a readable diff.
type hostileSnapshot map[string]hostileTable

type hostileTable struct {
	digest string
	rows   []string
}

// hostileSnap reads every row of every table of db (the example tables,
// gormlock_leases, gormlock_operations, goose's version table and SQLite's
// sqlite_sequence).
func hostileSnap(t testing.TB, db *gorm.DB) hostileSnapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sqlDB, err := db.DB()
	require.NoError(t, err)
	dialect := hostileDialect(db)
	list := `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`
	switch dialect {
	case "postgres":
		list = `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1`
	case "mariadb":
		list = `SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY 1`
	}
	tables, err := hostileStrings(ctx, sqlDB, list)
	require.NoError(t, err)
	require.NotEmpty(t, tables)
	rowsOf := map[string][]string{}
	if dialect == "postgres" {
		// One round trip: every row of every table as PostgreSQL's own text
		// of the whole row, which is exact for every column type.
		var q strings.Builder
		for i, table := range tables {
			if i > 0 {
				q.WriteString(" UNION ALL ")
			}
			fmt.Fprintf(&q, `SELECT '%s', r::text FROM "%s" AS r`, strings.ReplaceAll(table, "'", "''"), strings.ReplaceAll(table, `"`, `""`))
		}
		rows, err := sqlDB.QueryContext(ctx, q.String())
		require.NoError(t, err, "reading the tables")
		for rows.Next() {
			var table, row string
			require.NoError(t, rows.Scan(&table, &row))
			sum := sha256.Sum256([]byte(row))
			rowsOf[table] = append(rowsOf[table], fmt.Sprintf("%q #%s", hostileShort(row, 200), hex.EncodeToString(sum[:6])))
		}
		require.NoError(t, rows.Err())
		require.NoError(t, rows.Close())
	} else {
		// SQLite quotes names with "", MariaDB (without ANSI_QUOTES) with
		// backticks; MariaDB's text protocol gives every value as its
		// exact bytes.
		quote := func(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }
		if dialect == "mariadb" {
			quote = func(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }
		}
		for _, table := range tables {
			rowsOf[table] = hostileRows(t, ctx, sqlDB, table, quote(table))
		}
	}
	snap := hostileSnapshot{}
	for _, table := range tables {
		out := rowsOf[table]
		slices.Sort(out)
		h := sha256.New()
		for _, r := range out {
			h.Write([]byte(r))
			h.Write([]byte{0})
		}
		snap[table] = hostileTable{digest: hex.EncodeToString(h.Sum(nil)), rows: out}
	}
	return snap
}

// hostileRows reads every row of table, each as a short text and a digest
// of its exact values.
func hostileRows(t testing.TB, ctx context.Context, sqlDB *sql.DB, table, quoted string) []string {
	t.Helper()
	rows, err := sqlDB.QueryContext(ctx, "SELECT * FROM "+quoted)
	require.NoError(t, err, "reading table %s", table)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		sum := sha256.New()
		var shown strings.Builder
		for i, v := range vals {
			raw, short := hostileValue(v)
			fmt.Fprintf(sum, "%s=%d:", cols[i], len(raw))
			sum.Write(raw)
			fmt.Fprintf(&shown, "%s=%s|", cols[i], short)
		}
		out = append(out, hostileShort(shown.String(), 200)+" #"+hex.EncodeToString(sum.Sum(nil)[:6]))
	}
	require.NoError(t, rows.Err())
	return out
}

func hostileStrings(ctx context.Context, db *sql.DB, query string) ([]string, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// hostileValue returns a column value exactly, with its type, for the
// digest, and shortened for the messages (a 1 MB value is not quoted whole
// on every snapshot).
func hostileValue(v any) (raw []byte, short string) {
	switch x := v.(type) {
	case nil:
		return []byte("NULL"), "NULL"
	case []byte:
		return append([]byte("b:"), x...), fmt.Sprintf("b%q", hostileShort(string(x), 60))
	case string:
		return []byte("s:" + x), fmt.Sprintf("%q", hostileShort(x, 60))
	case time.Time:
		ts := x.UTC().Format(time.RFC3339Nano)
		return []byte("t:" + ts), ts
	}
	s := fmt.Sprintf("%T:%v", v, v)
	return []byte(s), s
}

// hostileShort shortens s for messages: a 1 MB value is shown by its start
// and its length.
func hostileShort(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:n], len(s))
}

// diff lists what changed from s to after, table by table; ignore names
// tables left out of the comparison. Empty means nothing changed.
func (s hostileSnapshot) diff(after hostileSnapshot, ignore ...string) []string {
	var out []string
	names := slices.Sorted(maps.Keys(s))
	for name := range after {
		if _, ok := s[name]; !ok {
			names = append(names, name)
		}
	}
	for _, name := range names {
		if slices.Contains(ignore, name) {
			continue
		}
		a, b := s[name], after[name]
		if a.digest == b.digest {
			continue
		}
		var lines []string
		for _, r := range a.rows {
			if !slices.Contains(b.rows, r) {
				lines = append(lines, "  - "+r)
			}
		}
		for _, r := range b.rows {
			if !slices.Contains(a.rows, r) {
				lines = append(lines, "  + "+r)
			}
		}
		out = append(out, fmt.Sprintf("table %s changed:\n%s", name, strings.Join(lines, "\n")))
	}
	return out
}

// hostileProtect runs fn and turns a panic into a value: no hostile input
// may crash the caller.
func hostileProtect(fn func() error) (panicked any, stack string, err error) {
	defer func() {
		if p := recover(); p != nil {
			panicked, stack = p, hostileFrames(string(debug.Stack()))
		}
	}()
	return nil, "", fn()
}

// hostileFrames keeps the frames of a stack where the panic was raised:
// those after the panic call, up to the test's own.
func hostileFrames(stack string) string {
	lines := strings.Split(stack, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "panic(") {
			lines = lines[i+2:]
			break
		}
	}
	var out []string
	for i := 0; i+1 < len(lines) && !strings.Contains(lines[i], "reliability_test."); i += 2 {
		out = append(out, lines[i], lines[i+1])
	}
	return strings.Join(out, "\n")
}

// hostileWant judges a call's error on a dialect; "" means as expected.
type hostileWant func(dialect string, err error) string

// hostileIs expects an error matching every target.
func hostileIs(targets ...error) hostileWant {
	return func(_ string, err error) string {
		if err == nil {
			return fmt.Sprintf("no error; want one matching %v", targets)
		}
		for _, target := range targets {
			if !errors.Is(err, target) {
				return fmt.Sprintf("error %q (%T) does not match %v", hostileShort(err.Error(), 400), err, target)
			}
		}
		return ""
	}
}

// hostileAnyOf expects an error matching at least one target.
func hostileAnyOf(targets ...error) hostileWant {
	return func(_ string, err error) string {
		for _, target := range targets {
			if errors.Is(err, target) {
				return ""
			}
		}
		if err == nil {
			return fmt.Sprintf("no error; want one matching one of %v", targets)
		}
		return fmt.Sprintf("error %q (%T) matches none of %v", hostileShort(err.Error(), 400), err, targets)
	}
}

var (
	hostileInvalid  = hostileIs(locking.ErrInvalidArgument)
	hostileNotFound = hostileIs(locking.ErrNotFound)
	hostileStale    = hostileIs(locking.ErrStaleData)
	hostileLocked   = hostileIs(locking.ErrLocked)
	hostileExpired  = hostileIs(locking.ErrLeaseExpired)
	hostileExists   = hostileIs(locking.ErrAlreadyExists)
	hostileNotSupp  = hostileIs(locking.ErrNotSupported)
	hostileCanceled = hostileIs(context.Canceled)
)

// hostileFails expects any error: the call must refuse, and the docs do not
// say with which error.
func hostileFails(_ string, err error) string {
	if err == nil {
		return "no error; want the call refused"
	}
	return ""
}

// hostileOK expects no error: the input is legal (the call checks its own
// result and returns an error when it is wrong).
func hostileOK(_ string, err error) string {
	if err != nil {
		return fmt.Sprintf("unexpected error %q (%T)", hostileShort(err.Error(), 400), err)
	}
	return ""
}

// hostilePer expects one thing on each database, where they legitimately
// differ: PostgreSQL refuses NUL bytes and invalid UTF-8 in text; SQLite
// has no row locks to skip or share; MariaDB's keys, lease owners and
// operation keys are VARBINARY (any bytes, up to a length), its other text
// columns utf8mb4 (NUL taken, invalid UTF-8 refused with 1366) with a
// length limit (1406), as the MySQL migrations say.
func hostilePer(sqlite, postgres, mariadb hostileWant) hostileWant {
	return func(d string, err error) string {
		switch d {
		case "postgres":
			return postgres(d, err)
		case "mariadb":
			return mariadb(d, err)
		}
		return sqlite(d, err)
	}
}

// hostileCheck is the error a call returns when the call itself succeeded
// but its result is wrong.
func hostileCheck(format string, args ...any) error {
	return fmt.Errorf("result check failed: "+format, args...)
}

// hostileCancelled is a context that ended before the call.
func hostileCancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// hostileRandText is n bytes of letters and digits from a fixed seed: text
// that neither compresses (PostgreSQL's TOAST) nor repeats between runs.
func hostileRandText(n int, seed uint64) string {
	key := [2]uint64{uint64(n), seed}
	if s, ok := hostileTexts.Load(key); ok {
		return s.(string)
	}
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	r := mrand.New(mrand.NewPCG(hostileRandSeed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.Uint64()%uint64(len(alphabet))]
	}
	hostileTexts.Store(key, string(b))
	return string(b)
}

// hostileTexts keeps the texts hostileRandText made: the tables are built
// more than once, and a megabyte of random text is slow to make under -race.
var hostileTexts sync.Map

// hostileInTx runs fn in a transaction of f's database and returns its
// error: the locked reads need one.
func hostileInTx(ctx context.Context, f *hostileFixture, fn func(ctx context.Context) error, opts ...*sql.TxOptions) error {
	return repository.RunInTx(ctx, f.db, fn, opts...)
}

// hostileRaw sends one HTTP/1.1 request, written byte for byte as given
// (so that paths, header values and bodies reach the server unchanged), to
// addr and returns the response and its body. An error means the server
// closed the connection without answering.
func hostileRaw(addr, method, target string, header [][2]string, body []byte) (*http.Response, []byte, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: hostile.test\r\nConnection: close\r\n", method, target)
	for _, h := range header {
		fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
	}
	if body != nil {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	b.Write(body)
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = conn.Write(b.Bytes()) }) // the server may answer before reading it all
	defer wg.Wait()
	defer conn.Close()
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the body: %w", err)
	}
	return resp, data, nil
}
