package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// SweepResult is the cost of a guarded write of one record in hand, with
// Rows records in the table and a Payload-byte title.
type SweepResult struct {
	Rows    int           `json:"rows"`
	Payload int           `json:"payload_bytes"`
	Ops     int           `json:"ops"`
	PerOp   time.Duration `json:"per_op_ns"`
}

// sweep measures a guarded Update of one document in hand for every
// combination of table size and payload size, one worker, for d each. The
// table grows between sizes (rows are added, never removed, until the end).
func sweep(ctx context.Context, db *gorm.DB, sizes, payloads []int, d time.Duration) (out []SweepResult, err error) {
	docs, err := repository.New[models.Document](db)
	if err != nil {
		return nil, err
	}
	defer func() {
		err = errors.Join(err, db.WithContext(context.WithoutCancel(ctx)).Exec("DELETE FROM documents WHERE id LIKE 'sweep-%'").Error)
	}()
	have := 0
	for _, n := range sizes {
		if n > have {
			if err := fill(ctx, db, have, n); err != nil {
				return nil, err
			}
			have = n
		}
		for _, p := range payloads {
			doc, err := docs.Get(ctx, "sweep-1")
			if err != nil {
				return nil, err
			}
			a, b := strings.Repeat("a", p), strings.Repeat("b", p)
			ops := 0
			start := time.Now()
			for time.Since(start) < d {
				doc.Title = a
				if ops%2 == 1 {
					doc.Title = b
				}
				if err := docs.Update(ctx, doc); err != nil {
					return nil, err
				}
				ops++
			}
			out = append(out, SweepResult{Rows: n, Payload: p, Ops: ops, PerOp: time.Since(start) / time.Duration(ops)})
		}
	}
	return out, nil
}

// fill adds documents sweep-(from+1) .. sweep-to in one statement.
func fill(ctx context.Context, db *gorm.DB, from, to int) error {
	q := `WITH RECURSIVE c(x) AS (SELECT ? UNION ALL SELECT x + 1 FROM c WHERE x < ?)
INSERT INTO documents (id, title, attrs, version, created_at, updated_at)
SELECT 'sweep-' || x, 'x', '{}', 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP FROM c`
	if db.Dialector.Name() == "postgres" {
		q = `INSERT INTO documents (id, title, attrs, version, created_at, updated_at)
SELECT 'sweep-' || g, 'x', '{}', 1, now(), now() FROM generate_series(?::bigint, ?::bigint) AS g`
	}
	return db.WithContext(ctx).Exec(q, from+1, to).Error
}

func writeSweep(w io.Writer, db string, rs []SweepResult) {
	fmt.Fprintf(w, "\n| db | rows | payload | guarded Update | vs first |\n|---|---:|---:|---:|---:|\n")
	for _, r := range rs {
		base := r.PerOp
		for _, q := range rs {
			if q.Payload == r.Payload {
				base = q.PerOp
				break
			}
		}
		fmt.Fprintf(w, "| %s | %d | %d B | %v | %.2f× |\n", db, r.Rows, r.Payload, r.PerOp.Round(100*time.Nanosecond), float64(r.PerOp)/float64(base))
	}
}
