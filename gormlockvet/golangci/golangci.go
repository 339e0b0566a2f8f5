// Package golangci registers gormlockvet as a golangci-lint module plugin
// named "gormlockvet". A custom golangci-lint binary built with it
// (golangci-lint custom, .custom-gcl.yml) runs the analyzer with the other
// linters, and gopls-like editors that run golangci-lint show its reports:
//
//	# .custom-gcl.yml
//	version: v2.15.0
//	plugins:
//	  - module: github.com/gormlock/gormlock/gormlockvet
//	    import: github.com/gormlock/gormlock/gormlockvet/golangci
//	    version: v0.1.0
//
//	# .golangci.yml
//	linters:
//	  enable: [gormlockvet]
//	  settings:
//	    custom:
//	      gormlockvet:
//	        type: module
//	        settings:
//	          table-prefix: ""          # the application's GORM NamingStrategy
//	          singular-tables: false
//	          guard-gorm-updates: false # every *gorm.DB has GuardGORMUpdates
//
// The settings are the analyzer's flags.
package golangci

import (
	"fmt"
	"strconv"

	"github.com/golangci/plugin-module-register/register"
	"golang.org/x/tools/go/analysis"

	"github.com/gormlock/gormlock/gormlockvet"
)

func init() { register.Plugin("gormlockvet", New) }

// Settings are the plugin's settings in .golangci.yml.
type Settings struct {
	TablePrefix      string `json:"table-prefix"`
	SingularTables   bool   `json:"singular-tables"`
	GuardGORMUpdates bool   `json:"guard-gorm-updates"`
}

// New returns the plugin with its settings; an unknown setting is an
// error naming it.
func New(settings any) (register.LinterPlugin, error) {
	s, err := register.DecodeSettings[Settings](settings)
	if err != nil {
		return nil, fmt.Errorf("gormlockvet: %w", err)
	}
	for name, value := range map[string]string{
		"table-prefix":       s.TablePrefix,
		"singular-tables":    strconv.FormatBool(s.SingularTables),
		"guard-gorm-updates": strconv.FormatBool(s.GuardGORMUpdates),
	} {
		if err := gormlockvet.Analyzer.Flags.Set(name, value); err != nil {
			return nil, fmt.Errorf("gormlockvet: setting %s: %w", name, err)
		}
	}
	return plugin{}, nil
}

type plugin struct{}

// BuildAnalyzers returns gormlockvet's analyzer.
func (plugin) BuildAnalyzers() ([]*analysis.Analyzer, error) {
	return []*analysis.Analyzer{gormlockvet.Analyzer}, nil
}

// GetLoadMode asks for type information, which the analyzer needs.
func (plugin) GetLoadMode() string { return register.LoadModeTypesInfo }
