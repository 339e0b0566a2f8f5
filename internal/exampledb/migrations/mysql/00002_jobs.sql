-- Table of the example work-queue model (models.Job), for Claim (SKIP
-- LOCKED: MySQL 8, MariaDB 10.6 and later).

-- +goose Up
CREATE TABLE jobs (
    id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    queue      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    payload    TEXT         NOT NULL,
    status     VARCHAR(32)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    runs       BIGINT       NOT NULL DEFAULT 0,
    done_by    VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    version    BIGINT       NOT NULL CHECK (version > 0),
    created_at DATETIME(6)  NOT NULL,
    updated_at DATETIME(6)  NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
-- The claim query: pending jobs of a queue, oldest first.
CREATE INDEX jobs_queue_status_idx ON jobs (queue, status, id);

-- +goose Down
DROP TABLE jobs;
