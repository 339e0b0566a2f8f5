package models_test

import (
	"testing"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/require"
)

func TestAttributesRoundTrip(t *testing.T) {
	for _, a := range []fixtures.Attributes{nil, {}, {"a_field": "a_value", "field1": "value1"}} {
		v, err := a.Value()
		require.NoError(t, err)
		var back fixtures.Attributes
		require.NoError(t, back.Scan(v))
		require.Equal(t, len(a), len(back))
		for k, val := range a {
			require.Equal(t, val, back[k])
		}
	}
	v, err := fixtures.Attributes(nil).Value()
	require.NoError(t, err)
	require.Equal(t, "{}", v, "nil is stored as an empty object, never NULL or ''")

	var a fixtures.Attributes
	require.NoError(t, a.Scan([]byte(`{"k":"v"}`)))
	require.Equal(t, fixtures.Attributes{"k": "v"}, a)
	require.NoError(t, a.Scan(nil))
	require.Nil(t, a)
	require.ErrorContains(t, a.Scan(42), "cannot scan int")
	require.ErrorContains(t, a.Scan("not json"), "attrs")
}
