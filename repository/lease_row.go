package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"weak"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/internal/store"
	"github.com/gormlock/gormlock/locking"
)

// Leases in the record's own row (WithLeasesInRow).
//
// The lease lives in five columns of the record's table (see
// migrations.AddLeaseColumns) instead of a row of LeaseTable: taking it is
// one conditional UPDATE of the record's row (free, or expired, by the
// database's clock), which returns the record on PostgreSQL; on SQLite and
// MySQL a SELECT by the lease's token reads it back after the UPDATE. The
// holder's write is one UPDATE that checks the token and fence, writes the
// record and ends the lease. The guarded writes of the repository check the lease columns of
// the row they write, with no sub-select. Fences, tokens (stored as their
// SHA-256), owner release and expiry by the database's clock behave as with
// the lease table: the fence counts the grants on SQLite and MySQL, and on
// PostgreSQL, whose grants need not be durable, it is the database clock in
// microseconds or the previous fence + 1 when larger, so that a grant lost
// in a crash never has its fence handed out again. A record deleted and
// created again starts its count over, as its lease row does after
// Leases.Sweep.
//
// Taking or ending a lease writes the record's row but never its version:
// the version trigger (migrations.CreateVersionTrigger) would give such a
// write a new version, so a table with the trigger keeps its leases in
// LeaseTable.

// rowLeaseSQL holds the statements of leases kept in the record's row.
type rowLeaseSQL struct {
	// acquire takes the lease when the record exists (and is live) and
	// no unexpired lease is held. On PostgreSQL it returns (UPDATE ...
	// RETURNING) the key as text, the fence, the grant and expiry times,
	// TRUE, then the record's readCols (only the lease columns when the
	// model has no own SELECT); on SQLite and MySQL it returns nothing
	// and acquireBack reads the same by the lease's token.
	acquire, acquireAsync store.Stmt
	acquireBack           string
	// write is Leases.Update: the record's writable columns and a new
	// version when the version matches and the caller's lease is held,
	// ending the lease, in one UPDATE. PostgreSQL returns the new version
	// (RETURNING), MySQL sets it as LAST_INSERT_ID; on SQLite it is
	// computed in Go, and the rows affected tell.
	write store.Stmt
	// release and renew end or extend the caller's lease; renew returns
	// the new expiry (MySQL: LAST_INSERT_ID).
	release, renew store.Stmt
	// state reads the unexpired lease: owner, fence, acquired, expires.
	state string
	// held tells whether the caller's lease is still held.
	held string
	// releaseOwner ends every unexpired lease of an owner in the table.
	releaseOwner store.Stmt
	// returnsRecord says acquire returns the record's readCols.
	returnsRecord bool
}

// rowLeaseTables lists, per database, the tables whose leases live in the
// records' rows, for ReleaseOwnerLeases. An entry goes away when its
// *sql.DB is garbage collected.
var rowLeaseTables sync.Map // weak.Pointer[sql.DB] -> *rowLeaseSet

// rowLeaseSetOf returns sqlDB's entry, creating it when create is set (nil
// otherwise).
func rowLeaseSetOf(sqlDB *sql.DB, create bool) *rowLeaseSet {
	key := weak.Make(sqlDB)
	if v, ok := rowLeaseTables.Load(key); ok || !create {
		if !ok {
			return nil
		}
		return v.(*rowLeaseSet)
	}
	v, loaded := rowLeaseTables.LoadOrStore(key, &rowLeaseSet{tables: map[string]store.Stmt{}})
	if !loaded {
		runtime.AddCleanup(sqlDB, func(k weak.Pointer[sql.DB]) { rowLeaseTables.Delete(k) }, key)
	}
	return v.(*rowLeaseSet)
}

type rowLeaseSet struct {
	mu     sync.Mutex
	tables map[string]store.Stmt // table -> its releaseOwner
	// leaseTable says a repository on the database uses LeaseTable.
	leaseTable bool
}

// registerRowLeases records that table keeps its leases in its rows on
// sqlDB.
func registerRowLeases(sqlDB *sql.DB, table string, releaseOwner store.Stmt) {
	s := rowLeaseSetOf(sqlDB, true)
	s.mu.Lock()
	s.tables[table] = releaseOwner
	s.mu.Unlock()
}

// rowLeaseReleases returns the releaseOwner statements of sqlDB's tables
// with leases in their rows.
func rowLeaseReleases(sqlDB *sql.DB) []store.Stmt {
	s := rowLeaseSetOf(sqlDB, false)
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]store.Stmt, 0, len(s.tables))
	for _, st := range s.tables {
		out = append(out, st)
	}
	return out
}

// buildRowLeaseSQL writes leaseSQL for leases in the rows of m's table:
// the guard every guarded write adds, and the row statements.
func buildRowLeaseSQL(db *gorm.DB, m *meta) *leaseSQL {
	caps := m.caps
	now := caps.NowMillis
	quote := func(name string) string {
		var b strings.Builder
		db.Dialector.QuoteTo(&b, name)
		return b.String()
	}
	table := quote(m.table)
	col := func(name string) string { return table + "." + quote(name) }
	owner, token, fence := col(dialect.LeaseOwnerCol), col(dialect.LeaseTokenCol), col(dialect.LeaseFenceCol)
	acquired, expires := col(dialect.LeaseAcquiredCol), col(dialect.LeaseExpiresCol)
	// SET names the table's own columns; MySQL accepts them qualified,
	// SQLite and PostgreSQL do not.
	set := func(name string) string {
		if caps.Dialector() == dialect.MySQL {
			return col(name)
		}
		return quote(name)
	}
	cols := make([]string, len(m.pks))
	conds := make([]string, len(m.pks))
	for i, f := range m.pks {
		cols[i] = col(f.DBName)
		conds[i] = cols[i] + " = ?"
	}
	var key string
	if m.composite() {
		key = strings.Replace(caps.CompositeKeyText, "?", strings.Join(cols, ", "), 1)
	} else {
		key = strings.Replace(caps.KeyText, "?", cols[0], 1)
	}
	match := strings.Join(conds, " AND ")
	live := ""
	if m.deletedAt != nil {
		live = " AND " + col(m.deletedAt.DBName) + " IS NULL"
	}
	w := func(s string) store.Stmt { return boundStmt(db, caps, strings.ReplaceAll(s, "NOW", now)) }
	q := func(s string) string { return rebind(db, strings.ReplaceAll(s, "NOW", now)) }
	free := `(` + token + ` IS NULL OR ` + expires + ` <= NOW)`
	// The caller's lease: its token and fence, unexpired, on the record
	// its Key names.
	mine := key + ` = ? AND ` + token + ` = ? AND ` + fence + ` = ? AND ` + expires + ` > NOW`
	r := &rowLeaseSQL{returnsRecord: m.ownSelect()}
	ret := `RETURNING ` + key + `, ` + fence + `, ` + acquired + `, ` + expires + `, TRUE`
	if r.returnsRecord {
		for _, f := range m.readCols {
			ret += ", " + col(f.DBName)
		}
	}
	switch caps.Dialector() {
	case dialect.Postgres:
		// The clock read once, in microseconds; the grant commits without
		// waiting for the disk outside a transaction (see pgGrant: the
		// holder's write checks the lease in its own durable transaction).
		grant := func(extra string) store.Stmt {
			return numbered(db, caps.SelfLockTimeout, `UPDATE `+table+` SET `+quote(dialect.LeaseOwnerCol)+` = ?, `+quote(dialect.LeaseTokenCol)+` = ?,
  `+quote(dialect.LeaseFenceCol)+` = GREATEST(`+fence+` + 1, c.now_us), `+quote(dialect.LeaseAcquiredCol)+` = c.now_us / 1000, `+quote(dialect.LeaseExpiresCol)+` = c.now_us / 1000 + ?
FROM (SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT AS now_us`+extra+`) AS c
WHERE `+match+live+` AND (`+token+` IS NULL OR `+expires+` <= c.now_us / 1000){bound}
`+ret)
		}
		r.acquire, r.acquireAsync = grant(""), grant(pgAsync)
	case dialect.SQLite:
		// SQLite reads the clock once per statement. The grant is the
		// UPDATE alone, and acquireBack reads it by its token after the
		// write lock is passed on, as on MySQL: gormlock's writes on
		// SQLite run one at a time (package sqlitegate), and the reads
		// beside them, so the grant's turn is kept short. With RETURNING
		// the turn also prepared the RETURNING clause (3x the UPDATE's
		// cost to prepare) and read the record, and the lease-row bench
		// ran at about two thirds of its speed now (bench/README.md,
		// leases).
		r.acquire = w(`UPDATE ` + table + ` SET ` + quote(dialect.LeaseOwnerCol) + ` = ?, ` + quote(dialect.LeaseTokenCol) + ` = ?,
  ` + quote(dialect.LeaseFenceCol) + ` = ` + fence + ` + 1, ` + quote(dialect.LeaseAcquiredCol) + ` = NOW, ` + quote(dialect.LeaseExpiresCol) + ` = NOW + ?
WHERE ` + match + live + ` AND ` + free + `{bound}`)
		r.acquireAsync = r.acquire
		r.acquireBack = q(`SELECT ` + strings.TrimPrefix(ret, "RETURNING ") + ` FROM ` + table + ` WHERE ` + match + ` AND ` + token + ` = ?`)
	default:
		// MySQL and MariaDB have no UPDATE ... RETURNING: the UPDATE
		// alone decides, and acquireBack reads what it wrote by the
		// token (128 random bits: the row holds it only if this call
		// wrote it). The clock is read once into a session variable, in
		// the first assignment; SET assigns left to right.
		r.acquire = w(`UPDATE ` + table + ` SET ` + set(dialect.LeaseAcquiredCol) + ` = (@gormlock_now := NOW), ` + set(dialect.LeaseOwnerCol) + ` = ?, ` + set(dialect.LeaseTokenCol) + ` = ?,
  ` + set(dialect.LeaseFenceCol) + ` = ` + fence + ` + 1, ` + set(dialect.LeaseExpiresCol) + ` = @gormlock_now + ?
WHERE ` + match + live + ` AND ` + free + `{bound}`)
		r.acquireAsync = r.acquire
		sel := `SELECT ` + strings.TrimPrefix(ret, "RETURNING ")
		r.acquireBack = q(sel + ` FROM ` + table + ` WHERE ` + match + ` AND ` + token + ` = ?`)
	}

	// Leases.Update: Update's SET, the version guard and the caller's
	// lease, and the end of the lease, in one UPDATE.
	var sets strings.Builder
	for _, f := range m.setCols {
		sets.WriteString(set(f.DBName) + " = ?, ")
	}
	version := set(m.version.DBName)
	if caps.NextVersion != "" {
		sets.WriteString(version + " = " + caps.NextVersion)
	} else {
		sets.WriteString(version + " = ?") // computed in Go (SQLite)
	}
	if m.updatedAt != nil {
		sets.WriteString(", " + set(m.updatedAt.DBName) + " = ?")
	}
	sets.WriteString(", " + set(dialect.LeaseTokenCol) + " = NULL, " + set(dialect.LeaseExpiresCol) + " = NOW")
	back := ""
	if caps.VersionBack == dialect.Returning {
		back = " RETURNING " + col(m.version.DBName)
	}
	r.write = w(`UPDATE ` + table + ` SET ` + sets.String() + ` WHERE ` + match + ` AND COALESCE(` + col(m.version.DBName) + `, 0) = ?` + live + ` AND ` + mine + `{bound}` + back)

	r.release = w(`UPDATE ` + table + ` SET ` + set(dialect.LeaseTokenCol) + ` = NULL, ` + set(dialect.LeaseExpiresCol) + ` = NOW WHERE ` + match + ` AND ` + mine + `{bound}`)
	if caps.VersionBack == dialect.LastInsertID {
		r.renew = w(`UPDATE ` + table + ` SET ` + set(dialect.LeaseExpiresCol) + ` = LAST_INSERT_ID(NOW + ?) WHERE ` + match + ` AND ` + mine + `{bound}`)
	} else {
		r.renew = w(`UPDATE ` + table + ` SET ` + set(dialect.LeaseExpiresCol) + ` = NOW + ? WHERE ` + match + ` AND ` + mine + `{bound} RETURNING ` + expires)
	}
	r.state = q(`SELECT ` + owner + `, ` + fence + `, ` + acquired + `, ` + expires + ` FROM ` + table + ` WHERE ` + match + ` AND ` + token + ` IS NOT NULL AND ` + expires + ` > NOW`)
	r.held = q(`SELECT 1 FROM ` + table + ` WHERE ` + match + ` AND ` + mine)
	r.releaseOwner = w(`UPDATE ` + table + ` SET ` + set(dialect.LeaseTokenCol) + ` = NULL, ` + set(dialect.LeaseExpiresCol) + ` = NOW WHERE ` + owner + ` = ? AND ` + token + ` IS NOT NULL AND ` + expires + ` > NOW{bound}`)
	if sqlDB, err := db.DB(); err == nil {
		registerRowLeases(sqlDB, m.table, r.releaseOwner)
	}
	return &leaseSQL{
		row:   r,
		guard: strings.ReplaceAll(free, "NOW", now),
	}
}

// acquireRow is Leases.Acquire with the lease in the record's row.
func (r *Repository[T]) acquireRow(ctx context.Context, id any, lease *Lease, ttl int64) (*T, *Lease, error) {
	rl := r.m.leases.row
	hash := hashToken(lease.Token)
	args := append([]any{lease.Owner, hash, ttl}, r.m.keyArgs(nil, id)...)
	var e T
	rv := reflect.ValueOf(&e).Elem()
	var acquired, expires int64
	var found sql.NullBool
	head := []any{&lease.Key, &lease.Fence, &acquired, &expires, &found}
	st := rl.acquireAsync
	if _, inTx := r.st.Pool(ctx); inTx {
		st = rl.acquire // never the caller's commit: it may write more than the grant
	}
	var err error
	if rl.acquireBack == "" {
		err = r.st.Exec(ctx, st, args, func(ctx context.Context, pool gorm.ConnPool, query string, args []any) error {
			rows, err := r.st.QuerySQL(ctx, pool, query, args)
			if err != nil {
				return err
			}
			return r.scanRowLease(ctx, rows, rv, head)
		})
	} else {
		var n int64
		if n, err = r.st.ExecResult(ctx, st, args); err == nil && n == 0 {
			err = sql.ErrNoRows
		}
		var rctx context.Context
		if err == nil {
			rctx, err = r.st.Detach(ctx) // one row by its key
		}
		if err == nil {
			db, _ := r.st.Conn(ctx)
			var rows *sql.Rows
			rows, err = r.st.QuerySQL(rctx, db.Statement.ConnPool, rl.acquireBack, append(r.m.keyArgs(nil, id), hash))
			if err == nil {
				err = r.scanRowLease(rctx, rows, rv, head)
			}
		}
	}
	switch {
	case store.IsNoRows(err):
		return nil, nil, r.acquireRefused(ctx, id)
	case err != nil:
		return nil, nil, fmt.Errorf("%s: Leases.Acquire id=%v: %w", r.m.table, id, locking.Classify(err))
	}
	if !rl.returnsRecord {
		// The record is read through GORM (AfterFind, read-only fields).
		db, _ := r.st.Conn(ctx)
		if err := store.Primary(db.WithContext(ctx)).Take(&e, r.m.keyCond(id)).Error; err != nil {
			err = fmt.Errorf("%s: Leases.Acquire id=%v: %w", r.m.table, id, r.translate(err, id))
			if rerr := r.release(context.WithoutCancel(ctx), lease, "release"); rerr != nil && !errors.Is(rerr, locking.ErrLeaseExpired) {
				err = errors.Join(err, rerr)
			}
			return nil, nil, err
		}
	}
	r.fillLease(ctx, lease, &e, acquired, expires)
	return &e, lease, nil
}

// scanRowLease scans the one row of rows (the lease's columns, then the
// record's readCols when acquire returns them) and closes rows;
// sql.ErrNoRows when there is none.
func (r *Repository[T]) scanRowLease(ctx context.Context, rows *sql.Rows, rv reflect.Value, head []any) (err error) {
	defer func() {
		if cerr := rows.Close(); cerr != nil && (err == nil || store.IsNoRows(err)) {
			err = cerr
		}
	}()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if !r.m.leases.row.returnsRecord {
		return rows.Scan(head...)
	}
	retry, err := r.scanLeaseRow(ctx, rows, rv, head, true)
	if err != nil && retry {
		_, err = r.scanLeaseRow(ctx, rows, rv, head, false)
	}
	if err != nil {
		return err
	}
	return rows.Err()
}

// updateRow is Leases.Update with the lease in the record's row, for a
// model without update hooks: one UPDATE.
func (r *Repository[T]) updateRow(ctx context.Context, e *T, l *Lease, id any, expected int64) error {
	rv, err := r.leaseWriteChecks(ctx, e, id, expected)
	if err != nil {
		return err
	}
	rl := r.m.leases.row
	hash := hashToken(l.Token)
	args := make([]any, 0, 2*len(r.m.pks)+len(r.m.setCols)+8)
	for _, f := range r.m.setCols {
		v, _ := f.ValueOf(ctx, rv)
		args = append(args, v)
	}
	var va *versionArg
	if r.m.caps.NextVersion != "" {
		args = append(args, expected+1) // the floor; the database reads its clock
	} else {
		va = &versionArg{prev: expected}
		args = append(args, va)
	}
	w := write{}
	if r.m.updatedAt != nil {
		w.updated = timeValue(r.m.updatedAt, r.now(ctx))
		args = append(args, w.updated)
	}
	args = append(r.m.keyArgs(args, id), expected, l.Key, hash, l.Fence)
	var n int64
	switch {
	case r.m.caps.VersionBack == dialect.LastInsertID:
		n, w.version, err = r.st.ExecResultID(ctx, rl.write, args)
	case r.m.caps.VersionBack == dialect.Returning:
		var v sql.NullInt64
		err = r.st.Exec(ctx, rl.write, args, r.st.QueryRowScan(&v))
		if store.IsNoRows(err) {
			err = nil
		}
		if v.Valid {
			n, w.version = 1, v.Int64
		}
	default: // SQLite: the version computed in Go as the statement was sent
		if n, err = r.st.ExecResult(ctx, rl.write, args); n > 0 && va != nil {
			w.version = va.v
		}
	}
	if err != nil {
		return fmt.Errorf("%s: Leases.Update id=%v: %w", r.m.table, id, err)
	}
	if n == 0 {
		return r.leaseWriteMissed(ctx, rl.held, l, id, hash, expected)
	}
	return r.written(ctx, rv, id, w)
}

// rowHeldArgs are the arguments of held, release and renew after their
// own: the record's key, the lease's Key, token hash and fence.
func (r *Repository[T]) rowHeldArgs(args []any, l *Lease, id any) []any {
	return append(r.m.keyArgs(args, id), l.Key, hashToken(l.Token), l.Fence)
}

// rowLeasesOnly reports whether every repository built on s's database in
// this process keeps its leases in the records' rows: then
// ReleaseOwnerLeases does not look for LeaseTable, which need not exist.
func rowLeasesOnly(s store.Store) bool {
	set := rowLeaseSetOf(s.SQLDB, false)
	if set == nil {
		return false
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	return !set.leaseTable
}

// registerTableLeases records that a repository on sqlDB keeps its leases
// in LeaseTable.
func registerTableLeases(sqlDB *sql.DB) {
	s := rowLeaseSetOf(sqlDB, true)
	s.mu.Lock()
	s.leaseTable = true
	s.mu.Unlock()
}

// verifyLeaseColumns adds to entity (T's table's problems, or nil) the
// lease columns the table lacks, for VerifySchema.
func (r *Repository[T]) verifyLeaseColumns(db *gorm.DB, entity *SchemaError) (*SchemaError, error) {
	cols, err := describe(db, r.m.table)
	if err != nil {
		return entity, locking.Classify(err)
	}
	var problems []string
	for _, c := range dialect.LeaseColumns(r.m.caps.Dialector()) {
		col, ok := cols[c[0]]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("column %s is missing (WithLeasesInRow: migrations.AddLeaseColumns adds it)", c[0]))
		case c[0] == dialect.LeaseTokenCol && col.notNull:
			problems = append(problems, fmt.Sprintf("column %s is NOT NULL; gormlock writes NULL into it", c[0]))
		}
	}
	if len(problems) == 0 {
		return entity, nil
	}
	if entity == nil {
		entity = &SchemaError{Table: r.m.table}
	}
	entity.Problems = append(entity.Problems, problems...)
	return entity, nil
}
