//go:build race

package gormlockvet_test

// raceEnabled is true when the tests run with -race.
const raceEnabled = true
