//go:build race

package repository_test

// raceOn says the tests run with the race detector, under which sync.Pool
// drops some of what is put in it (a fraction of an allocation per call
// more, measured 0.4–0.5 in TestUpdateAllocatesLittleBeyondDatabaseSQL).
const raceOn = true
