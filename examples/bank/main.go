// Command bank runs concurrent transfers between accounts, once with
// optimistic locking and once with pessimistic locking, prints each mode's
// throughput and checks that the total balance never changes.
//
// From the examples directory:
//
//	go run ./bank                                  # embedded SQLite, in a temporary file
//	go run ./bank -workers 32 -accounts 4          # more contention
//	go run ./bank -dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//	go run ./bank -dsn 'root@tcp(127.0.0.1:3306)/test'    # MySQL or MariaDB
//	go run ./bank -mode unguarded                  # what happens without either
//
// or from the repository root, go run ./examples/bank with the same flags.
//
// A transfer moves a random amount (1 to 10) from one random account to
// another, refusing to overdraw. The modes:
//
//   - optimistic: in one transaction, read both accounts with Get and write
//     both with UpdateMany (guarded by each row's version, in key order); a
//     transfer that finds a row changed meanwhile (locking.ErrStaleData) runs
//     again from the start, with backoff.
//   - pessimistic: in one transaction, lock both rows with LockRows
//     (SELECT ... FOR UPDATE in key order, so opposite transfers cannot
//     deadlock; SQLite's write lock), then write them with UpdateMany.
//   - unguarded: plain GORM reads and writes with no version and no lock, the
//     negative control: concurrent transfers overwrite each other and money
//     appears or disappears.
//
// The program creates the accounts table with GORM's AutoMigrate when it is
// missing. Each mode starts from fresh accounts holding 1000 each, and
// deletes them when it ends; the program exits with status 1 when a guarded
// mode's total changed.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/opendb/mysql"
	"github.com/gormlock/gormlock/opendb/postgres"
	"github.com/gormlock/gormlock/opendb/sqlite"
	"github.com/gormlock/gormlock/repository"
)

// Account is a balance that concurrent transfers fight over. models.Model
// adds an auto-increment id, the version that every guarded write checks
// and advances, and the creation and update times.
type Account struct {
	models.Model
	Owner   string `gorm:"not null;index"`
	Balance int64  `gorm:"not null"`
}

// The transfer modes.
const (
	Optimistic  = "optimistic"
	Pessimistic = "pessimistic"
	Unguarded   = "unguarded"
)

const startBalance = 1000

// config is one run of the program.
type config struct {
	Modes     []string
	Workers   int // concurrent transfer loops
	Transfers int // transfers per worker
	Accounts  int
}

func (c config) validate() error {
	if len(c.Modes) == 0 {
		return errors.New("no mode given")
	}
	for _, m := range c.Modes {
		if m != Optimistic && m != Pessimistic && m != Unguarded {
			return fmt.Errorf("unknown mode %q (want optimistic, pessimistic or unguarded)", m)
		}
	}
	switch {
	case c.Workers < 1:
		return fmt.Errorf("-workers must be at least 1, got %d", c.Workers)
	case c.Transfers < 1:
		return fmt.Errorf("-transfers must be at least 1, got %d", c.Transfers)
	case c.Accounts < 2:
		return fmt.Errorf("-accounts must be at least 2, got %d", c.Accounts)
	}
	return nil
}

// result is what one mode did.
type result struct {
	Mode        string
	Transfers   int64 // applied
	Declined    int64 // refused: not enough money
	Attempts    int64 // transactions run, retries included
	Elapsed     time.Duration
	TotalBefore int64
	TotalAfter  int64
}

// Holds reports whether the total balance is unchanged.
func (r result) Holds() bool { return r.TotalBefore == r.TotalAfter }

func main() {
	dbPath := flag.String("db", "", "SQLite database `file` to use (default: a temporary file, removed at exit)")
	dsn := flag.String("dsn", "", "PostgreSQL or MySQL/MariaDB `DSN` to use instead of SQLite: postgres://user@host:5432/db?sslmode=disable, mysql://user@host:3306/db or user@tcp(host:3306)/db")
	mode := flag.String("mode", Optimistic+","+Pessimistic, "comma-separated `modes`: optimistic, pessimistic, unguarded")
	cfg := config{}
	flag.IntVar(&cfg.Workers, "workers", 8, "concurrent `workers`")
	flag.IntVar(&cfg.Transfers, "transfers", 500, "transfers per worker")
	flag.IntVar(&cfg.Accounts, "accounts", 10, "number of accounts")
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	cfg.Modes = strings.Split(*mode, ",")
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "bank:", err)
		os.Exit(2)
	}
	target := *dsn
	switch {
	case *dbPath != "" && *dsn != "":
		fmt.Fprintln(os.Stderr, "bank: give -db or -dsn, not both")
		os.Exit(2)
	case *dsn != "" && server(*dsn) == "":
		fmt.Fprintln(os.Stderr, "bank: -dsn must be a postgres:// or postgresql:// URL, a mysql:// URL or a user@tcp(host:port)/dbname DSN (use -db for a SQLite file)")
		os.Exit(2)
	case *dbPath != "":
		target = *dbPath
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	results, err := run(ctx, os.Stdout, target, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bank:", err)
		stop()
		os.Exit(1)
	}
	for _, r := range results {
		if r.Mode != Unguarded && !r.Holds() {
			stop()
			os.Exit(1)
		}
	}
}

// run opens the database target names (see open), runs every mode of cfg
// and prints a line per mode to w.
func run(ctx context.Context, w io.Writer, target string, cfg config) (results []result, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	db, closeDB, err := open(target)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, closeDB()) }()
	if err := db.WithContext(ctx).AutoMigrate(&Account{}); err != nil {
		return nil, err
	}
	accounts, err := repository.New[Account](db, repository.WithRetryPolicy(locking.RetryPolicy{
		MaxAttempts: 1000, BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond,
	}))
	if err != nil {
		return nil, err
	}
	if err := accounts.VerifySchema(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "gormlock bank: %d workers x %d transfers between %d accounts on %s\n",
		cfg.Workers, cfg.Transfers, cfg.Accounts, db.Dialector.Name())
	for _, mode := range cfg.Modes {
		r, err := runMode(ctx, db, accounts, cfg, mode)
		if err != nil {
			return results, fmt.Errorf("%s: %w", mode, err)
		}
		results = append(results, r)
		verdict := "total unchanged"
		if !r.Holds() {
			verdict = fmt.Sprintf("TOTAL CHANGED by %+d", r.TotalAfter-r.TotalBefore)
		}
		fmt.Fprintf(w, "  %-11s %5d transfers (%d declined) in %6.2fs = %7.0f/s, %.2f attempts each; total %d -> %d: %s\n",
			r.Mode, r.Transfers, r.Declined, r.Elapsed.Seconds(), float64(r.Transfers+r.Declined)/r.Elapsed.Seconds(),
			float64(r.Attempts)/float64(r.Transfers+r.Declined), r.TotalBefore, r.TotalAfter, verdict)
	}
	return results, nil
}

// errDeclined ends a transfer that would overdraw the account.
var errDeclined = errors.New("declined: not enough money")

// runMode creates fresh accounts, runs the transfers of one mode and deletes
// the accounts again.
func runMode(ctx context.Context, db *gorm.DB, accounts *repository.Repository[Account], cfg config, mode string) (r result, err error) {
	owner, err := randomOwner()
	if err != nil {
		return r, err
	}
	defer func() {
		//gormlockvet:ignore the run's own accounts, deleted once no transfer runs
		err = errors.Join(err, db.WithContext(context.WithoutCancel(ctx)).Where("owner = ?", owner).Delete(&Account{}).Error)
	}()
	ids := make([]int64, cfg.Accounts)
	for i := range ids {
		a := &Account{Owner: owner, Balance: startBalance}
		if err := accounts.Create(ctx, a); err != nil {
			return r, err
		}
		ids[i] = a.ID
	}
	r = result{Mode: mode, TotalBefore: int64(cfg.Accounts) * startBalance}

	var transfers, declined, attempts atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, cfg.Workers)
	start := time.Now()
	for w := range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := mrand.New(mrand.NewPCG(uint64(w), uint64(start.UnixNano())))
			for range cfg.Transfers {
				i := rng.IntN(len(ids))
				j := (i + 1 + rng.IntN(len(ids)-1)) % len(ids)
				n, err := transfer(ctx, db, accounts, mode, ids[i], ids[j], 1+rng.Int64N(10))
				attempts.Add(int64(n))
				switch {
				case errors.Is(err, errDeclined):
					declined.Add(1)
				case err != nil:
					errs[w] = err
					return
				default:
					transfers.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	r.Elapsed = time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return r, err
	}
	r.Transfers, r.Declined, r.Attempts = transfers.Load(), declined.Load(), attempts.Load()
	if err := db.WithContext(ctx).Model(&Account{}).Select("COALESCE(SUM(balance), 0)").Where("owner = ?", owner).
		Scan(&r.TotalAfter).Error; err != nil {
		return r, err
	}
	return r, nil
}

// transfer moves amount from one account to another in the given mode and
// returns how many transactions it ran.
func transfer(ctx context.Context, db *gorm.DB, accounts *repository.Repository[Account], mode string, from, to, amount int64) (int, error) {
	if mode == Unguarded {
		return 1, unguardedTransfer(ctx, db, from, to, amount)
	}
	move := func(a, b *Account) error {
		if a.ID != from {
			a, b = b, a
		}
		if a.Balance < amount {
			return errDeclined
		}
		a.Balance -= amount
		b.Balance += amount
		return nil
	}
	attempts := 0
	// Both modes retry what the database or the guard report as a lost race
	// (stale data, deadlock, serialization failure) from a fresh transaction.
	err := locking.OnError(ctx, locking.RetryPolicy{MaxAttempts: 1000, BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond},
		locking.IsRetryable, func(ctx context.Context) error {
			attempts++
			return repository.RunInTx(ctx, db, func(ctx context.Context) error {
				var a, b *Account
				if mode == Pessimistic {
					locked, err := accounts.LockRows(ctx, []any{from, to})
					if err != nil {
						return err
					}
					a, b = &locked[0], &locked[1]
				} else {
					var err error
					if a, err = accounts.Get(ctx, from); err != nil {
						return err
					}
					if b, err = accounts.Get(ctx, to); err != nil {
						return err
					}
				}
				if err := move(a, b); err != nil {
					return err
				}
				return accounts.UpdateMany(ctx, []*Account{a, b})
			})
		})
	return attempts, err
}

// unguardedTransfer is the negative control: read, compute, write back, with
// nothing to stop a concurrent transfer's write from being overwritten.
func unguardedTransfer(ctx context.Context, db *gorm.DB, from, to, amount int64) error {
	var a, b Account
	if err := db.WithContext(ctx).Take(&a, from).Error; err != nil {
		return err
	}
	if err := db.WithContext(ctx).Take(&b, to).Error; err != nil {
		return err
	}
	if a.Balance < amount {
		return errDeclined
	}
	//gormlockvet:ignore the negative control: this write is meant to lose updates
	if err := db.WithContext(ctx).Model(&a).Update("balance", a.Balance-amount).Error; err != nil {
		return err
	}
	//gormlockvet:ignore the negative control
	return db.WithContext(ctx).Model(&b).Update("balance", b.Balance+amount).Error
}

func randomOwner() (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "bank-" + hex.EncodeToString(b), nil
}

// open opens the database target names: PostgreSQL for a postgres:// or
// postgresql:// URL, MySQL or MariaDB for a mysql:// URL or a DSN such as
// user:password@tcp(host:3306)/dbname, and otherwise the SQLite file at
// the path target (created if missing). An empty target is a SQLite file
// in a new temporary directory. closeDB closes the database and removes
// that directory.
func open(target string) (db *gorm.DB, closeDB func() error, err error) {
	removeDir := func() error { return nil }
	if target == "" {
		dir, err := os.MkdirTemp("", "gormlock-bank-")
		if err != nil {
			return nil, nil, err
		}
		removeDir = func() error { return os.RemoveAll(dir) }
		target = filepath.Join(dir, "bank.db")
	}
	switch server(target) {
	case "postgres":
		db, err = postgres.Open(target)
	case "mysql":
		db, err = mysql.Open(target)
	default:
		db, err = sqlite.Open(target)
	}
	if err != nil {
		return nil, nil, errors.Join(err, removeDir())
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, nil, errors.Join(err, removeDir())
	}
	return db, func() error { return errors.Join(sqlDB.Close(), removeDir()) }, nil
}

// server names the database server dsn is for: "postgres" for a postgres://
// or postgresql:// URL, "mysql" for a mysql:// URL or a DSN with a network
// address such as user:password@tcp(host:3306)/dbname, and "" for anything
// else.
func server(dsn string) string {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return "postgres"
	case strings.HasPrefix(dsn, "mysql://"), strings.Contains(dsn, "tcp("), strings.Contains(dsn, "unix("):
		return "mysql"
	}
	return ""
}
