-- Tables of the example models (models.Account, models.Document), for the
-- examples, benchmarks and tests (internal/exampledb.Migrate, recorded in
-- gormlock_examples_version); gormlock's own migrations do not create them.
-- The version column is NOT NULL and positive: a guarded write needs it.
--
-- MySQL and MariaDB: times are DATETIME(6), microseconds, in UTC (opendb.MySQL
-- runs its sessions in UTC). Text that is a key or is searched by equality is
-- compared exactly, as on SQLite and PostgreSQL: documents.id is VARBINARY
-- (utf8mb4's collations ignore trailing spaces, the default ones case too);
-- accounts.owner is utf8mb4_bin (case-sensitive). attrs is JSON: on MariaDB
-- a LONGTEXT with a json_valid CHECK (bad JSON is error 4025), on MySQL a
-- type of its own. Defaults on TEXT and JSON columns are expressions, which
-- MySQL 8 requires.

-- +goose Up
CREATE TABLE accounts (
    id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    owner      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    balance    BIGINT       NOT NULL DEFAULT 0,
    frozen     BOOLEAN      NOT NULL DEFAULT FALSE,
    version    BIGINT       NOT NULL CHECK (version > 0),
    created_at DATETIME(6)  NOT NULL,
    updated_at DATETIME(6)  NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX accounts_owner_idx ON accounts (owner);

CREATE TABLE documents (
    id         VARBINARY(255) NOT NULL PRIMARY KEY,
    title      TEXT           NOT NULL,
    attrs      JSON           NOT NULL DEFAULT ('{}'),
    version    BIGINT         NOT NULL CHECK (version > 0),
    created_at DATETIME(6)    NOT NULL,
    updated_at DATETIME(6)    NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE documents;
DROP TABLE accounts;
