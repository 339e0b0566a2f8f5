// Command gormlockvet reports the writes of gormlock-versioned models that
// no version guards.
package main

import (
	"golang.org/x/tools/go/analysis/singlechecker"

	"github.com/gormlock/gormlock/gormlockvet"
)

func main() { singlechecker.Main(gormlockvet.Analyzer) }
