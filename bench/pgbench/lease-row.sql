-- Run by run.sh: see there.
-- lease-row: gormlock's grant (committed without waiting for the disk) and the holder's write with the token
\set id 1 + :client_id * 125 + random(0, 124)
\set tok random(1, 2000000000)
UPDATE accounts SET gormlock_lease_owner = 'bench', gormlock_lease_token = lpad(:tok, 64, '0'),
  gormlock_lease_fence = GREATEST(accounts.gormlock_lease_fence + 1, c.now_us), gormlock_lease_acquired_ms = c.now_us / 1000, gormlock_lease_expires_ms = c.now_us / 1000 + 5000
FROM (SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT AS now_us, set_config('synchronous_commit', 'off', true) AS gormlock_async) AS c
WHERE accounts.id = :id AND (accounts.gormlock_lease_token IS NULL OR accounts.gormlock_lease_expires_ms <= c.now_us / 1000)
RETURNING CAST(accounts.id AS TEXT) AS k, accounts.gormlock_lease_fence AS fence, accounts.gormlock_lease_acquired_ms AS acq, accounts.gormlock_lease_expires_ms AS exp, TRUE AS found, accounts.id AS i, accounts.version AS v, accounts.created_at AS ca, accounts.updated_at AS ua, accounts.owner AS o, accounts.balance AS b, accounts.frozen AS f \gset
UPDATE accounts SET owner = :o, balance = :b::BIGINT + 1, frozen = :f, version = GREATEST(:v::BIGINT + 1, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT), updated_at = clock_timestamp(),
  gormlock_lease_token = NULL, gormlock_lease_expires_ms = FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT
WHERE accounts.id = :id AND COALESCE(accounts.version, 0) = :v::BIGINT AND CAST(accounts.id AS TEXT) = :id AND accounts.gormlock_lease_token = lpad(:tok, 64, '0') AND accounts.gormlock_lease_fence = :fence::BIGINT
  AND accounts.gormlock_lease_expires_ms > FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT RETURNING accounts.version;
