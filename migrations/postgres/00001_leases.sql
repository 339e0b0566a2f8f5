-- The lease table (repository.WithLeases): one row per leased record,
-- separate from the entity tables, so taking or releasing a lease never
-- changes the record itself. A released or expired lease keeps its row (with
-- token_hash NULL or an old expiry) so the record's fencing counter keeps
-- growing; Leases.Sweep deletes the rows of deleted records whose lease is
-- over.
-- Times are milliseconds since the Unix epoch by the database's clock.

-- +goose Up
CREATE TABLE gormlock_leases (
    resource    TEXT   NOT NULL,           -- the record's table
    record_key  TEXT   NOT NULL,           -- the record's primary key, as text
    owner       TEXT   NOT NULL DEFAULT '',
    token_hash  TEXT,                      -- SHA-256 of the token; NULL when released
    fence       BIGINT NOT NULL CHECK (fence > 0),
    acquired_ms BIGINT NOT NULL,
    expires_ms  BIGINT NOT NULL,
    PRIMARY KEY (resource, record_key)
);
CREATE INDEX gormlock_leases_owner_idx ON gormlock_leases (owner);
CREATE INDEX gormlock_leases_expires_idx ON gormlock_leases (expires_ms);

-- +goose Down
DROP TABLE gormlock_leases;
