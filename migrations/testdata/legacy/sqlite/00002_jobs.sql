-- Table of the example work-queue model (models.Job). SQLite cannot Claim
-- (no SKIP LOCKED), but the table exists on every dialect so the model does.

-- +goose Up
CREATE TABLE jobs (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    queue      TEXT     NOT NULL,
    payload    TEXT     NOT NULL,
    status     TEXT     NOT NULL,
    runs       INTEGER  NOT NULL DEFAULT 0,
    done_by    TEXT     NOT NULL DEFAULT '',
    version    INTEGER  NOT NULL CHECK (version > 0),
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL
);
CREATE INDEX jobs_queue_status_idx ON jobs (queue, status, id);

-- +goose Down
DROP TABLE jobs;
