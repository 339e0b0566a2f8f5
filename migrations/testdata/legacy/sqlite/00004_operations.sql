-- The operation table (repository.OpKey): one row per write made with an
-- operation key, inserted in the same transaction as the write, so that a
-- row exists exactly when the write was applied. Repeating an operation with
-- the same key finds the row and returns the first outcome instead of
-- applying the write again; repository.LookupOperation answers "was it
-- applied?" after an unknown outcome. Rows expire (expires_ms) and
-- repository.PurgeOperations deletes the expired ones.
-- Times are milliseconds since the Unix epoch by the database's clock.

-- +goose Up
CREATE TABLE gormlock_operations (
    op_key      TEXT    NOT NULL PRIMARY KEY,  -- the caller's key
    resource    TEXT    NOT NULL,              -- the record's table
    record_key  TEXT    NOT NULL,              -- the record's primary key, as text
    kind        TEXT    NOT NULL,              -- create, update, delete, ...
    version     INTEGER NOT NULL,              -- the version the write gave the record; 0 for a delete
    fingerprint TEXT    NOT NULL DEFAULT '',   -- what the caller says identifies the request
    created_ms  INTEGER NOT NULL,
    expires_ms  INTEGER NOT NULL
);
CREATE INDEX gormlock_operations_expires_idx ON gormlock_operations (expires_ms);

-- +goose Down
DROP TABLE gormlock_operations;
