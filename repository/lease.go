package repository

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/locking"
)

// LeaseTable is the table leases live in, created by package migrations
// (its version 1). It is separate from the entity tables: taking or
// releasing a lease never changes the leased record.
const LeaseTable = "gormlock_leases"

// Lease time limits, as in Couchbase's get-and-lock: a lease lasts
// DefaultLeaseTTL unless the call asks for another time, and never longer
// than MaxLeaseTTL. WithLeaseTTL changes both for one repository.
const (
	DefaultLeaseTTL = 15 * time.Second
	MaxLeaseTTL     = 30 * time.Second
)

type leaseLimits struct{ def, max time.Duration }

// WithLeases turns on leases (Leases.Acquire and the calls that take a *Lease)
// with the default limits: 15 s unless a call says otherwise, 30 s at most.
//
// With leases on, every guarded write of the repository (Update, Delete,
// ForceIncrement, UpdateMany, and so Mutate and MutateRowLocked) also requires
// that no one holds an unexpired lease on the record, and fails with an error
// matching locking.ErrLocked otherwise; the lease holder writes with
// Update or Leases.Delete. Build every repository of a table with
// the same setting: one built without leases does not see them.
func WithLeases() Option { return WithLeaseTTL(DefaultLeaseTTL, MaxLeaseTTL) }

// WithLeaseTTL is WithLeases with other limits: def is the lease time when a
// call gives none, max the longest a call may ask for. Both must be positive
// and def at most max, or New fails with an error matching
// locking.ErrInvalidArgument.
func WithLeaseTTL(def, max time.Duration) Option {
	return func(o *options) error {
		if def <= 0 || max <= 0 || def > max {
			return locking.Invalid("WithLeaseTTL: need 0 < default (%v) <= max (%v)", def, max)
		}
		o.leases = &leaseLimits{def: def, max: max}
		return nil
	}
}

// Lease is a time-limited exclusive right to change one record, returned by
// Leases.Acquire. Keep it secret: whoever presents its Token can write the
// record or unlock it.
type Lease struct {
	Table string // the record's table
	ID    any    // the record's primary key
	Owner string // who holds it, as given to Leases.Acquire
	// Token is 128 bits from crypto/rand, in hex. The database stores only
	// its SHA-256.
	Token string
	// Fence counts the acquisitions of this record's lease: every new
	// lease on the record has a larger one. Pass it to other systems the
	// holder writes to, so they can refuse a holder that has been
	// superseded.
	Fence int64
	// Key is the record's key as the database writes it as text; with
	// Table it names the lease. It must name the same record as ID: a
	// lease whose Key and ID disagree is refused like a wrong token.
	Key string
	// Version is the record's version when the lease was taken.
	Version    int64
	AcquiredAt time.Time // by the database's clock
	ExpiresAt  time.Time // by the database's clock; Leases.Renew moves it
}

// LeaseState describes the active lease on a record, for readers: who
// holds it and until when. It never carries the token.
type LeaseState struct {
	Owner      string
	Fence      int64
	AcquiredAt time.Time
	ExpiresAt  time.Time
}

// LeaseOption adjusts one Leases.Acquire or Leases.Renew call: TTL.
type LeaseOption func(*leaseCall) error

type leaseCall struct{ ttl time.Duration }

// TTL sets how long the lease lasts, from now by the database's clock, in
// whole milliseconds rounded up. It must be positive and at most the
// repository's maximum (MaxLeaseTTL unless WithLeaseTTL changed it); anything
// else is an error matching locking.ErrInvalidArgument, never silently
// changed.
func TTL(d time.Duration) LeaseOption {
	return func(c *leaseCall) error {
		if d <= 0 {
			return locking.Invalid("lease TTL must be positive, got %v", d)
		}
		c.ttl = d
		return nil
	}
}

// Leases are a repository's time-limited locks on its records (Couchbase's
// get-and-lock, MongoDB's lock collection): Acquire reads a record and
// leases it to an owner for a TTL with a secret token; the holder writes it
// with Update or Delete, or gives it up with Release; Renew is the
// heartbeat of a holder that needs longer. Expiry is by the database's
// clock. While a record is leased, every other guarded write of it (Update,
// Mutate, ...) fails with an error matching locking.ErrLeased; reads never
// wait. A lease is not a row lock: it outlives transactions and
// connections, and holds across processes until it ends or expires.
//
// Get a repository's Leases with Repository.Leases; the repository must be
// built WithLeases (or WithLeaseTTL), or every call fails with an error
// matching locking.ErrInvalidArgument.
type Leases[T any] struct{ r *Repository[T] }

// Leases returns the repository's lease operations.
func (r *Repository[T]) Leases() *Leases[T] { return &Leases[T]{r: r} }

// leaseSQL holds the lease statements of one repository's table.
type leaseSQL struct {
	acquire, release, renew, sweep stmt
	state                          string
	// acquireBack reads the lease acquire wrote, by its token, where
	// acquire cannot return it (MySQL); "" otherwise.
	acquireBack string
	// guard is the condition every guarded write adds: no unexpired
	// lease on the row being written.
	guard string
	// pg holds the one-statement forms of Leases.Acquire and Leases.Update
	// (PostgreSQL, for a model Get reads with its own SELECT); nil
	// elsewhere.
	pg *pgLeaseSQL
}

// buildLeaseSQL writes the lease statements for the table of m. Lease rows
// are keyed by the database's own text of the record's key, CAST(pk AS
// TEXT) (for a composite key, a JSON array of its columns), read from the
// record itself: two spellings of one key (a UUID in upper case, a
// case-insensitive collation) are one lease. A soft-deleted record cannot
// be leased.
func buildLeaseSQL(db *gorm.DB, m *meta) *leaseSQL {
	now := m.caps.NowMillis
	quote := func(name string) string {
		var b strings.Builder
		db.Dialector.QuoteTo(&b, name)
		return b.String()
	}
	table := quote(m.table)
	// The record's key as the database writes it as text, and the
	// condition "the record is id", table-qualified, one ? per column.
	var key, match string
	cols := make([]string, len(m.pks))
	conds := make([]string, len(m.pks))
	for i, f := range m.pks {
		cols[i] = table + "." + quote(f.DBName)
		conds[i] = cols[i] + " = ?"
	}
	if m.composite() {
		key = strings.Replace(m.caps.CompositeKeyText, "?", strings.Join(cols, ", "), 1)
	} else {
		key = strings.Replace(m.caps.KeyText, "?", cols[0], 1)
	}
	match = strings.Join(conds, " AND ")
	live := ""
	if m.deletedAt != nil {
		live = " AND " + table + "." + quote(m.deletedAt.DBName) + " IS NULL"
	}
	q := func(s string) string { return rebind(db, strings.ReplaceAll(s, "NOW", now)) }
	w := func(s string) stmt { return boundStmt(db, m.caps, strings.ReplaceAll(s, "NOW", now)) }
	// A lease is named by its Key and by its record's ID, and the two must
	// agree: a lease whose Key names another record than its ID (forged,
	// or mixed up) can neither end one record's lease nor write another.
	held := `resource = ? AND record_key = ? AND record_key = (SELECT ` + key + ` FROM ` + table + ` WHERE ` + match + `) AND token_hash = ? AND fence = ? AND expires_ms > NOW`
	// Take the lease of an existing record when its lease row is missing,
	// released or expired; the fence grows with every acquisition. The
	// clock is read once. No row back: the record is missing or someone
	// holds the lease.
	acquire := `INSERT INTO ` + LeaseTable + ` AS l (resource, record_key, owner, token_hash, fence, acquired_ms, expires_ms)
SELECT ?, ` + key + `, ?, ?, 1, c.now_ms, c.now_ms + ? FROM ` + table + `, (SELECT NOW AS now_ms) AS c WHERE ` + match + live + `{bound}
ON CONFLICT (resource, record_key) DO UPDATE SET owner = excluded.owner, token_hash = excluded.token_hash,
  fence = l.fence + 1, acquired_ms = excluded.acquired_ms, expires_ms = excluded.expires_ms
WHERE l.token_hash IS NULL OR l.expires_ms <= excluded.acquired_ms
RETURNING record_key, fence, acquired_ms, expires_ms`
	l := &leaseSQL{
		acquire: w(acquire),
		// A released lease keeps its row, and so its fence.
		release: w(`UPDATE ` + LeaseTable + ` SET token_hash = NULL, expires_ms = NOW WHERE ` + held + `{bound}`),
		renew:   w(`UPDATE ` + LeaseTable + ` SET expires_ms = NOW + ? WHERE ` + held + `{bound} RETURNING expires_ms`),
		state: q(`SELECT l.owner, l.fence, l.acquired_ms, l.expires_ms FROM ` + LeaseTable + ` AS l JOIN ` + table +
			` ON l.record_key = ` + key + ` WHERE l.resource = ? AND ` + match + ` AND l.token_hash IS NOT NULL AND l.expires_ms > NOW`),
		// Rows of records that no longer exist, and whose lease is over.
		// The rows of live records stay, so their fences keep growing.
		sweep: w(`DELETE FROM ` + LeaseTable + ` WHERE resource = ? AND (token_hash IS NULL OR expires_ms <= NOW)
AND NOT EXISTS (SELECT 1 FROM ` + table + ` WHERE ` + key + ` = ` + LeaseTable + `.record_key){bound}`),
		guard: `NOT EXISTS (SELECT 1 FROM ` + LeaseTable + ` AS l WHERE l.resource = ` + quoteString(m.table) +
			` AND l.record_key = ` + key + ` AND l.token_hash IS NOT NULL AND l.expires_ms > ` + now + `)`,
	}
	if m.caps.Name == dialect.Postgres {
		l.pg = buildPGLeaseSQL(db, m, quote, table, key, match, live, strings.ReplaceAll(acquire, "NOW", now))
	}
	if m.caps.VersionBack == dialect.LastInsertID {
		// MySQL: no ON CONFLICT ... WHERE and no UPDATE ... RETURNING.
		// ON DUPLICATE KEY UPDATE assigns left to right, each assignment
		// seeing the ones before: whether the lease is taken is decided
		// once, from the old row, into @gormlock_take. Its columns are
		// qualified: the record's table may have columns of the same names. Whether this call
		// got it is read back by its token (acquireBack): a token is
		// 128 random bits, so the row holds it only if this call wrote it.
		l.acquire = w(`INSERT INTO ` + LeaseTable + ` (resource, record_key, owner, token_hash, fence, acquired_ms, expires_ms)
SELECT ?, ` + key + `, ?, ?, 1, c.now_ms, c.now_ms + ? FROM ` + table + `, (SELECT NOW AS now_ms) AS c WHERE ` + match + live + `{bound}
ON DUPLICATE KEY UPDATE
  ` + LeaseTable + `.fence = IF(@gormlock_take := (` + LeaseTable + `.token_hash IS NULL OR ` + LeaseTable + `.expires_ms <= VALUES(acquired_ms)), ` + LeaseTable + `.fence + 1, ` + LeaseTable + `.fence),
  ` + LeaseTable + `.owner = IF(@gormlock_take, VALUES(owner), ` + LeaseTable + `.owner),
  ` + LeaseTable + `.token_hash = IF(@gormlock_take, VALUES(token_hash), ` + LeaseTable + `.token_hash),
  ` + LeaseTable + `.acquired_ms = IF(@gormlock_take, VALUES(acquired_ms), ` + LeaseTable + `.acquired_ms),
  ` + LeaseTable + `.expires_ms = IF(@gormlock_take, VALUES(expires_ms), ` + LeaseTable + `.expires_ms)`)
		l.acquireBack = q(`SELECT record_key, fence, acquired_ms, expires_ms FROM ` + LeaseTable + ` WHERE resource = ? AND token_hash = ?`)
		// The new expiry comes back as the LAST_INSERT_ID it sets.
		l.renew = w(`UPDATE ` + LeaseTable + ` SET expires_ms = LAST_INSERT_ID(NOW + ?) WHERE ` + held + `{bound}`)
	}
	return l
}

// boundStmt turns s, a write with ? placeholders and a {bound} mark where
// the WHERE clause ends after its last placeholder, into a stmt: the text
// without the mark, and the bounded form with the dialect's SelfLockTimeout
// condition there (its parameter the last).
func boundStmt(db *gorm.DB, caps dialect.Caps, s string) stmt {
	st := stmt{text: rebind(db, strings.Replace(s, "{bound}", "", 1))}
	if caps.StatementTimeout != "" {
		st.bounded = st.text // bounded by a prefix, see stmt
	} else if caps.SelfLockTimeout != "" {
		st.bounded = rebind(db, strings.Replace(s, "{bound}", " AND "+caps.SelfLockTimeout, 1))
	}
	return st
}

// releaseOwnerSQL ends every unexpired lease of one owner.
const releaseOwnerSQL = `UPDATE ` + LeaseTable + ` SET token_hash = NULL, expires_ms = NOW WHERE owner = ? AND token_hash IS NOT NULL AND expires_ms > NOW{bound}`

// quoteString is an SQL string literal.
func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// rebind turns ? placeholders into the dialect's ($1, $2, ... on
// PostgreSQL). The statements it is used on have no ? in literals.
func rebind(db *gorm.DB, s string) string {
	if db.Dialector.Name() != dialect.Postgres {
		return s
	}
	var b strings.Builder
	n := 0
	for _, r := range s {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func millisTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// needLeases refuses a lease operation on a repository built without
// WithLeases.
func (r *Repository[T]) needLeases(op string) error {
	if r.leases == nil {
		return locking.Invalid("%s: %s: the repository was built without WithLeases", r.m.table, op)
	}
	return nil
}

// leaseTTL returns the TTL a call asks for, or the default, checked against
// the maximum.
func (r *Repository[T]) leaseTTL(op string, opts []LeaseOption) (time.Duration, error) {
	if err := r.needLeases(op); err != nil {
		return 0, err
	}
	c := leaseCall{ttl: r.leases.def}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&c); err != nil {
			return 0, fmt.Errorf("%s: %s: %w", r.m.table, op, err)
		}
	}
	if c.ttl > r.leases.max {
		return 0, locking.Invalid("%s: %s: lease TTL %v is over the maximum %v", r.m.table, op, c.ttl, r.leases.max)
	}
	return c.ttl, nil
}

// Acquire reads record id and leases it to owner for a limited time (the
// Couchbase get-and-lock): until the lease ends, nobody else can lease the
// record or write it through a repository built WithLeases, but everyone can
// still read it. The holder ends the lease by writing with it
// (Leases.Update, Leases.Delete) or with Leases.Release; a holder that does
// neither never blocks the record longer than the TTL (TTL option; the
// repository's default otherwise), judged by the database's clock.
//
// owner is the caller's opaque name for who holds the lease (a worker id, a
// user id, a random id kept in the web session) so that ReleaseOwnerLeases can drop
// all of its leases at once. Do not use a web session id itself: the lease
// table would then hold live session ids, and anyone who can read it could
// hijack those sessions (the OWASP warning of the MongoDB seed).
//
// When someone else holds an unexpired lease, the error matches
// locking.ErrLocked (a *locking.LeaseError saying who and until when). A
// missing record gives an error matching locking.ErrNotFound and takes no
// lease. The repository must be built WithLeases.
//
// The lease is granted at once (outside a transaction; inside RunInTx it
// becomes visible when that commits), and the record is then read after any
// write already holding its row has committed, so Lease.Version is current.
// A write whose statement began before the grant and had not yet reached the
// row can still commit just after it; the holder's Leases.Update then fails
// with locking.ErrStaleData — the version guard still loses nothing.
func (ls *Leases[T]) Acquire(ctx context.Context, id any, owner string, opts ...LeaseOption) (*T, *Lease, error) {
	r := ls.r
	id, err := r.m.normalizeID(id)
	if err != nil {
		return nil, nil, err
	}
	if owner == "" {
		return nil, nil, locking.Invalid("%s: Leases.Acquire id=%v: owner is empty", r.m.table, id)
	}
	ttl, err := r.leaseTTL("Leases.Acquire", opts)
	if err != nil {
		return nil, nil, err
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, nil, fmt.Errorf("%s: Leases.Acquire: token: %w", r.m.table, err)
	}
	lease := &Lease{Table: r.m.table, ID: id, Owner: owner, Token: hex.EncodeToString(raw[:])}
	var acquired, expires int64
	if r.m.leases.pg != nil {
		return r.getAndLockPG(ctx, id, lease, ttl)
	}
	err = r.acquire(ctx, r.m.keyArgs([]any{r.m.table, owner, hashToken(lease.Token), ceilMillis(ttl)}, id), hashToken(lease.Token),
		&lease.Key, &lease.Fence, &acquired, &expires)
	if isNoRows(err) {
		if _, found, deleted, verr := r.currentVersion(ctx, id); verr != nil {
			return nil, nil, verr
		} else if !found || deleted {
			return nil, nil, fmt.Errorf("%s: Leases.Acquire: %w", r.m.table, &locking.NotFoundError{Table: r.m.table, ID: id})
		}
		return nil, nil, r.leaseRefused(ctx, id, 0, "get-and-lock")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: Leases.Acquire id=%v: %w", r.m.table, id, err)
	}
	lease.AcquiredAt, lease.ExpiresAt = millisTime(acquired), millisTime(expires)

	// Read the record once no write holds its row: FOR SHARE waits for a
	// write in progress (PostgreSQL); SQLite's writes are already done.
	var e T
	db, _ := r.conn(ctx)
	shared := r.m.caps.How(dialect.SharedLock) == dialect.Native
	if r.m.selectSQL != "" {
		query := r.m.selectSQL
		if shared {
			query = r.m.lockedSelect(lockConfig{shared: true})
		}
		err = r.readRow(ctx, db.Statement.ConnPool, query, &e, id)
	} else {
		q := primary(db.WithContext(ctx))
		if shared {
			q = q.Clauses(clause.Locking{Strength: clause.LockingStrengthShare})
		}
		err = q.Take(&e, r.m.keyCond(id)).Error
	}
	if err != nil {
		err = fmt.Errorf("%s: Leases.Acquire id=%v: %w", r.m.table, id, r.translate(err, id))
		// Deleted meanwhile, or the read failed: give the lease back.
		if rerr := r.release(context.WithoutCancel(ctx), lease, "unlock"); rerr != nil && !errors.Is(rerr, locking.ErrLeaseExpired) {
			err = errors.Join(err, rerr)
		}
		return nil, nil, err
	}
	// The key as the record holds it (the database may spell it otherwise
	// than the caller did).
	lease.ID, _ = r.idOf(ctx, reflectElem(&e))
	lease.Version = r.versionOf(ctx, reflectElem(&e))
	return &e, lease, nil
}

// acquire runs the lease's acquire statement with args and scans the lease
// it took into dest (key, fence, acquired, expires); sql.ErrNoRows when it
// took none. Where acquire returns nothing (MySQL), the lease is read back
// by its token hash, in the same transaction. A deadlock or, on Galera, a
// certification conflict with another node's acquire (ErrDeadlock) is
// tried again, twice: the next try sees the winner's lease.
func (r *Repository[T]) acquire(ctx context.Context, args []any, hash string, dest ...any) error {
	if r.m.leases.acquireBack == "" {
		return r.exec(ctx, r.m.leases.acquire, args, r.queryRowScan(dest...))
	}
	var err error
	for try := 0; try < 3; try++ {
		write := func(ctx context.Context) error {
			if _, err := r.execResult(ctx, r.m.leases.acquire, args); err != nil {
				return err
			}
			db, _ := r.conn(ctx)
			err := r.scanSQL(ctx, db.Statement.ConnPool, r.m.leases.acquireBack, []any{r.m.table, hash}, dest...)
			if isNoRows(err) {
				return err
			}
			return locking.Classify(err)
		}
		if _, inTx := r.conn(ctx); inTx {
			return write(ctx)
		}
		err = r.runTx(ctx, r.db, nil, lockWait{}, r.m.table+": Leases.Acquire", write)
		if !errors.Is(err, locking.ErrDeadlock) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// Get is Repository.Get that also tells whether the record is leased: the
// state is nil when no unexpired lease is held. Reading never waits for a
// lease.
func (ls *Leases[T]) Get(ctx context.Context, id any) (*T, *LeaseState, error) {
	r := ls.r
	if err := r.needLeases("Leases.Get"); err != nil {
		return nil, nil, err
	}
	e, err := r.Get(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	id, _ = r.idOf(ctx, reflectElem(e))
	st, err := r.leaseState(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	return e, st, nil
}

// leaseState returns the unexpired lease on record id, or nil.
func (r *Repository[T]) leaseState(ctx context.Context, id any) (*LeaseState, error) {
	db, _ := r.conn(ctx)
	var st LeaseState
	var acquired, expires int64
	err := r.scanSQL(ctx, db.Statement.ConnPool, r.m.leases.state, r.m.keyArgs([]any{r.m.table}, id),
		&st.Owner, &st.Fence, &acquired, &expires)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("%s: id=%v: reading its lease: %w", r.m.table, id, locking.Classify(err))
	}
	st.AcquiredAt, st.ExpiresAt = millisTime(acquired), millisTime(expires)
	return &st, nil
}

// leaseRefused explains why a lease operation or a guarded write found no
// row: an unexpired lease someone holds (ErrLocked), or no lease held by the
// caller any more (ErrLeaseExpired). mine is the caller's fence (0 for a
// write without a lease).
func (r *Repository[T]) leaseRefused(ctx context.Context, id any, mine int64, op string) error {
	st, err := r.leaseState(ctx, id)
	if err != nil {
		return err
	}
	le := &locking.LeaseError{Kind: locking.ErrLeased, Table: r.m.table, ID: id, Op: op}
	switch {
	case st != nil:
		// Someone holds the record: another holder, or, when the fence is
		// the caller's own, a wrong token presented with it.
		le.Holder, le.Fence, le.Until = st.Owner, st.Fence, st.ExpiresAt
	case mine != 0:
		le.Kind = locking.ErrLeaseExpired
	}
	// Otherwise a lease refused the operation and has ended since: still
	// refused, and trying again may succeed.
	return le
}

// checkLease validates a lease presented for one of the repository's
// records and returns its key.
func (r *Repository[T]) checkLease(l *Lease, op string) (any, error) {
	if err := r.needLeases(op); err != nil {
		return nil, err
	}
	if l == nil {
		return nil, locking.Invalid("%s: %s: lease is nil", r.m.table, op)
	}
	if l.Table != r.m.table {
		return nil, locking.Invalid("%s: %s: the lease is for table %q", r.m.table, op, l.Table)
	}
	return r.m.normalizeID(l.ID)
}

// release ends lease l in the transaction of ctx, or by itself; the error
// explains a lease that is not held.
func (r *Repository[T]) release(ctx context.Context, l *Lease, op string) error {
	id, err := r.m.normalizeID(l.ID)
	if err != nil {
		return err
	}
	n, err := r.execResult(ctx, r.m.leases.release, append(r.m.keyArgs([]any{r.m.table, l.Key}, id), hashToken(l.Token), l.Fence))
	if err != nil {
		return fmt.Errorf("%s: %s id=%v: %w", r.m.table, op, l.ID, err)
	}
	if n != 1 {
		return r.leaseRefused(ctx, id, l.Fence, op)
	}
	return nil
}

// Release ends the lease without writing the record; the record can be
// leased again at once. A lease that is not the record's current one (a
// wrong or missing token) gives an error matching locking.ErrLocked while
// someone holds the record, and locking.ErrLeaseExpired when the lease ran
// out, was unlocked or was released with its owner.
func (ls *Leases[T]) Release(ctx context.Context, l *Lease) error {
	r := ls.r
	if _, err := r.checkLease(l, "Leases.Release"); err != nil {
		return err
	}
	return r.release(ctx, l, "unlock")
}

// Renew extends the lease to the TTL (or the default) from now, by the
// database's clock: the heartbeat of a holder that needs longer. It fails
// like Leases.Release when the lease is no longer held, and never revives an
// expired lease. On success l.ExpiresAt is the new expiry.
func (ls *Leases[T]) Renew(ctx context.Context, l *Lease, opts ...LeaseOption) error {
	r := ls.r
	id, err := r.checkLease(l, "Leases.Renew")
	if err != nil {
		return err
	}
	ttl, err := r.leaseTTL("Leases.Renew", opts)
	if err != nil {
		return err
	}
	var expires int64
	args := append(r.m.keyArgs([]any{ceilMillis(ttl), r.m.table, l.Key}, id), hashToken(l.Token), l.Fence)
	if r.m.caps.VersionBack == dialect.LastInsertID {
		var n int64
		if n, expires, err = r.execResultID(ctx, r.m.leases.renew, args); err == nil && n == 0 {
			err = sql.ErrNoRows
		}
	} else {
		err = r.exec(ctx, r.m.leases.renew, args, r.queryRowScan(&expires))
	}
	switch {
	case isNoRows(err):
		return r.leaseRefused(ctx, id, l.Fence, "renew")
	case err != nil:
		return fmt.Errorf("%s: Leases.Renew id=%v: %w", r.m.table, id, err)
	}
	l.ExpiresAt = millisTime(expires)
	return nil
}

// Leases.Update writes e with Update and ends the lease, in one
// transaction: both happen or neither. e must be the leased record. When the
// lease is no longer held the error is that of Leases.Release and nothing is
// written — a holder that paused past its lease can never overwrite the work
// of the holder that came after it. The version guard applies as in Update.
func (ls *Leases[T]) Update(ctx context.Context, e *T, l *Lease) error {
	r := ls.r
	return r.writeWithLease(ctx, e, l, "Leases.Update", func(ctx context.Context, e *T) error { return r.Update(ctx, e) })
}

// Delete deletes e with Delete and ends the lease, in one
// transaction, refusing like Leases.Update.
func (ls *Leases[T]) Delete(ctx context.Context, e *T, l *Lease) error {
	r := ls.r
	return r.writeWithLease(ctx, e, l, "Leases.Delete", func(ctx context.Context, e *T) error { return r.Delete(ctx, e) })
}

func (r *Repository[T]) writeWithLease(ctx context.Context, e *T, l *Lease, method string, write func(context.Context, *T) error) error {
	id, err := r.checkLease(l, method)
	if err != nil {
		return err
	}
	if e == nil {
		return locking.Invalid("%s: %s: entity is nil", r.m.table, method)
	}
	if eid, _ := r.idOf(ctx, reflectElem(e)); keyString(eid) != keyString(id) {
		return locking.Invalid("%s: %s: the lease is for id=%v, the entity is id=%v", r.m.table, method, id, eid)
	}
	// Refuse what the write would refuse before ending the lease.
	if _, _, err := r.guardOf(ctx, reflectElem(e), method); err != nil {
		return err
	}
	op := "update"
	if method == "Leases.Delete" {
		op = "delete"
	}
	_, inTx := r.conn(ctx)
	if op == "update" && !inTx && r.m.leases.pg != nil && !r.hooksFor(true).on {
		// One statement, committed by itself (see pgLeaseSQL). Inside a
		// transaction the savepoint below keeps a failed write from
		// aborting the caller's transaction.
		return r.updateWithLeasePG(ctx, e, l, id)
	}
	inTxOrOwn := func(fn func(context.Context) error) error {
		if inTx {
			return RunInTx(ctx, r.db, fn) // a savepoint of the caller's
		}
		return r.runTx(ctx, r.db, nil, lockWait{}, r.m.table+": "+method, fn)
	}
	return inTxOrOwn(func(ctx context.Context) error {
		if r.m.caps.Dialector() == dialect.MySQL {
			// Lock the record before the lease row, in the order
			// Leases.Acquire takes them (its INSERT ... SELECT reads the record
			// with a shared lock first): InnoDB would otherwise deadlock
			// the two.
			db, _ := r.conn(ctx)
			var one int
			if err := r.scanSQL(ctx, db.Statement.ConnPool, r.m.rowLockSQL, r.m.keyArgs(nil, id), &one); err != nil && !isNoRows(err) {
				return fmt.Errorf("%s: %s id=%v: %w", r.m.table, method, id, locking.Classify(err))
			}
		}
		if err := r.release(ctx, l, op); err != nil {
			return err
		}
		return write(ctx, e)
	})
}

// Sweep deletes the lease rows of records of this table that no longer
// exist and whose lease is over, and returns how many. The rows of existing
// records are kept, released or expired, so their fencing counters keep
// growing; expired leases need no cleaning, the next Leases.Acquire takes them
// over. Leases.Sweep compares every lease row of the table with the table's keys:
// run it now and then, not on every request.
func (ls *Leases[T]) Sweep(ctx context.Context) (int64, error) {
	r := ls.r
	if err := r.needLeases("Leases.Sweep"); err != nil {
		return 0, err
	}
	n, err := r.execResult(ctx, r.m.leases.sweep, []any{r.m.table})
	if err != nil {
		return 0, fmt.Errorf("%s: Leases.Sweep: %w", r.m.table, err)
	}
	return n, nil
}

// ReleaseOwnerLeases ends every unexpired lease owner holds, on every table of db
// (a session ended, a worker shut down), and returns how many it ended.
// Leases of other owners are untouched. Inside RunInTx it joins the
// transaction.
func ReleaseOwnerLeases(ctx context.Context, db *gorm.DB, owner string) (int64, error) {
	s, err := storeOf(db, "ReleaseOwnerLeases")
	if err != nil {
		return 0, err
	}
	if owner == "" {
		return 0, locking.Invalid("ReleaseOwnerLeases: owner is empty")
	}
	n, err := s.execResult(ctx, boundStmt(db, s.caps, strings.ReplaceAll(releaseOwnerSQL, "NOW", s.caps.NowMillis)), []any{owner})
	if err != nil {
		return 0, fmt.Errorf("ReleaseOwnerLeases: %w", err)
	}
	return n, nil
}
