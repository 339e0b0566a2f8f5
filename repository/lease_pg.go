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
	// grantRead takes the lease (acquire's INSERT) and, when it did,
	// reads the record with a shared row lock, after the grant: the lease
	// columns, then TRUE (NULL when the record is gone meanwhile), then
	// readCols. No row: no lease was taken.
	grantRead store.Stmt
	// writeRelease checks the lease by its token and locks its row, writes
	// the record guarded by its version (Update's statement without the
	// lease guard) when the lease is held, and ends the lease when the
	// write matched. It returns one row: whether the lease was held (0 or
	// 1), the record's new version (NULL: not written), and whether the
	// lease was ended (0 or 1). Empty when the model has no own SELECT.
	writeRelease store.Stmt
	// releaseKey ends a lease by its table, key and token alone, for a
	// lease taken on a record deleted before grantRead could read it (the
	// usual release also checks the record).
	releaseKey store.Stmt
}

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
// text, the key condition, the live condition and acquire's INSERT (with
// its {bound} mark, and NOW replaced).
func buildPGLeaseSQL(db *gorm.DB, m *meta, quote func(string) string, table, key, match, live, insert string) *pgLeaseSQL {
	if !m.ownSelect() {
		return nil // the record is read through GORM (AfterFind, read-only fields)
	}
	now := m.caps.NowMillis
	cols := make([]string, len(m.readCols))
	for i, f := range m.readCols {
		cols[i] = "r." + quote(f.DBName)
	}
	p := &pgLeaseSQL{}
	// insert has NOW replaced already; the column lists must not be
	// touched by that replacement, so it is done piece by piece.
	p.grantRead = numbered(db, m.caps.SelfLockTimeout, `WITH g AS (`+insert+`)
SELECT g.record_key, g.fence, g.acquired_ms, g.expires_ms, r.gormlock_found, `+strings.Join(cols, ", ")+`
FROM g LEFT JOIN LATERAL (SELECT TRUE AS gormlock_found, `+table+`.* FROM `+table+` WHERE `+match+live+` FOR SHARE OF `+table+`) AS r ON TRUE`)

	var set strings.Builder
	for _, f := range m.setCols {
		set.WriteString(quote(f.DBName) + " = ?, ")
	}
	before, after, _ := strings.Cut(m.caps.NextVersion, "?")
	set.WriteString(quote(m.version.DBName) + " = " + before + "?" + after)
	if m.updatedAt != nil {
		set.WriteString(", " + quote(m.updatedAt.DBName) + " = ?")
	}
	p.writeRelease = numbered(db, m.caps.SelfLockTimeout, `WITH h AS MATERIALIZED (SELECT 1 FROM `+LeaseTable+` WHERE resource = ? AND record_key = ? AND record_key = (SELECT `+key+` FROM `+table+` WHERE `+match+`)
  AND token_hash = ? AND fence = ? AND expires_ms > `+now+`{bound} FOR UPDATE),
w AS (UPDATE `+table+` SET `+set.String()+` WHERE `+match+` AND COALESCE(`+quote(m.version.DBName)+`, 0) = ?`+live+` AND EXISTS (SELECT 1 FROM h) RETURNING `+quote(m.version.DBName)+`),
e AS (UPDATE `+LeaseTable+` SET token_hash = NULL, expires_ms = `+now+` WHERE resource = ? AND record_key = ? AND token_hash = ? AND EXISTS (SELECT 1 FROM w) RETURNING 1)
SELECT (SELECT count(*) FROM h), (SELECT `+quote(m.version.DBName)+` FROM w), (SELECT count(*) FROM e)`)
	p.releaseKey = numbered(db, m.caps.SelfLockTimeout, `UPDATE `+LeaseTable+` SET token_hash = NULL, expires_ms = `+now+` WHERE resource = ? AND record_key = ? AND token_hash = ?{bound}`)
	return p
}

// grantRead is Leases.Acquire's statement on PostgreSQL: it fills lease
// (Key, Fence) and e, and returns the lease's times. sql.ErrNoRows: no
// lease was taken. gone: the lease was taken but the record was deleted
// before it could be read.
func (r *Repository[T]) grantRead(ctx context.Context, args []any, lease *Lease, e *T) (acquired, expires int64, gone bool, err error) {
	rv := reflect.ValueOf(e).Elem()
	err = r.st.Exec(ctx, r.m.leases.pg.grantRead, args, func(ctx context.Context, pool gorm.ConnPool, query string, args []any) (err error) {
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
	rv := reflect.ValueOf(e).Elem()
	if err := r.refuseAssociations(ctx, rv, "Update", id); err != nil {
		return err
	}
	if expected >= 1<<63-2 {
		return locking.Invalid("%s: Leases.Update id=%v: version %d has no successor", r.m.table, id, expected)
	}
	hash := hashToken(l.Token)
	args := make([]any, 0, 2*len(r.m.pks)+len(r.m.setCols)+10)
	args = r.m.keyArgs(append(args, r.m.table, l.Key), id)
	args = append(args, hash, l.Fence)
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
	args = append(args, r.m.table, l.Key, hash)
	var held, ended int64
	var version sql.NullInt64
	err := r.st.Exec(ctx, r.m.leases.pg.writeRelease, args, r.st.QueryRowScan(&held, &version, &ended))
	switch {
	case err != nil:
		return fmt.Errorf("%s: Leases.Update id=%v: %w", r.m.table, id, err)
	case held != 1:
		return r.leaseRefused(ctx, id, l.Fence, "update")
	case !version.Valid:
		return r.checkAffected(ctx, 0, id, expected, "update", liveRows, false)
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
