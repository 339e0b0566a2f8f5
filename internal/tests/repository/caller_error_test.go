package repository_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// fn's own error is never retried and comes back as fn returned it, even
// when it wraps locking.ErrStaleData (an application that re-checks
// something of its own) and the attempt ran in a transaction gormlock
// started (locked attempts: MutateRowLocked, and Mutate on a hot record),
// whose end wraps the attempt's error again. Nothing is written.
func TestCallerErrorWrappingStaleIsNotRetried(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		accounts, _ := repos(t, db)
		mine := fmt.Errorf("quota re-checked: %w", locking.ErrStaleData)
		calls := []struct {
			name string
			run  func(id int64, fn func(*fixtures.Account) error, rep *repository.MutateReport) error
		}{
			{"Mutate", func(id int64, fn func(*fixtures.Account) error, rep *repository.MutateReport) error {
				_, err := accounts.Mutate(ctx, id, fn, repository.Report(rep))
				return err
			}},
			{"MutateRowLocked", func(id int64, fn func(*fixtures.Account) error, rep *repository.MutateReport) error {
				_, err := accounts.MutateRowLocked(ctx, id, fn, repository.Report(rep))
				return err
			}},
			{"Mutate with a key", func(id int64, fn func(*fixtures.Account) error, rep *repository.MutateReport) error {
				_, err := accounts.Mutate(ctx, id, fn, repository.Report(rep), repository.OpKey(fmt.Sprintf("caller-error-%d", id)))
				return err
			}},
		}
		for _, c := range calls {
			t.Run(c.name, func(t *testing.T) {
				a := newAccount(t, accounts, "caller", 100)
				fnCalls := 0
				var rep repository.MutateReport
				err := c.run(a.ID, func(e *fixtures.Account) error {
					fnCalls++
					e.Balance = 0
					return mine
				}, &rep)
				require.Error(t, err)
				assert.Same(t, mine, err, "fn's error as fn returned it: %v", err)
				assert.Equal(t, 1, fnCalls, "never retried")
				assert.Equal(t, 1, rep.Attempts)
				assert.False(t, errors.Is(err, locking.ErrRetriesExhausted))
				balance, version, _ := rawAccount(t, db, a.ID)
				assert.EqualValues(t, 100, balance, "nothing written")
				assert.Equal(t, a.Version, version)
			})
		}
	})
}
