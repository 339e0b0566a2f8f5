package repository_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/sqlitegate"
	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/repository"
)

// updateExtraAllocs is how many allocations a guarded Update of an
// Account makes beyond database/sql sending the same statement (rawUpdate)
// on the same pool, per database, as measured. What they are: the pinned
// connection of a write outside a transaction (database/sql's Conn and its
// release function: a statement database/sql may send again on another
// connection could run twice and be told once), the argument slice, the
// boxed field values GORM's schema reads, and on SQLite the version the
// process computes when the write lock is free (versionArg).
var updateExtraAllocs = map[string]float64{"sqlite": 8, "postgres": 7, "mariadb": 8}

// allocSink keeps the control's allocation on the heap.
var allocSink *[4]int

// A guarded Update outside a transaction allocates no more than
// updateExtraAllocs beyond database/sql's own statement: nothing per call
// for absent options, the RETURNING text, SQLite's turn at the gate or a
// version the database computes. The control: one more allocation per
// call shows in the count.
func TestUpdateAllocatesLittleBeyondDatabaseSQL(t *testing.T) {
	// Steady writes keep SQLite's writer connection (see
	// TestObserverCallSitesAllocateNothing); so does the test.
	defer sqlitegate.SetWriterLinger(time.Minute)()
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			db := testdb.Open(t, d)
			sqlDB, err := db.DB()
			require.NoError(t, err)
			ctx := context.Background()
			accounts, err := repository.New[fixtures.Account](db)
			require.NoError(t, err)
			mine, theirs := newAccount(t, accounts, "ann", 0), newAccount(t, accounts, "bob", 0)
			update := func() {
				mine.Balance++
				require.NoError(t, accounts.Update(ctx, mine))
			}
			raw := func() {
				theirs.Balance++
				ok, err := rawUpdate(ctx, sqlDB, d, theirs)
				require.NoError(t, err)
				require.True(t, ok)
			}
			oneMore := func() {
				update()
				allocSink = new([4]int)
			}
			// The least of five means, as in observerAllocs: the drivers'
			// goroutines only ever add.
			least := func(f func()) float64 {
				for range 20 {
					f() // the pools and caches settle
				}
				n := meanAllocs(100, f)
				for range 4 {
					n = min(n, meanAllocs(100, f))
				}
				return n
			}
			gl, base := least(update), least(raw)
			t.Logf("%s: Update %.2f allocations, database/sql %.2f", d, gl, base)
			// Within 0.9 of an allocation (the drivers' noise, as in
			// observerAllocs); under the race detector 1.5, where a
			// regression of one allocation shows only without it.
			margin := 0.9
			if raceOn {
				margin = 1.5
			}
			require.LessOrEqual(t, gl, base+updateExtraAllocs[d]+margin)
			require.InDelta(t, gl+1, least(oneMore), 0.9, "the control: one more allocation per call")
		})
	}
}
