-- Run by run.sh: see there.
-- lease-row: gormlock's grant (committed without waiting for the disk) and the holder's write with the token
\set id 1 + :client_id * 125 + random(0, 124)
\set tok random(1, 2000000000)
UPDATE gormlock_pgbench.accounts SET gormlock_lease_owner = 'bench', gormlock_lease_token = lpad(:tok, 64, '0'),
  gormlock_lease_fence = GREATEST(gormlock_pgbench.accounts.gormlock_lease_fence + 1, c.now_us), gormlock_lease_acquired_ms = c.now_us / 1000, gormlock_lease_expires_ms = c.now_us / 1000 + 5000
FROM (SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT AS now_us, set_config('synchronous_commit', 'off', true) AS gormlock_async) AS c
WHERE gormlock_pgbench.accounts.id = :id AND (gormlock_pgbench.accounts.gormlock_lease_token IS NULL OR gormlock_pgbench.accounts.gormlock_lease_expires_ms <= c.now_us / 1000)
RETURNING CAST(gormlock_pgbench.accounts.id AS TEXT) AS k, gormlock_pgbench.accounts.gormlock_lease_fence AS fence, gormlock_pgbench.accounts.gormlock_lease_acquired_ms AS acq, gormlock_pgbench.accounts.gormlock_lease_expires_ms AS exp, TRUE AS found, gormlock_pgbench.accounts.id AS i, gormlock_pgbench.accounts.version AS v, gormlock_pgbench.accounts.created_at AS ca, gormlock_pgbench.accounts.updated_at AS ua, gormlock_pgbench.accounts.owner AS o, gormlock_pgbench.accounts.balance AS b, gormlock_pgbench.accounts.frozen AS f \gset
UPDATE gormlock_pgbench.accounts SET owner = :o, balance = :b::BIGINT + 1, frozen = :f, version = GREATEST(:v::BIGINT + 1, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT), updated_at = clock_timestamp(),
  gormlock_lease_token = NULL, gormlock_lease_expires_ms = FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT
WHERE gormlock_pgbench.accounts.id = :id AND COALESCE(gormlock_pgbench.accounts.version, 0) = :v::BIGINT AND CAST(gormlock_pgbench.accounts.id AS TEXT) = :id AND gormlock_pgbench.accounts.gormlock_lease_token = lpad(:tok, 64, '0') AND gormlock_pgbench.accounts.gormlock_lease_fence = :fence::BIGINT
  AND gormlock_pgbench.accounts.gormlock_lease_expires_ms > FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT RETURNING gormlock_pgbench.accounts.version;
