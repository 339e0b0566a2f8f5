-- The table of bench's accounts with the lease columns WithLeasesInRow's
-- migration helper adds, in a schema of its own, with 1,000 rows.
DROP SCHEMA IF EXISTS gormlock_pgbench CASCADE;
CREATE SCHEMA gormlock_pgbench;
CREATE TABLE gormlock_pgbench.accounts (
  id bigint PRIMARY KEY,
  owner text NOT NULL,
  balance bigint NOT NULL DEFAULT 0,
  frozen boolean NOT NULL DEFAULT false,
  version bigint NOT NULL CHECK (version > 0),
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  gormlock_lease_owner text,
  gormlock_lease_token text,
  gormlock_lease_fence bigint NOT NULL DEFAULT 0,
  gormlock_lease_acquired_ms bigint,
  gormlock_lease_expires_ms bigint
);
CREATE INDEX accounts_owner_idx ON gormlock_pgbench.accounts (owner);
INSERT INTO gormlock_pgbench.accounts (id, owner, balance, version, created_at, updated_at)
  SELECT g, 'owner ' || g, 0, 1, now(), now() FROM generate_series(1, 1000) g;
