package rest_test

import (
	"fmt"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/rest"
)

func ExampleETag() {
	fmt.Println(rest.ETag(3))
	// Output:
	// "3"
}

// ProblemOf turns a repository error into the status and the message a
// user may see: never the error's own text, which names versions and SQL.
func ExampleProblemOf() {
	stale := &locking.StaleDataError{Table: "tokens", ID: 7, Expected: 1795401280989319, Actual: 1795401280990001, Op: "update"}
	exhausted := &locking.RetryExhaustedError{Attempts: 10, Last: stale}
	for _, err := range []error{
		stale,
		exhausted,
		fmt.Errorf("tokens: Apply id=7: %w", locking.ErrConditionFailed),
		&locking.NotFoundError{Table: "tokens", ID: 7},
		fmt.Errorf("tokens: %w", locking.ErrCommitUnknown),
		&locking.StaleDataError{Table: "tokens", ID: 7, Expected: 0, Actual: 1795401280990001, Op: "update"},
	} {
		p := rest.ProblemOf(err)
		fmt.Println(p.Status, p.Detail)
	}
	// Output:
	// 409 the record kept changing; try again
	// 409 the record kept changing; try again
	// 409 the record does not allow this change as it is now
	// 404 no such record
	// 500 the write's outcome is unknown (the database connection failed after it was sent)
	// 428 the request carries no version of the record: send the version it was read at
}
