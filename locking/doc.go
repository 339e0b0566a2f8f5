// Package locking holds gormlock's error vocabulary, the classification of
// database driver errors into that vocabulary, and the retry policy used by the
// optimistic helpers.
//
// Every error gormlock returns can be inspected with errors.Is against the
// sentinels declared here (ErrStaleData, ErrNotFound, ErrAlreadyExists, ...)
// and with errors.As against the typed errors (*StaleDataError,
// *NotFoundError, *DatabaseError, *RetryExhaustedError). Driver errors are
// always kept as the cause, so errors.As(err, &pgErr) on a
// *pgconn.PgError, a sqlite3.Error or a *mysql.MySQLError
// (github.com/go-sql-driver/mysql) keeps working.
package locking
