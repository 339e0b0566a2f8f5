-- Run by run.sh: see there.
-- raw: the read-modify-write of bench's raw mode on PostgreSQL
\set id 1 + :client_id * 125 + random(0, 124)
SELECT version AS v, balance AS b, owner AS o, frozen AS f FROM accounts WHERE id = :id \gset
UPDATE accounts SET owner = :o, balance = :b::BIGINT + 1, frozen = :f, version = GREATEST(:v::BIGINT + 1, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT), updated_at = clock_timestamp() WHERE id = :id AND version = :v::BIGINT RETURNING version;
