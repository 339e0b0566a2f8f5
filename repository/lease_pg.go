package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/store"
	"github.com/gormlock/gormlock/locking"
)

// Leases in one statement each, on PostgreSQL.
//
// Leases.Acquire and Leases.Update each need two things done at once: the
// grant and the read of the record; the check of the lease, the write of
// the record and the end of the lease. PostgreSQL runs them as one statement
// with data-modifying CTEs, committed by itself outside a transaction: one
// round trip and no BEGIN or COMMIT. Both take the lease row first and the
// record's row after it, in that order, so they never deadlock each other
// (nor with Leases.Renew and Leases.Release, which take the lease row only, and the
// guarded writes, which take the record's row only).

// pgLeaseSQL holds the one-statement forms (PostgreSQL only).
type pgLeaseSQL struct {
	// grantRead takes the lease (pgGrant) and, when it did, reads the
	// record with a shared row lock, after the grant: the lease columns,
	// then TRUE (NULL when the record is gone meanwhile), then readCols.
	// No row: no lease was taken. grantReadAsync is the same statement
	// committing without waiting for the disk (see pgGrant), for a grant
	// outside the caller's transaction.
	grantRead, grantReadAsync store.Stmt
	// writeRelease writes the record guarded by its version (Update's
	// statement without the lease guard) when the lease is held, checked
	// by its token with its row locked, and ends the lease when the write
	// matched. It returns one row: the record's new version (NULL: not
	// written) and whether the lease was ended (0 or 1). Empty when the
	// model has no own SELECT.
	writeRelease store.Stmt
	// held tells, after writeRelease wrote nothing, whether the lease is
	// still held: the version was stale rather than the lease gone.
	held string
	// releaseKey ends a lease by its table, key and token alone, for a
	// lease taken on a record deleted before grantRead could read it (the
	// usual release also checks the record).
	releaseKey store.Stmt
}

// pgGrant is the grant on PostgreSQL: acquire's INSERT (see buildLeaseSQL)
// with the fence from the database clock, in microseconds, or the previous
// fence + 1 when larger, as versions are (dialect.Caps.NextVersion), and
// with extra among the clock's columns.
//
// A grant outside a transaction commits with synchronous_commit off (extra
// sets it for the statement's own transaction): PostgreSQL acknowledges it
// before its WAL reaches the disk, and a crash within wal_writer_delay (3×
// at most) of it can lose it. That is safe: the holder's write checks its
// lease in the write's own, durable transaction, so it is refused once the
// grant is lost, like the write of a holder whose lease expired; the token
// is random and the fence comes from the clock, so neither is handed out
// again (as long as the clock does not step back by more than the time from
// the crash to the next grant: the assumption versions make); and any
// later durable commit (the holder's write, a renewal, a release) makes the
// grant durable first, its WAL being earlier. A counter (fence + 1) would
// not do: the grant after the crash would count from the durable fence
// and hand the lost grant's fence out again.
func pgGrant(key, table, where, extra string) string {
	return `INSERT INTO ` + LeaseTable + ` AS l (resource, record_key, owner, token_hash, fence, acquired_ms, expires_ms)
SELECT ?, ` + key + `, ?, ?, c.now_us, c.now_us / 1000, c.now_us / 1000 + ? FROM ` + table +
		`, (SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT AS now_us` + extra + `) AS c WHERE ` + where + `{bound}
ON CONFLICT (resource, record_key) DO UPDATE SET owner = excluded.owner, token_hash = excluded.token_hash,
  fence = GREATEST(l.fence + 1, excluded.fence), acquired_ms = excluded.acquired_ms, expires_ms = excluded.expires_ms
WHERE l.token_hash IS NULL OR l.expires_ms <= excluded.acquired_ms
RETURNING record_key, fence, acquired_ms, expires_ms`
}

// pgAsync is pgGrant's extra for a grant that commits by itself: the
// column is volatile, so PostgreSQL evaluates it although nothing reads it.
const pgAsync = `, set_config('synchronous_commit', 'off', true) AS gormlock_async`

// numbered turns s, with ? placeholders and a {bound} mark, into a store.Stmt
// for PostgreSQL: the mark becomes nothing in text and the dialect's
// SelfLockTimeout condition in bounded, whose placeholder is numbered
// after all the others, so that its argument comes last (see store.Stmt).
func numbered(db *gorm.DB, selfLock, s string) store.Stmt {
	n := strings.Count(s, "?")
	s = rebind(db, s)
	st := store.Stmt{Text: strings.Replace(s, "{bound}", "", 1)}
	if selfLock != "" {
		st.Bounded = strings.Replace(s, "{bound}", " AND "+strings.Replace(selfLock, "?", "$"+strconv.Itoa(n+1), 1), 1)
	}
	return st
}

// buildPGLeaseSQL writes pgLeaseSQL for the table of m from the pieces
// buildLeaseSQL made: the quoting function, the table, the record's key as
// text, the key condition and the live condition.
func buildPGLeaseSQL(db *gorm.DB, m *meta, quote func(string) string, table, key, match, live string) *pgLeaseSQL {
	if !m.ownSelect() {
		return nil // the record is read through GORM (AfterFind, read-only fields)
	}
	now := m.caps.NowMillis
	cols := make([]string, len(m.readCols))
	for i, f := range m.readCols {
		cols[i] = "r." + quote(f.DBName)
	}
	grantRead := func(extra string) store.Stmt {
		return numbered(db, m.caps.SelfLockTimeout, `WITH g AS (`+pgGrant(key, table, match+live, extra)+`)
SELECT g.record_key, g.fence, g.acquired_ms, g.expires_ms, r.gormlock_found, `+strings.Join(cols, ", ")+`
FROM g LEFT JOIN LATERAL (SELECT TRUE AS gormlock_found, `+table+`.* FROM `+table+` WHERE `+match+live+` FOR SHARE OF `+table+`) AS r ON TRUE`)
	}
	p := &pgLeaseSQL{grantRead: grantRead(""), grantReadAsync: grantRead(pgAsync)}

	var set strings.Builder
	for _, f := range m.setCols {
		set.WriteString(quote(f.DBName) + " = ?, ")
	}
	before, after, _ := strings.Cut(m.caps.NextVersion, "?")
	set.WriteString(quote(m.version.DBName) + " = " + before + "?" + after)
	if m.updatedAt != nil {
		set.WriteString(", " + quote(m.updatedAt.DBName) + " = ?")
	}
	// The lease row is locked by the write's condition, before the
	// record's row is written: the order Leases.Acquire takes them in.
	// The check names the record by its own key, so a lease whose Key
	// names another record is refused.
	p.writeRelease = numbered(db, m.caps.SelfLockTimeout, `WITH w AS (UPDATE `+table+` SET `+set.String()+` WHERE `+match+` AND COALESCE(`+quote(m.version.DBName)+`, 0) = ?`+live+`
  AND EXISTS (SELECT 1 FROM `+LeaseTable+` AS l WHERE l.resource = ? AND l.record_key = ? AND l.record_key = `+key+`
    AND l.token_hash = ? AND l.fence = ? AND l.expires_ms > `+now+`{bound} FOR UPDATE OF l) RETURNING `+quote(m.version.DBName)+`),
e AS (UPDATE `+LeaseTable+` SET token_hash = NULL, expires_ms = `+now+` WHERE resource = ? AND record_key = ? AND token_hash = ? AND EXISTS (SELECT 1 FROM w) RETURNING 1)
SELECT (SELECT `+quote(m.version.DBName)+` FROM w), (SELECT count(*) FROM e)`)
	p.held = rebind(db, `SELECT 1 FROM `+LeaseTable+` WHERE resource = ? AND record_key = ? AND record_key = (SELECT `+key+` FROM `+table+` WHERE `+match+`)
  AND token_hash = ? AND fence = ? AND expires_ms > `+now)
	p.releaseKey = numbered(db, m.caps.SelfLockTimeout, `UPDATE `+LeaseTable+` SET token_hash = NULL, expires_ms = `+now+` WHERE resource = ? AND record_key = ? AND token_hash = ?{bound}`)
	return p
}

// grantRead is Leases.Acquire's statement on PostgreSQL: it fills lease
// (Key, Fence) and e, and returns the lease's times. sql.ErrNoRows: no
// lease was taken. gone: the lease was taken but the record was deleted
// before it could be read.
func (r *Repository[T]) grantRead(ctx context.Context, args []any, lease *Lease, e *T) (acquired, expires int64, gone bool, err error) {
	rv := reflect.ValueOf(e).Elem()
	st := r.m.leases.pg.grantReadAsync
	if _, inTx := r.st.Pool(ctx); inTx {
		// Never the caller's commit: it may write more than the grant.
		st = r.m.leases.pg.grantRead
	}
	err = r.st.Exec(ctx, st, args, func(ctx context.Context, pool gorm.ConnPool, query string, args []any) (err error) {
		rows, err := r.st.QuerySQL(ctx, pool, query, args)
		if err != nil {
			return err
		}
		defer func() {
			if cerr := rows.Close(); err == nil || store.IsNoRows(err) {
				if cerr != nil {
					err = cerr
				}
			}
		}()
		if !rows.Next() {
			if err := rows.Err(); err != nil {
				return err
			}
			return sql.ErrNoRows
		}
		var found sql.NullBool
		head := []any{&lease.Key, &lease.Fence, &acquired, &expires, &found}
		retry, err := r.scanLeaseRow(ctx, rows, rv, head, true)
		if err != nil && retry {
			// A NULL in a plain field: the record is gone (found is
			// NULL too), or the field's value needs GORM's scan.
			_, err = r.scanLeaseRow(ctx, rows, rv, head, false)
		}
		if err != nil {
			return err
		}
		gone = !found.Valid
		return rows.Err()
	})
	return acquired, expires, gone, err
}

// scanLeaseRow is scanInto for a row that starts with the columns head
// scans into.
func (r *Repository[T]) scanLeaseRow(ctx context.Context, rows *sql.Rows, rv reflect.Value, head []any, direct bool) (retry bool, err error) {
	cols := r.m.readCols
	dests := make([]any, len(head)+len(cols))
	copy(dests, head)
	for i, f := range cols {
		if idx := r.m.direct[i]; direct && idx != nil {
			dests[len(head)+i] = rv.FieldByIndex(idx).Addr().Interface()
		} else {
			dests[len(head)+i] = f.NewValuePool.Get()
		}
	}
	err = rows.Scan(dests...)
	retry = err != nil && direct && r.m.anyDirect
	found := *head[4].(*sql.NullBool)
	for i, f := range cols {
		if direct && r.m.direct[i] != nil {
			continue
		}
		if err == nil && found.Valid {
			if err = f.Set(ctx, rv, dests[len(head)+i]); err != nil {
				err = fmt.Errorf("column %s: %w", f.DBName, err)
			}
		}
		f.NewValuePool.Put(dests[len(head)+i])
	}
	return retry, err
}

// updateWithLeasePG is Leases.Update in one statement (see pgLeaseSQL),
// for a model without update hooks, outside a transaction.
func (r *Repository[T]) updateWithLeasePG(ctx context.Context, e *T, l *Lease, id any, expected int64) error {
	rv, err := r.leaseWriteChecks(ctx, e, id, expected)
	if err != nil {
		return err
	}
	hash := hashToken(l.Token)
	args := make([]any, 0, 2*len(r.m.pks)+len(r.m.setCols)+10)
	for _, f := range r.m.setCols {
		v, _ := f.ValueOf(ctx, rv)
		args = append(args, v)
	}
	w := write{}
	args = append(args, expected+1) // the floor; the database reads its clock
	if r.m.updatedAt != nil {
		w.updated = timeValue(r.m.updatedAt, r.now(ctx))
		args = append(args, w.updated)
	}
	args = append(r.m.keyArgs(args, id), expected)
	args = append(args, r.m.table, l.Key, hash, l.Fence, r.m.table, l.Key, hash)
	var ended int64
	var version sql.NullInt64
	err = r.st.Exec(ctx, r.m.leases.pg.writeRelease, args, r.st.QueryRowScan(&version, &ended))
	switch {
	case err != nil:
		return fmt.Errorf("%s: Leases.Update id=%v: %w", r.m.table, id, err)
	case !version.Valid:
		return r.leaseWriteMissed(ctx, r.m.leases.pg.held, l, id, hash, expected)
	case ended != 1:
		// The lease row was locked, so this cannot happen; say so
		// rather than hide it.
		return fmt.Errorf("%s: Leases.Update id=%v: the record was written (version %d) but its lease row was not ended", r.m.table, id, version.Int64)
	}
	w.version = version.Int64
	return r.written(ctx, rv, id, w)
}

// releaseGone gives back a lease grantRead took on a record deleted before
// it could be read.
func (r *Repository[T]) releaseGone(ctx context.Context, lease *Lease, id any) error {
	err := fmt.Errorf("%s: Leases.Acquire id=%v: %w", r.m.table, id, &locking.NotFoundError{Table: r.m.table, ID: id})
	if _, rerr := r.st.ExecResult(context.WithoutCancel(ctx), r.m.leases.pg.releaseKey, []any{r.m.table, lease.Key, hashToken(lease.Token)}); rerr != nil {
		err = errors.Join(err, fmt.Errorf("giving the lease back: %w", rerr))
	}
	return err
}

// getAndLockPG is Leases.Acquire's grant and read in one statement (see
// pgLeaseSQL).
func (r *Repository[T]) getAndLockPG(ctx context.Context, id any, lease *Lease, ttl time.Duration) (*T, *Lease, error) {
	var e T
	args := r.m.keyArgs([]any{r.m.table, lease.Owner, hashToken(lease.Token), ceilMillis(ttl)}, id)
	args = r.m.keyArgs(args, id)
	acquired, expires, gone, err := r.grantRead(ctx, args, lease, &e)
	switch {
	case store.IsNoRows(err):
		return nil, nil, r.acquireRefused(ctx, id)
	case err != nil:
		return nil, nil, fmt.Errorf("%s: Leases.Acquire id=%v: %w", r.m.table, id, err)
	case gone:
		// Deleted after the grant, before the read: give the lease back.
		return nil, nil, r.releaseGone(ctx, lease, id)
	}
	r.fillLease(ctx, lease, &e, acquired, expires)
	return &e, lease, nil
}
