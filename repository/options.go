package repository

import (
	"github.com/gormlock/gormlock/locking"
)

// WriteOption adjusts one Create, Update, Delete or ForceIncrement call.
// OpKey is one.
type WriteOption interface {
	applyWrite(*writeConfig) error
}

// MutateOption adjusts one Mutate, Upsert or MutateLocked call: Retry,
// Attempts, Locking (MutateLocked only) and OpKey.
type MutateOption interface {
	applyMutate(*mutateConfig) error
}

type writeConfig struct {
	op *OperationKey
}

type mutateConfig struct {
	retry    locking.RetryPolicy
	attempts *int
	lock     []LockOption // MutateLocked only
	op       *OperationKey
}

// mutateFunc is a MutateOption made of a function.
type mutateFunc func(*mutateConfig) error

func (f mutateFunc) applyMutate(c *mutateConfig) error { return f(c) }

// Retry sets the retry policy of this call, overriding the repository's. An
// invalid policy gives an error matching locking.ErrInvalidArgument.
func Retry(p locking.RetryPolicy) MutateOption {
	return mutateFunc(func(c *mutateConfig) error {
		if err := p.Validate(); err != nil {
			return err
		}
		c.retry = p
		return nil
	})
}

// Attempts stores in *n how many attempts the call ran, for metrics and
// tests.
func Attempts(n *int) MutateOption {
	return mutateFunc(func(c *mutateConfig) error {
		if n == nil {
			return locking.Invalid("Attempts: nil pointer")
		}
		c.attempts = n
		return nil
	})
}

func (r *Repository[T]) mutateConfig(opts []MutateOption) (mutateConfig, error) {
	c := mutateConfig{retry: r.retry}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt.applyMutate(&c); err != nil {
			return c, err
		}
	}
	return c, nil
}

func writeConfigOf(opts []WriteOption) (writeConfig, error) {
	var c writeConfig
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt.applyWrite(&c); err != nil {
			return c, err
		}
	}
	return c, nil
}
