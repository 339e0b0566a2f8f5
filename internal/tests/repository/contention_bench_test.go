package repository_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// BenchmarkContention compares the optimistic read-modify-write (Mutate,
// default retry policy) with the pessimistic one (MutateRowLocked) on one hot
// row and on 1,000 rows, with 1, 8 and 32 workers. Each operation
// increments a random row's balance. It reports operations per second,
// attempts per operation and failed operations (retries exhausted) per
// operation, and checks after every run that no increment was lost: the
// balances grew by exactly the number of successful operations.
//
//	go test ./repository -run '^$' -bench Contention -benchtime 2s
func BenchmarkContention(b *testing.B) {
	for _, dialect := range testdb.Dialects {
		b.Run("db="+dialect, func(b *testing.B) {
			db := testdb.Open(b, dialect)
			accounts, err := repository.New[fixtures.Account](db)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for _, keys := range []int{1, 1000} {
				owner := fmt.Sprintf("contention-%d", keys)
				ids := make([]int64, keys)
				for i := range ids {
					a := &fixtures.Account{Owner: owner}
					if err := accounts.Create(ctx, a); err != nil {
						b.Fatal(err)
					}
					ids[i] = a.ID
				}
				sum := func(b *testing.B) int64 {
					var s int64
					if err := db.Raw("SELECT COALESCE(SUM(balance), 0) FROM accounts WHERE owner = ?", owner).Scan(&s).Error; err != nil {
						b.Fatal(err)
					}
					return s
				}
				for _, workers := range []int{1, 8, 32} {
					for _, mode := range []string{"optimistic", "pessimistic"} {
						b.Run(fmt.Sprintf("keys=%d/workers=%d/mode=%s", keys, workers, mode), func(b *testing.B) {
							inc := func(a *fixtures.Account) error { a.Balance++; return nil }
							op := func(id int64, n *int) error {
								var rep repository.MutateReport
								defer func() { *n = rep.Attempts }()
								if mode == "optimistic" {
									_, err := accounts.Mutate(ctx, id, inc, repository.Report(&rep))
									return err
								}
								_, err := accounts.MutateRowLocked(ctx, id, inc, repository.Report(&rep))
								return err
							}
							before := sum(b)
							var next, ok, failed, attempts atomic.Int64
							var wg sync.WaitGroup
							errs := make([]error, workers)
							b.ResetTimer()
							start := time.Now()
							for w := range workers {
								wg.Add(1)
								go func() {
									defer wg.Done()
									rng := rand.New(rand.NewPCG(uint64(w), uint64(keys)))
									for next.Add(1) <= int64(b.N) {
										var n int
										err := op(ids[rng.IntN(len(ids))], &n)
										attempts.Add(int64(n))
										switch {
										case err == nil:
											ok.Add(1)
										case errors.Is(err, locking.ErrRetriesExhausted):
											failed.Add(1)
										default:
											errs[w] = err
											return
										}
									}
								}()
							}
							wg.Wait()
							elapsed := time.Since(start)
							b.StopTimer()
							if err := errors.Join(errs...); err != nil {
								b.Fatal(err)
							}
							if got := sum(b) - before; got != ok.Load() {
								b.Fatalf("lost updates: %d successful increments, balances grew by %d", ok.Load(), got)
							}
							b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
							b.ReportMetric(float64(attempts.Load())/float64(b.N), "attempts/op")
							b.ReportMetric(float64(failed.Load())/float64(b.N), "failed/op")
						})
					}
				}
			}
		})
	}
}
