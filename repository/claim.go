package repository

import (
	"context"
	"fmt"

	"gorm.io/gorm/clause"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/locking"
)

// Claim locks and returns up to n records matching opts that no other
// transaction has locked, skipping the locked ones instead of waiting
// (SELECT ... FOR UPDATE SKIP LOCKED): the work-queue read, where several
// workers each take different rows. opts are Where and OrderBy, as
// Find takes them; n is the limit. The records stay locked until the transaction in ctx
// ends, so the worker changes them (marks them done) in the same transaction.
// Fewer than n records, or none, is not an error.
//
// ctx must carry a transaction. SQLite has no row locks to skip: there Claim
// returns an error matching locking.ErrNotSupported.
func (r *Repository[T]) Claim(ctx context.Context, n int, opts ...ClaimOption) ([]T, error) {
	if n <= 0 {
		return nil, locking.Invalid("%s: Claim: n must be positive, got %d", r.m.table, n)
	}
	if err := r.m.caps.Check(dialect.SkipLocked); err != nil {
		return nil, fmt.Errorf("%s: Claim: %w", r.m.table, err)
	}
	db, err := r.lockTx(ctx, "Claim")
	if err != nil {
		return nil, err
	}
	find := make([]FindOption, 0, len(opts)+1)
	for _, opt := range opts {
		if opt != nil {
			find = append(find, claimAsFind{opt})
		}
	}
	q, err := r.findQuery(db.WithContext(ctx), append(find, Limit(n)))
	if err != nil {
		return nil, err
	}
	out := []T{}
	if err := q.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate, Options: clause.LockingOptionsSkipLocked}).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("%s: Claim: %w", r.m.table, locking.Classify(err))
	}
	return out, nil
}

// claimAsFind gives a ClaimOption to findQuery.
type claimAsFind struct{ o ClaimOption }

func (c claimAsFind) applyFind(q *findQuery) error { return c.o.applyClaim(q) }
