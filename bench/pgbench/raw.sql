-- Run by run.sh: see there.
-- raw: the read-modify-write of bench's raw mode on PostgreSQL
\set id 1 + :client_id * 125 + random(0, 124)
SELECT id, version AS v, created_at, updated_at, owner AS o, balance AS b, frozen AS f FROM gormlock_pgbench.accounts WHERE id = :id \gset
UPDATE gormlock_pgbench.accounts SET owner = :o, balance = :b::BIGINT + 1, frozen = :f, version = GREATEST(:v::BIGINT + 1, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT), updated_at = clock_timestamp() WHERE id = :id AND version = :v::BIGINT RETURNING version;
