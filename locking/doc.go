// Package locking holds gormlock's error vocabulary, the classification of
// database driver errors into that vocabulary, and the retry policy used by the
// optimistic helpers.
//
// The smallest complete program:
//
//	package main
//
//	import (
//		"context"
//		"fmt"
//
//		"github.com/gormlock/gormlock/locking"
//	)
//
//	func main() {
//		attempts := 0
//		err := locking.RetryOnConflict(context.Background(), locking.DefaultRetryPolicy(), func(ctx context.Context) error {
//			attempts++        // read the record, change it, write it guarded by the version read
//			if attempts < 3 { // someone else wrote first
//				return &locking.StaleDataError{Table: "accounts", ID: 1, Expected: 1, Actual: 2, Op: "update"}
//			}
//			return nil
//		})
//		fmt.Println(attempts, err) // 3 <nil>
//	}
//
// Every error gormlock makes, and every database error it recognises
// (see [Classify]), matches one of the sentinels declared here
// ([ErrStaleData], [ErrNotFound], [ErrAlreadyExists],
// [ErrConstraintViolation], [ErrSchemaMismatch], ...) with errors.Is, and
// errors.As reaches the typed errors (*[StaleDataError], *[NotFoundError],
// *[DatabaseError], *[RetryExhaustedError]). What passes through
// unchanged is what gormlock cannot classify: the caller's own errors
// (a function's, a hook's), a context's error where nothing was sent,
// and the database errors Classify lists as such (a missing table, say). Driver errors are
// always kept as the cause, so errors.As(err, &pgErr) on a
// *pgconn.PgError, a sqlite3.Error or a *mysql.MySQLError
// (github.com/go-sql-driver/mysql) keeps working. The table of every
// sentinel, and what each outcome means for a write, is in the guide
// docs/operation-keys.md.
package locking
