-- The lease table (repository.WithLeases): one row per leased record,
-- separate from the entity tables, so taking or releasing a lease never
-- changes the record itself. A released or expired lease keeps its row (with
-- token_hash NULL or an old expiry) so the record's fencing counter keeps
-- growing; Leases.Sweep deletes the rows of deleted records whose lease is
-- over.
-- Times are milliseconds since the Unix epoch by the database's clock.
--
-- MySQL and MariaDB: the text columns are VARBINARY, compared byte for
-- byte. Their utf8mb4 collations, utf8mb4_bin included, ignore trailing
-- spaces ('k' = 'k '), and the default ones case as well, so two keys
-- would share one lease row. The primary key's two columns fill InnoDB's
-- 3072-byte index limit (DYNAMIC rows, 16 KB pages): a table name of up to
-- 512 bytes, a record key of up to 2560; a longer one is refused (error
-- 1406 in the strict sql_mode package opendb/mysql sets), never cut
-- short. Every table has a primary key, as Galera needs.

-- +goose Up
CREATE TABLE gormlock_leases (
    resource    VARBINARY(512)  NOT NULL,           -- the record's table
    record_key  VARBINARY(2560) NOT NULL,           -- the record's primary key, as text
    owner       VARBINARY(1024) NOT NULL DEFAULT '',
    token_hash  VARBINARY(64),                      -- SHA-256 of the token, in hex; NULL when released
    fence       BIGINT NOT NULL CHECK (fence > 0),
    acquired_ms BIGINT NOT NULL,
    expires_ms  BIGINT NOT NULL,
    PRIMARY KEY (resource, record_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 ROW_FORMAT=DYNAMIC;
CREATE INDEX gormlock_leases_owner_idx ON gormlock_leases (owner);
CREATE INDEX gormlock_leases_expires_idx ON gormlock_leases (expires_ms);

-- +goose Down
DROP TABLE gormlock_leases;
