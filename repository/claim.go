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
// workers each take different rows. opts are Where, OrderBy and the other
// ClaimOptions, as Find takes them; n is the limit. The records stay
// locked until the transaction in ctx ends, so the worker changes them
// (marks them done) in the same transaction. Fewer than n records, or none,
// is not an error.
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
	if _, err := r.lockTx(ctx, "Claim"); err != nil {
		return nil, err
	}
	db, _ := r.st.Conn(ctx)
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

// ClaimOption narrows or orders Claim: Where, OrderBy, Offset,
// IncludeDeleted, Preload. Claim's n is its limit, so Limit is not a
// ClaimOption.
type ClaimOption interface {
	applyClaim(*findQuery) error
}

// FilterOption is an option both Find and Claim take: Where, OrderBy,
// Offset.
type FilterOption interface {
	FindOption
	ClaimOption
}

// filterFunc is a FilterOption made of a function.
type filterFunc func(*findQuery) error

func (f filterFunc) applyFind(q *findQuery) error  { return f(q) }
func (f filterFunc) applyClaim(q *findQuery) error { return f(q) }
