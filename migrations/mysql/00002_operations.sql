-- The operation table (repository.OpKey): one row per write made with an
-- operation key, inserted in the same transaction as the write, so that a
-- row exists exactly when the write was applied. Repeating an operation with
-- the same key finds the row and returns the first outcome instead of
-- applying the write again; repository.LookupOperation answers "was it
-- applied?" after an unknown outcome. Rows expire (expires_ms) and
-- repository.PurgeOperations deletes the expired ones.
-- Times are milliseconds since the Unix epoch by the database's clock.
--
-- MySQL and MariaDB: the text columns are VARBINARY, compared byte for byte
-- (a utf8mb4 collation would take 'k' and 'k ', or 'k' and 'K', for one
-- key). op_key holds repository.MaxOperationKeyLen (255) bytes; resource and
-- record_key are as long as in gormlock_leases; fingerprint holds the 1024
-- bytes OpKey accepts.

-- +goose Up
CREATE TABLE gormlock_operations (
    op_key      VARBINARY(255)  NOT NULL PRIMARY KEY,  -- the caller's key
    resource    VARBINARY(512)  NOT NULL,              -- the record's table
    record_key  VARBINARY(2560) NOT NULL,              -- the record's primary key, as text
    kind        VARBINARY(32)   NOT NULL,              -- create, update, delete, ...
    version     BIGINT          NOT NULL,              -- the version the write gave the record; 0 for a delete
    fingerprint VARBINARY(1024) NOT NULL DEFAULT '',   -- what the caller says identifies the request
    created_ms  BIGINT          NOT NULL,
    expires_ms  BIGINT          NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 ROW_FORMAT=DYNAMIC;
CREATE INDEX gormlock_operations_expires_idx ON gormlock_operations (expires_ms);

-- +goose Down
DROP TABLE gormlock_operations;
