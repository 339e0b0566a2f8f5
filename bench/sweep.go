package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/repository"
)

// SweepResult is the cost of a guarded write of one record in hand, with
// Rows records in the table and a Payload-byte title.
type SweepResult struct {
	Rows    int `json:"rows"`
	Payload int `json:"payload_bytes"`
	Ops     int `json:"ops"`
	// PerOp is the median of the rounds' time per write (RoundPerOp).
	PerOp      time.Duration   `json:"per_op_ns"`
	RoundPerOp []time.Duration `json:"round_per_op_ns"`
	// VsFirst is the cost relative to the first table size at the same
	// payload: the median over rounds of the ratio within each round.
	VsFirst float64 `json:"vs_first"`
}

// sweepTable is one table size: a database of its own holding rows
// documents, so that every size exists at once and the rounds can visit
// them in turn.
type sweepTable struct {
	rows  int
	docs  *repository.Repository[fixtures.Document]
	close func() error
}

// sweep measures a guarded Update of one document in hand for every
// combination of table size and payload size, one worker, for d each, in
// rounds: every round visits every size and payload, so each ratio compares
// measurements taken next to each other. Each size lives in its own
// database — a SQLite file in a temporary directory, a PostgreSQL schema of
// the database dsn names, or a MariaDB database on the server dsn names
// (on Galera, through the first node), dropped at the end — since one table
// cannot hold 1,000 and 1,000,000 rows at the same time.
func sweep(ctx context.Context, stderr io.Writer, db *gorm.DB, dsn string, sizes, payloads []int, d time.Duration, rounds int) (out []SweepResult, err error) {
	if db.Dialector.Name() == "mysql" {
		for _, p := range payloads {
			if p > mysqlTextMax {
				return nil, fmt.Errorf("-sweep-payloads: %d bytes do not fit documents.title, a TEXT column on MariaDB and MySQL (%d bytes at most)", p, mysqlTextMax)
			}
		}
	}
	var tables []sweepTable
	defer func() {
		for _, t := range tables {
			err = errors.Join(err, t.close())
		}
	}()
	for _, n := range sizes {
		fmt.Fprintf(stderr, "size sweep: filling a table of %d rows\n", n)
		t, err := openSweepTable(ctx, db, dsn, n)
		if err != nil {
			return nil, err
		}
		tables = append(tables, t)
	}
	// Incompressible payloads: PostgreSQL compresses a repeated letter to
	// almost nothing, which would measure a much smaller write.
	rng := rand.New(rand.NewPCG(1, 2))
	text := func(n int) string {
		const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
		b := make([]byte, n)
		for i := range b {
			b[i] = letters[rng.IntN(len(letters))]
		}
		return string(b)
	}
	texts := make([][2]string, len(payloads))
	for i, p := range payloads {
		texts[i] = [2]string{text(p), text(p)}
	}

	out = make([]SweepResult, len(sizes)*len(payloads))
	for round := range max(rounds, 1) {
		fmt.Fprintf(stderr, "size sweep: round %d/%d\n", round+1, max(rounds, 1))
		for i, t := range tables {
			for j, p := range payloads {
				doc, err := t.docs.Get(ctx, "sweep-1")
				if err != nil {
					return nil, err
				}
				ops := 0
				start := time.Now()
				for time.Since(start) < d {
					doc.Title = texts[j][ops%2]
					if err := t.docs.Update(ctx, doc); err != nil {
						return nil, err
					}
					ops++
				}
				r := &out[i*len(payloads)+j]
				r.Rows, r.Payload = t.rows, p
				r.Ops += ops
				r.RoundPerOp = append(r.RoundPerOp, time.Since(start)/time.Duration(ops))
			}
		}
	}
	for i := range out {
		r := &out[i]
		r.PerOp = medianDuration(r.RoundPerOp)
		first := out[i%len(payloads)] // the first size, same payload
		ratios := make([]float64, len(r.RoundPerOp))
		for k := range r.RoundPerOp {
			ratios[k] = float64(r.RoundPerOp[k]) / float64(first.RoundPerOp[k])
		}
		r.VsFirst = median(ratios)
	}
	return out, nil
}

// sweepSchemaPrefix starts the names of the PostgreSQL schemas and the
// MariaDB databases the sweep creates (and drops when it ends).
const sweepSchemaPrefix = "gormlock_bench_sweep_"

// mysqlTextMax is the most bytes a TEXT column holds on MySQL and MariaDB
// (documents.title in the examples' migration).
const mysqlTextMax = 65535

// defaultSweepPayloads is -sweep-payloads when not given: 100 B and
// 100 KB, or 64 KB where documents.title is a TEXT column that holds no
// more.
func defaultSweepPayloads(db string) string {
	if db == dbMariaDB || db == dbGalera {
		return "100," + fmt.Sprint(mysqlTextMax)
	}
	return "100,102400"
}

// openSweepTable opens a fresh, migrated database next to db and fills its
// documents table with sweep-1 .. sweep-n.
func openSweepTable(ctx context.Context, db *gorm.DB, dsn string, n int) (sweepTable, error) {
	target, dropSchema := "", func() error { return nil }
	name := fmt.Sprintf("%s%d_%d", sweepSchemaPrefix, n, time.Now().UnixNano())
	switch db.Dialector.Name() {
	case "postgres":
		if err := db.WithContext(ctx).Exec("CREATE SCHEMA " + name).Error; err != nil {
			return sweepTable{}, err
		}
		dropSchema = func() error {
			return db.WithContext(context.WithoutCancel(ctx)).Exec("DROP SCHEMA IF EXISTS " + name + " CASCADE").Error
		}
		target = fixtures.WithSearchPath(dsn, name)
	case "mysql":
		// MySQL's schemas are its databases: a database of its own on the
		// same server.
		var err error
		if target, err = withDatabase(dsn, name); err != nil {
			return sweepTable{}, err
		}
		if err := db.WithContext(ctx).Exec("CREATE DATABASE " + name + " CHARACTER SET utf8mb4").Error; err != nil {
			return sweepTable{}, err
		}
		dropSchema = func() error {
			return db.WithContext(context.WithoutCancel(ctx)).Exec("DROP DATABASE IF EXISTS " + name).Error
		}
	}
	sdb, closeDB, err := fixtures.Open(ctx, target, fmt.Sprintf("sweep-%d", n))
	if err != nil {
		return sweepTable{}, errors.Join(err, dropSchema())
	}
	t := sweepTable{rows: n, close: func() error { return errors.Join(closeDB(), dropSchema()) }}
	if t.docs, err = repository.New[fixtures.Document](sdb); err == nil {
		err = fill(ctx, sdb, n)
	}
	if err != nil {
		return sweepTable{}, errors.Join(err, t.close())
	}
	return t, nil
}

// fill adds documents sweep-1 .. sweep-n in one statement (on MySQL, one
// per 100,000).
func fill(ctx context.Context, db *gorm.DB, n int) error {
	if db.Dialector.Name() == "mysql" {
		return fillMySQL(ctx, db, n)
	}
	q := `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?)
INSERT INTO documents (id, title, attrs, version, created_at, updated_at)
SELECT 'sweep-' || x, 'x', '{}', 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP FROM c`
	if db.Dialector.Name() == "postgres" {
		q = `INSERT INTO documents (id, title, attrs, version, created_at, updated_at)
SELECT 'sweep-' || g, 'x', '{}', 1, now(), now() FROM generate_series(1, ?::bigint) AS g`
	}
	if err := db.WithContext(ctx).Exec(q, n).Error; err != nil {
		return err
	}
	if db.Dialector.Name() == "postgres" {
		return db.WithContext(ctx).Exec("ANALYZE documents").Error
	}
	return nil
}

// fillMySQL is fill on MySQL and MariaDB, whose recursive queries stop at
// 1,000 rows by default (max_recursive_iterations, cte_max_recursion_depth):
// the numbers come from a cross join of digits instead, 100,000 rows per
// statement, which keeps each transaction (and a Galera write set) small.
func fillMySQL(ctx context.Context, db *gorm.DB, n int) error {
	const digits = "(SELECT 0 AS x UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	var num, from strings.Builder
	for k, p := 0, 1; p < n; k, p = k+1, p*10 {
		if k > 0 {
			num.WriteString(" + ")
			from.WriteString(" CROSS JOIN ")
		}
		fmt.Fprintf(&num, "%d * d%d.x", p, k)
		fmt.Fprintf(&from, "%s AS d%d", digits, k)
	}
	if num.Len() == 0 { // n == 1
		num.WriteString("0")
		from.WriteString("(SELECT 0 AS x) AS d0")
	}
	q := `INSERT INTO documents (id, title, attrs, version, created_at, updated_at)
SELECT CONCAT('sweep-', g.x), 'x', '{}', 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)
FROM (SELECT ` + num.String() + ` + 1 AS x FROM ` + from.String() + `) AS g WHERE g.x BETWEEN ? AND ?`
	const chunk = 100000
	for lo := 1; lo <= n; lo += chunk {
		if err := db.WithContext(ctx).Exec(q, lo, min(lo+chunk-1, n)).Error; err != nil {
			return err
		}
	}
	return db.WithContext(ctx).Exec("ANALYZE TABLE documents").Error
}

// medianDuration returns the median of ds.
func medianDuration(ds []time.Duration) time.Duration {
	fs := make([]float64, len(ds))
	for i, d := range ds {
		fs[i] = float64(d)
	}
	return time.Duration(median(fs))
}

func writeSweep(w io.Writer, db string, rs []SweepResult) {
	fmt.Fprintf(w, "\n| db | rows | payload | guarded Update | vs first size |\n|---|---:|---:|---:|---:|\n")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %d | %d B | %v | %.2f× |\n", db, r.Rows, r.Payload, r.PerOp.Round(100*time.Nanosecond), r.VsFirst)
	}
}
