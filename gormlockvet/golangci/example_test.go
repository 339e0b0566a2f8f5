package golangci_test

import (
	"fmt"

	"github.com/gormlock/gormlock/gormlockvet/golangci"
)

// golangci-lint calls New with the plugin's settings from .golangci.yml;
// a setting it does not know is an error that names it.
func ExampleNew() {
	p, err := golangci.New(map[string]any{"singular-tables": true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer golangci.New(map[string]any{})
	analyzers, _ := p.BuildAnalyzers()
	fmt.Println(analyzers[0].Name, analyzers[0].Flags.Lookup("singular-tables").Value)

	_, err = golangci.New(map[string]any{"table-prefx": "app_"})
	fmt.Println(err != nil)
	// Output:
	// gormlockvet true
	// true
}
