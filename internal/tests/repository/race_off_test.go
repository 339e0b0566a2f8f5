//go:build !race

package repository_test

// raceOn says the tests run with the race detector (see race_on_test.go).
const raceOn = false
