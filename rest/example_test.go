package rest_test

import (
	"fmt"

	"github.com/gormlock/gormlock/rest"
)

func ExampleETag() {
	fmt.Println(rest.ETag(3))
	// Output:
	// "3"
}
