package golangci_test

import (
	"strings"
	"testing"

	"github.com/golangci/plugin-module-register/register"

	"github.com/gormlock/gormlock/gormlockvet"
	_ "github.com/gormlock/gormlock/gormlockvet/golangci"
)

// TestPlugin builds the plugin as golangci-lint does: by name, from the
// settings of .golangci.yml.
func TestPlugin(t *testing.T) {
	newPlugin, err := register.GetPlugin("gormlockvet")
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPlugin(map[string]any{"table-prefix": "app_", "guard-gorm-updates": true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		gormlockvet.Analyzer.Flags.Set("table-prefix", "")
		gormlockvet.Analyzer.Flags.Set("guard-gorm-updates", "false")
	})
	as, err := p.BuildAnalyzers()
	if err != nil || len(as) != 1 || as[0] != gormlockvet.Analyzer {
		t.Fatalf("BuildAnalyzers() = %v, %v; want gormlockvet's analyzer", as, err)
	}
	if p.GetLoadMode() != register.LoadModeTypesInfo {
		t.Errorf("GetLoadMode() = %q, want %q", p.GetLoadMode(), register.LoadModeTypesInfo)
	}
	if got := gormlockvet.Analyzer.Flags.Lookup("table-prefix").Value.String(); got != "app_" {
		t.Errorf("table-prefix = %q, want app_", got)
	}
	if got := gormlockvet.Analyzer.Flags.Lookup("guard-gorm-updates").Value.String(); got != "true" {
		t.Errorf("guard-gorm-updates = %q, want true", got)
	}
	if _, err := newPlugin(map[string]any{"table_prefix": "x"}); err == nil || !strings.Contains(err.Error(), "table_prefix") {
		t.Errorf("an unknown setting: err = %v, want one naming it", err)
	}
}
