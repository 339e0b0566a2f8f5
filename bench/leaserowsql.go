package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"time"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/locking"
)

// The statements of a lease in the record's row on SQLite, as gormlock
// sends them (WithLeasesInRow): the grant, the read back by the token's
// hash, and the holder's write, which checks the token and fence and ends
// the lease.
const (
	leaseRowGrant = "UPDATE `accounts` SET `gormlock_lease_owner` = ?, `gormlock_lease_token` = ?,\n" +
		"  `gormlock_lease_fence` = `accounts`.`gormlock_lease_fence` + 1, `gormlock_lease_acquired_ms` = CAST(unixepoch('subsec') * 1000 AS INTEGER), `gormlock_lease_expires_ms` = CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?\n" +
		"WHERE `accounts`.`id` = ? AND (`accounts`.`gormlock_lease_token` IS NULL OR `accounts`.`gormlock_lease_expires_ms` <= CAST(unixepoch('subsec') * 1000 AS INTEGER))"
	leaseRowBack = "SELECT CAST(`accounts`.`id` AS TEXT), `accounts`.`gormlock_lease_fence`, `accounts`.`gormlock_lease_acquired_ms`, `accounts`.`gormlock_lease_expires_ms`, TRUE, " +
		"`accounts`.`id`, `accounts`.`version`, `accounts`.`created_at`, `accounts`.`updated_at`, `accounts`.`owner`, `accounts`.`balance`, `accounts`.`frozen` " +
		"FROM `accounts` WHERE `accounts`.`id` = ? AND `accounts`.`gormlock_lease_token` = ?"
	leaseRowWrite = "UPDATE `accounts` SET `owner` = ?, `balance` = ?, `frozen` = ?, `version` = ?, `updated_at` = ?, `gormlock_lease_token` = NULL, `gormlock_lease_expires_ms` = CAST(unixepoch('subsec') * 1000 AS INTEGER) " +
		"WHERE `accounts`.`id` = ? AND COALESCE(`accounts`.`version`, 0) = ? AND CAST(`accounts`.`id` AS TEXT) = ? AND `accounts`.`gormlock_lease_token` = ? AND `accounts`.`gormlock_lease_fence` = ? " +
		"AND `accounts`.`gormlock_lease_expires_ms` > CAST(unixepoch('subsec') * 1000 AS INTEGER)"
)

// The same on PostgreSQL: the grant returns the record (UPDATE ...
// RETURNING) and commits without waiting for the disk; the write returns
// the new version.
const (
	pgLeaseRowGrant = `UPDATE "accounts" SET "gormlock_lease_owner" = $1, "gormlock_lease_token" = $2,
  "gormlock_lease_fence" = GREATEST("accounts"."gormlock_lease_fence" + 1, c.now_us), "gormlock_lease_acquired_ms" = c.now_us / 1000, "gormlock_lease_expires_ms" = c.now_us / 1000 + $3
FROM (SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT AS now_us, set_config('synchronous_commit', 'off', true) AS gormlock_async) AS c
WHERE "accounts"."id" = $4 AND ("accounts"."gormlock_lease_token" IS NULL OR "accounts"."gormlock_lease_expires_ms" <= c.now_us / 1000)
RETURNING CAST("accounts"."id" AS TEXT), "accounts"."gormlock_lease_fence", "accounts"."gormlock_lease_acquired_ms", "accounts"."gormlock_lease_expires_ms", TRUE, ` +
		`"accounts"."id", "accounts"."version", "accounts"."created_at", "accounts"."updated_at", "accounts"."owner", "accounts"."balance", "accounts"."frozen"`
	pgLeaseRowWrite = `UPDATE "accounts" SET "owner" = $1, "balance" = $2, "frozen" = $3, "version" = GREATEST($4, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT), "updated_at" = $5, ` +
		`"gormlock_lease_token" = NULL, "gormlock_lease_expires_ms" = FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT ` +
		`WHERE "accounts"."id" = $6 AND COALESCE("accounts"."version", 0) = $7 AND CAST("accounts"."id" AS TEXT) = $8 AND "accounts"."gormlock_lease_token" = $9 AND "accounts"."gormlock_lease_fence" = $10 ` +
		`AND "accounts"."gormlock_lease_expires_ms" > FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT RETURNING "accounts"."version"`
)

// pgLeaseRowRelease ends the lease of a holder whose write failed.
const pgLeaseRowRelease = `UPDATE "accounts" SET "gormlock_lease_token" = NULL, "gormlock_lease_expires_ms" = FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT WHERE "accounts"."id" = $1 AND "accounts"."gormlock_lease_token" = $2`

// errLeaseRowWriteMissed is a holder's write that matched no row.
var errLeaseRowWriteMissed = errors.New("bench: the holder's write matched no row")

// leaseRowSQLOp is lease-row's operation by hand on database/sql: grant,
// read back (SQLite), write with the token; retried like the lease modes
// while someone else holds the record. On SQLite its writes wait for the
// write lock in SQLite's busy handler, as raw's do.
func (h *harness) leaseRowSQLOp(n *node) op {
	if h.dialect == "postgres" {
		return h.pgLeaseRowSQLOp(n)
	}
	return h.leaseRowRetry(func(ctx context.Context, id int64, hash string) error {
		res, err := n.sqlDB.ExecContext(ctx, leaseRowGrant, "bench", hash, int64(5000), id)
		if err != nil {
			return err
		}
		if k, err := res.RowsAffected(); err != nil || k != 1 {
			return errors.Join(locking.ErrLocked, err)
		}
		var a fixtures.Account
		var key string
		var fence, acquired, expires int64
		var found bool
		if err := n.sqlDB.QueryRowContext(ctx, leaseRowBack, id, hash).Scan(&key, &fence, &acquired, &expires, &found,
			&a.ID, &a.Version, &a.CreatedAt, &a.UpdatedAt, &a.Owner, &a.Balance, &a.Frozen); err != nil {
			return err
		}
		now := time.Now().UTC().Truncate(time.Microsecond)
		res, err = n.sqlDB.ExecContext(ctx, leaseRowWrite, a.Owner, a.Balance+1, a.Frozen, max(a.Version+1, now.UnixMicro()), now, a.ID, a.Version, key, hash, fence)
		if err != nil {
			return err
		}
		if k, err := res.RowsAffected(); err != nil || k != 1 {
			return errors.Join(errLeaseRowWriteMissed, err)
		}
		return nil
	})
}

// pgLeaseRowSQLOp is leaseRowSQLOp on PostgreSQL: two statements, as
// lease-row sends them, on database/sql's pool with the worker's context,
// as raw sends its own (database/sql starts a goroutine per query for
// it, which gormlock no longer does). A refused grant is retried at once;
// lease-row first reads who holds the lease, to say so in its error.
func (h *harness) pgLeaseRowSQLOp(n *node) op {
	return h.leaseRowRetry(func(ctx context.Context, id int64, hash string) error {
		var a fixtures.Account
		var key string
		var fence, acquired, expires int64
		var found bool
		err := n.sqlDB.QueryRowContext(ctx, pgLeaseRowGrant, "bench", hash, int64(5000), id).Scan(&key, &fence, &acquired, &expires, &found,
			&a.ID, &a.Version, &a.CreatedAt, &a.UpdatedAt, &a.Owner, &a.Balance, &a.Frozen)
		if errors.Is(err, sql.ErrNoRows) {
			return locking.ErrLocked
		}
		if err != nil {
			return err
		}
		now := time.Now().UTC().Truncate(time.Microsecond)
		err = n.sqlDB.QueryRowContext(ctx, pgLeaseRowWrite, a.Owner, a.Balance+1, a.Frozen, a.Version+1, now, a.ID, a.Version, key, hash, fence).Scan(&a.Version)
		if errors.Is(err, sql.ErrNoRows) {
			err = errLeaseRowWriteMissed
		}
		if err != nil {
			// Given back, as lease-row does, so that a retry is not
			// refused until the lease expires.
			_, _ = n.sqlDB.ExecContext(context.WithoutCancel(ctx), pgLeaseRowRelease, id, hash)
		}
		return err
	})
}

// leaseRowRetry is the op of a lease-row-sql attempt, which gets a fresh
// token's hash each time: retried like the lease modes while someone else
// holds the record.
func (h *harness) leaseRowRetry(attempt func(ctx context.Context, id int64, hash string) error) op {
	return func(ctx context.Context, id int64) (int, error) {
		attempts := 0
		err := locking.OnError(ctx, h.policy, func(err error) bool {
			return errors.Is(err, locking.ErrLocked) || retryable(err)
		}, func(ctx context.Context) error {
			attempts++
			sum := sha256.Sum256([]byte(rand.Text()))
			return attempt(ctx, id, hex.EncodeToString(sum[:]))
		})
		return attempts, err
	}
}
