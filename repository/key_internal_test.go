package repository

import (
	"fmt"
	"testing"
)

// keyString's shortcuts print what fmt.Sprint prints.
func TestKeyString(t *testing.T) {
	for _, id := range []any{"doc-1", "", int64(-42), int64(1 << 62), 7, int32(5), uint64(9), [2]byte{1, 2}} {
		if got, want := keyString(id), fmt.Sprint(id); got != want {
			t.Errorf("keyString(%T %v) = %q, want %q", id, id, got, want)
		}
	}
}
