package olddrivers_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	drivermysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgconn"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/migrations"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// Account is the model of the tests.
type Account struct {
	models.Model
	Owner   string `gorm:"uniqueIndex;size:64;not null"`
	Balance int64  `gorm:"not null"`
}

// serverDSN returns the DSN in env, skipping the test without one (failing
// it under CI=true, as the other test modules do).
func serverDSN(t *testing.T, env string) string {
	t.Helper()
	dsn := os.Getenv(env)
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s is not set", env)
		}
		t.Skipf("set %s to run the tests on this server", env)
	}
	return dsn
}

func name() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "gl_old_" + hex.EncodeToString(b)
}

func closeDB(db *gorm.DB) {
	if sqlDB, err := db.DB(); err == nil {
		_ = sqlDB.Close()
	}
}

// postgresDB opens a new schema of the configured PostgreSQL server with
// gorm.io/driver/postgres v1.4.1 (pgx v4), as an application that opens
// the database itself does, with the DSN as it is.
func postgresDB(t *testing.T) *gorm.DB {
	t.Helper()
	dsn := serverDSN(t, "GORMLOCK_POSTGRES_DSN")
	admin, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	schema := name()
	if err := admin.Exec("CREATE SCHEMA " + schema).Error; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.Exec("DROP SCHEMA " + schema + " CASCADE").Error
		closeDB(admin)
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	db, err := gorm.Open(postgres.Open(u.String()), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeDB(db) })
	return db
}

// mariaDB opens a new database of the configured MariaDB server with
// gorm.io/driver/mysql v1.4.7 (go-sql-driver/mysql v1.7.0), with the settings
// docs/adopting.md lists for a DSN written by hand.
func mariaDB(t *testing.T) *gorm.DB {
	t.Helper()
	cfg, err := drivermysql.ParseDSN(serverDSN(t, "GORMLOCK_MARIADB_DSN"))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := gorm.Open(mysql.Open(cfg.FormatDSN()), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	dbName := name()
	if err := admin.Exec("CREATE DATABASE " + dbName + " CHARACTER SET utf8mb4").Error; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.Exec("DROP DATABASE " + dbName).Error
		closeDB(admin)
	})
	cfg.DBName = dbName
	cfg.ClientFoundRows = true
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.Collation = "utf8mb4_general_ci"
	cfg.Params = map[string]string{
		"charset":   "utf8mb4",
		"time_zone": "'+00:00'",
		"sql_mode":  "CONCAT(@@sql_mode, ',STRICT_ALL_TABLES')",
	}
	precision := 6
	db, err := gorm.Open(mysql.New(mysql.Config{DSN: cfg.FormatDSN(), DefaultDatetimePrecision: &precision}), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeDB(db) })
	return db
}

// each runs fn on a fresh, migrated database of each server, opened with
// the old drivers.
func each(t *testing.T, fn func(t *testing.T, db *gorm.DB, accounts *repository.Repository[Account])) {
	for server, open := range map[string]func(*testing.T) *gorm.DB{"postgres": postgresDB, "mariadb": mariaDB} {
		t.Run(server, func(t *testing.T) {
			db := open(t)
			if err := migrations.Up(context.Background(), db); err != nil {
				t.Fatal(err)
			}
			if err := db.AutoMigrate(&Account{}); err != nil {
				t.Fatal(err)
			}
			accounts, err := repository.New[Account](db, repository.WithLeases())
			if err != nil {
				t.Fatal(err)
			}
			fn(t, db, accounts)
		})
	}
}

// A stale write is refused with both versions, and the record keeps the
// write that won; the versions are the database's clock.
func TestGuardedWrites(t *testing.T) {
	each(t, func(t *testing.T, db *gorm.DB, accounts *repository.Repository[Account]) {
		ctx := context.Background()
		before := time.Now()
		ann := &Account{Owner: "ann", Balance: 100}
		if err := accounts.Create(ctx, ann); err != nil {
			t.Fatal(err)
		}
		if d := time.Duration(ann.Version-before.UnixMicro()) * time.Microsecond; d < -10*time.Second || d > 10*time.Second {
			t.Errorf("version %d is not the clock in microseconds (%v from now)", ann.Version, d)
		}
		stale := *ann
		ann.Balance = 70
		if err := accounts.Update(ctx, ann); err != nil {
			t.Fatal(err)
		}
		stale.Balance = 150
		err := accounts.Update(ctx, &stale)
		var se *locking.StaleDataError
		if !errors.Is(err, locking.ErrStaleData) || !errors.As(err, &se) || se.Expected != stale.Version || se.Actual != ann.Version {
			t.Fatalf("stale update: %v", err)
		}
		got, err := accounts.Get(ctx, ann.ID)
		if err != nil || got.Balance != 70 || got.Version != ann.Version {
			t.Fatalf("after: %+v, %v", got, err)
		}
		if err := accounts.Delete(ctx, &stale); !errors.Is(err, locking.ErrStaleData) {
			t.Fatalf("stale delete: %v", err)
		}
	})
}

// Concurrent Mutates lose no increment; the same read-modify-write with
// plain GORM, interleaved, loses one (the negative control).
func TestMutateLosesNothing(t *testing.T) {
	each(t, func(t *testing.T, db *gorm.DB, accounts *repository.Repository[Account]) {
		ctx := context.Background()
		acct := &Account{Owner: "counter"}
		if err := accounts.Create(ctx, acct); err != nil {
			t.Fatal(err)
		}
		const workers, each = 8, 10
		start := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var applied int64
		var failures []error
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range each {
					_, err := accounts.Mutate(ctx, acct.ID, func(a *Account) error { a.Balance++; return nil })
					mu.Lock()
					if err == nil {
						applied++
					} else {
						failures = append(failures, err)
					}
					mu.Unlock()
				}
			}()
		}
		close(start)
		wg.Wait()
		got, err := accounts.Get(ctx, acct.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Balance != applied || applied != workers*each {
			t.Fatalf("balance %d, %d Mutates applied of %d; errors: %v", got.Balance, applied, workers*each, failures)
		}

		var first, second Account
		db.First(&first, acct.ID)
		db.First(&second, acct.ID)
		first.Balance++
		second.Balance++
		db.Model(&Account{}).Where("id = ?", acct.ID).Update("balance", first.Balance)
		db.Model(&Account{}).Where("id = ?", acct.ID).Update("balance", second.Balance)
		var after Account
		db.First(&after, acct.ID)
		if after.Balance != applied+1 {
			t.Fatalf("the unguarded control: balance %d after two increments of %d, want one lost (%d)", after.Balance, applied, applied+1)
		}
	})
}

// The old drivers' errors are classified by their codes, and kept.
func TestErrorsAreClassified(t *testing.T) {
	each(t, func(t *testing.T, db *gorm.DB, accounts *repository.Repository[Account]) {
		ctx := context.Background()
		if err := accounts.Create(ctx, &Account{Owner: "ann"}); err != nil {
			t.Fatal(err)
		}
		err := accounts.Create(ctx, &Account{Owner: "ann"})
		if !errors.Is(err, locking.ErrAlreadyExists) {
			t.Fatalf("duplicate: %v", err)
		}
		if code := locking.Code(err); code != "23505" && code != "1062" {
			t.Errorf("duplicate: code %q", code)
		}
		var pgErr *pgconn.PgError
		var myErr *drivermysql.MySQLError
		if !errors.As(err, &pgErr) && !errors.As(err, &myErr) {
			t.Errorf("duplicate: the driver's error is not kept: %#v", err)
		}

		// A row locked in a transaction: NoWait is refused at once.
		acct := &Account{Owner: "bob"}
		if err := accounts.Create(ctx, acct); err != nil {
			t.Fatal(err)
		}
		locked := make(chan struct{})
		release := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- repository.RunInTx(ctx, db, func(ctx context.Context) error {
				if _, err := accounts.LockRow(ctx, acct.ID); err != nil {
					close(locked)
					return err
				}
				close(locked)
				<-release
				return nil
			})
		}()
		<-locked
		err = repository.RunInTx(ctx, db, func(ctx context.Context) error {
			_, err := accounts.LockRow(ctx, acct.ID, repository.NoWait())
			return err
		})
		close(release)
		if txErr := <-done; txErr != nil {
			t.Fatal(txErr)
		}
		if !errors.Is(err, locking.ErrLocked) {
			t.Fatalf("NoWait on a locked row: %v", err)
		}
	})
}

// A lease keeps other owners out until it expires, by the database's
// clock.
func TestLeases(t *testing.T) {
	each(t, func(t *testing.T, db *gorm.DB, accounts *repository.Repository[Account]) {
		ctx := context.Background()
		acct := &Account{Owner: "carol"}
		if err := accounts.Create(ctx, acct); err != nil {
			t.Fatal(err)
		}
		_, lease, err := accounts.Leases().Acquire(ctx, acct.ID, "worker-1", repository.TTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = accounts.Leases().Acquire(ctx, acct.ID, "worker-2")
		if time.Now().Before(lease.ExpiresAt.Add(-300*time.Millisecond)) && !errors.Is(err, locking.ErrLeased) {
			t.Fatalf("a second owner during the lease: %v", err)
		}
		if _, err := accounts.Mutate(ctx, acct.ID, func(a *Account) error { a.Balance++; return nil }); time.Now().Before(lease.ExpiresAt.Add(-300*time.Millisecond)) && !errors.Is(err, locking.ErrLeased) {
			t.Fatalf("a write during the lease: %v", err)
		}
		time.Sleep(time.Until(lease.ExpiresAt) + 100*time.Millisecond)
		if _, _, err := accounts.Leases().Acquire(ctx, acct.ID, "worker-2"); err != nil {
			t.Fatalf("after the lease expired: %v", err)
		}
	})
}

// RunInTx ends its transaction on the server before it returns when ctx
// ends while fn's statement sleeps, with the old drivers too (pgx v4's
// cancel request, KILL QUERY through go-sql-driver/mysql v1.7): right
// after it returns, another session's FOR UPDATE NOWAIT gets the row.
func TestRunInTxCancelledMidStatement(t *testing.T) {
	each(t, func(t *testing.T, db *gorm.DB, accounts *repository.Repository[Account]) {
		sleep := "SELECT pg_sleep(2)"
		if db.Dialector.Name() == "mysql" {
			sleep = "SELECT SLEEP(2)"
		}
		acct := &Account{Owner: "cancel", Balance: 1}
		if err := accounts.Create(context.Background(), acct); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			ctx, cancel := context.WithCancel(context.Background())
			timer := time.AfterFunc(time.Duration(20+i)*time.Millisecond, cancel)
			err := repository.RunInTx(ctx, db, func(ctx context.Context) error {
				_, err := accounts.Mutate(ctx, acct.ID, func(a *Account) error { a.Balance++; return nil })
				if err != nil {
					return err
				}
				return repository.Tx(ctx, db).Exec(sleep).Error
			})
			lockErr := db.Transaction(func(tx *gorm.DB) error {
				var ids []int64
				return tx.Raw("SELECT id FROM accounts WHERE id = ? FOR UPDATE NOWAIT", acct.ID).Scan(&ids).Error
			})
			timer.Stop()
			cancel()
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("round %d: %v", i, err)
			}
			if lockErr != nil {
				t.Fatalf("round %d: the row is still locked after RunInTx returned: %v", i, lockErr)
			}
		}
		got, err := accounts.Get(context.Background(), acct.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Balance != 1 {
			t.Fatalf("balance %d: a cancelled round was applied", got.Balance)
		}
	})
}
