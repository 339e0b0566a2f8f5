package repository

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/internal/store"
)

// leaseSQL holds the lease statements of one repository's table.
type leaseSQL struct {
	acquire, release, renew, sweep store.Stmt
	state                          string
	// acquireBack reads the lease acquire wrote, by the record's key and
	// its token, where acquire cannot return it (MySQL); "" otherwise.
	// acquireBackAny reads it by its token alone, for a record deleted
	// before acquireBack could read its key.
	acquireBack, acquireBackAny string
	// guard is the condition every guarded write adds: no unexpired
	// lease on the row being written.
	guard string
	// pg holds the one-statement forms of Leases.Acquire and Leases.Update
	// (PostgreSQL, for a model Get reads with its own SELECT); nil
	// elsewhere.
	pg *pgLeaseSQL
	// writeHeld is Leases.Update's write on SQLite and MySQL: Update's
	// statement with the check that the caller holds the lease in place of
	// the lease guard. On SQLite end then ends the lease, in the same
	// transaction; MySQL's writeHeld is a multiple-table UPDATE that ends
	// it too, and end is empty (see updateWithLease). heldBy tells, after
	// writeHeld wrote nothing, whether the lease is still held. Empty on
	// PostgreSQL.
	writeHeld, end store.Stmt
	heldBy         string
	// row holds the statements of leases kept in the record's row
	// (WithLeasesInRow); then guard is set and every other field empty.
	row *rowLeaseSQL
}

// buildLeaseSQL writes the lease statements for the table of m. Lease rows
// are keyed by the database's own text of the record's key, CAST(pk AS
// TEXT) (for a composite key, a JSON array of its columns), read from the
// record itself: two spellings of one key (a UUID in upper case, a
// case-insensitive collation) are one lease. A soft-deleted record cannot
// be leased.
func buildLeaseSQL(db *gorm.DB, m *meta) *leaseSQL {
	if m.leaseInRow {
		return buildRowLeaseSQL(db, m)
	}
	if sqlDB, err := db.DB(); err == nil {
		registerTableLeases(sqlDB)
	}
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
	w := func(s string) store.Stmt { return boundStmt(db, m.caps, strings.ReplaceAll(s, "NOW", now)) }
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
	if m.caps.Name == dialect.Postgres {
		// PostgreSQL may grant without waiting for the disk (see
		// pgLeaseSQL), so a crash can lose a grant whose fence the holder
		// has already seen: the fence is then the database clock in
		// microseconds, or the previous fence + 1 when larger, as versions
		// are, so that no fence is ever handed out twice.
		acquire = pgGrant(key, table, match+live, "")
	}
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
		l.pg = buildPGLeaseSQL(db, m, quote, table, key, match, live)
	}
	if m.caps.Name != dialect.Postgres {
		// Leases.Update checks the lease in the write itself, which names
		// the record by its own key: a lease whose Key names another
		// record is refused. Columns are qualified: the lease table has
		// columns of the record's names (owner, say).
		qual := "" // SQLite's SET names columns of its one table
		if m.caps.VersionBack == dialect.LastInsertID {
			qual = table + "."
		}
		var set strings.Builder
		for _, f := range m.setCols {
			set.WriteString(qual + quote(f.DBName) + " = ?, ")
		}
		version := qual + quote(m.version.DBName)
		if m.caps.NextVersion != "" {
			set.WriteString(version + " = " + m.caps.NextVersion)
		} else {
			set.WriteString(version + " = ?") // computed in Go (SQLite)
		}
		if m.updatedAt != nil {
			set.WriteString(", " + qual + quote(m.updatedAt.DBName) + " = ?")
		}
		mine := `l.token_hash = ? AND l.fence = ? AND l.expires_ms > NOW`
		if m.caps.VersionBack == dialect.LastInsertID {
			// One statement writes the record and ends the lease: a
			// multiple-table UPDATE, the record's row first (STRAIGHT_JOIN),
			// in the order Leases.Acquire locks them (its INSERT ... SELECT
			// reads the record with a shared lock first): InnoDB would
			// otherwise deadlock the two.
			l.writeHeld = w(`UPDATE ` + table + ` STRAIGHT_JOIN ` + LeaseTable + ` AS l ON l.resource = ? AND l.record_key = ? AND l.record_key = ` + key + `
SET ` + set.String() + `, l.token_hash = NULL, l.expires_ms = NOW
WHERE ` + match + ` AND COALESCE(` + table + `.` + quote(m.version.DBName) + `, 0) = ?` + live + ` AND ` + mine + `{bound}`)
		} else {
			l.writeHeld = w(`UPDATE ` + table + ` SET ` + set.String() + ` WHERE ` + match + ` AND COALESCE(` + version + `, 0) = ?` + live + `
  AND EXISTS (SELECT 1 FROM ` + LeaseTable + ` AS l WHERE l.resource = ? AND l.record_key = ? AND l.record_key = ` + key + ` AND ` + mine + `){bound}`)
			l.end = w(`UPDATE ` + LeaseTable + ` SET token_hash = NULL, expires_ms = NOW WHERE resource = ? AND record_key = ? AND token_hash = ?{bound}`)
		}
		l.heldBy = q(`SELECT 1 FROM ` + LeaseTable + ` WHERE ` + held)
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
		// By the record's key, the lease table's primary key; no row:
		// the record is gone; NULLs: the lease is not the caller's.
		l.acquireBack = q(`SELECT l.record_key, l.fence, l.acquired_ms, l.expires_ms FROM (SELECT ` + key + ` AS k FROM ` + table + ` WHERE ` + match + `) AS rec
LEFT JOIN ` + LeaseTable + ` AS l ON l.resource = ? AND l.record_key = rec.k AND l.token_hash = ?`)
		l.acquireBackAny = q(`SELECT record_key, fence, acquired_ms, expires_ms FROM ` + LeaseTable + ` WHERE resource = ? AND token_hash = ?`)
		// The new expiry comes back as the LAST_INSERT_ID it sets.
		l.renew = w(`UPDATE ` + LeaseTable + ` SET expires_ms = LAST_INSERT_ID(NOW + ?) WHERE ` + held + `{bound}`)
	}
	return l
}

// boundStmt turns s, a write with ? placeholders and a {bound} mark where
// the WHERE clause ends after its last placeholder, into a stmt: the text
// without the mark, and the bounded form with the dialect's SelfLockTimeout
// condition there (its parameter the last).
func boundStmt(db *gorm.DB, caps dialect.Caps, s string) store.Stmt {
	st := store.Stmt{Text: rebind(db, strings.Replace(s, "{bound}", "", 1))}
	if caps.StatementTimeout != "" {
		st.Bounded = st.Text // bounded by a prefix, see store.Stmt
	} else if caps.SelfLockTimeout != "" {
		st.Bounded = rebind(db, strings.Replace(s, "{bound}", " AND "+caps.SelfLockTimeout, 1))
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
