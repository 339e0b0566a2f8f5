package linearize_test

import (
	"bytes"
	"fmt"
	"time"

	"github.com/gormlock/gormlock/internal/tests/linearize"
)

// Record operations as they complete, then merge and check the histories.
// Here two clients update the same record concurrently: one wins, the
// other is refused as stale, and a third client's update is lost in a
// timeout whose outcome is unknown.
func ExampleCheck() {
	var file1, file2 bytes.Buffer
	rec1, rec2 := linearize.NewRecorder(&file1), linearize.NewRecorder(&file2)

	c := rec1.Begin(linearize.Op{Client: 0, Key: "account-1", Kind: linearize.KindCreate, Value: 100})
	_ = c.End(linearize.ResultOK, 0, 1) // created at version 1

	a := rec1.Begin(linearize.Op{Client: 0, Key: "account-1", Kind: linearize.KindUpdate, Expected: 1, Value: 150})
	b := rec2.Begin(linearize.Op{Client: 1, Key: "account-1", Kind: linearize.KindUpdate, Expected: 1, Value: 80})
	u := rec2.Begin(linearize.Op{Client: 2, Key: "account-1", Kind: linearize.KindIncrement, Delta: 5})
	_ = a.End(linearize.ResultOK, 0, 2) // won: version 2
	_ = b.End(linearize.ResultStale, 0, 0)
	_ = u.End(linearize.ResultUnknown, 0, 0)

	r := rec1.Begin(linearize.Op{Client: 0, Key: "account-1", Kind: linearize.KindRead})
	_ = r.End(linearize.ResultOK, 155, 3) // the increment happened after all

	ops, err := linearize.ReadHistory(&file1, &file2)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := linearize.Check(ops, time.Minute)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Outcome, res.Ops, "operations,", res.Unknown, "unknown")

	// A later read of the stale update's value, which nobody wrote, is a
	// violation.
	last := ops[len(ops)-1].Return
	ops = append(ops, linearize.Op{Client: 1, Key: "account-1", Kind: linearize.KindRead,
		Result: linearize.ResultOK, OutValue: 80, OutVersion: 4, Call: last + 1, Return: last + 2})
	res, _ = linearize.Check(ops, time.Minute)
	fmt.Println(res.Outcome)
	// Output:
	// Ok 5 operations, 1 unknown
	// Illegal
}
