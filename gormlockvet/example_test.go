package gormlockvet_test

import (
	"fmt"

	"github.com/gormlock/gormlock/gormlockvet"
)

// A vet tool of your own runs gormlockvet beside other analyzers, with
// golang.org/x/tools/go/analysis/multichecker:
//
//	func main() { multichecker.Main(gormlockvet.Analyzer, nilness.Analyzer) }
//
// Its flags follow the application's GORM NamingStrategy, so that it finds
// the tables of the models the application versions.
func Example() {
	a := gormlockvet.Analyzer
	if err := a.Flags.Set("table-prefix", "app_"); err != nil {
		fmt.Println(err)
		return
	}
	defer a.Flags.Set("table-prefix", "")
	fmt.Println(a.Name, a.Flags.Lookup("table-prefix").Value)
	// Output: gormlockvet app_
}
