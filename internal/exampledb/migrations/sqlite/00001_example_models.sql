-- Tables of the example models (models.Account, models.Document), for the
-- examples, benchmarks and tests (internal/exampledb.Migrate, recorded in
-- gormlock_examples_version); gormlock's own migrations do not create them.
-- The version column is NOT NULL and positive: a guarded write needs it.

-- +goose Up
CREATE TABLE accounts (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    owner      TEXT     NOT NULL,
    balance    INTEGER  NOT NULL DEFAULT 0,
    frozen     BOOLEAN  NOT NULL DEFAULT 0,
    version    INTEGER  NOT NULL CHECK (version > 0),
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL
);
CREATE INDEX accounts_owner_idx ON accounts (owner);

CREATE TABLE documents (
    id         TEXT     NOT NULL PRIMARY KEY,
    title      TEXT     NOT NULL,
    attrs      TEXT     NOT NULL DEFAULT '{}',
    version    INTEGER  NOT NULL CHECK (version > 0),
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL
);

-- +goose Down
DROP TABLE documents;
DROP TABLE accounts;
