package repository_test

import (
	"context"
	"testing"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	pgopen "github.com/gormlock/gormlock/opendb/postgres"
	"github.com/gormlock/gormlock/repository"
)

// What opendb/postgres's default_query_exec_mode=exec costs on a direct
// connection, against pgx's own default (cache_statement, which breaks
// behind a pooler in transaction mode) and the other modes: Get, a guarded
// Update, and Mutate, one at a time.
//
//	go test ./internal/tests/repository -run '^$' -bench ExecMode -count 5
func BenchmarkExecMode(b *testing.B) {
	dsn := testdb.PostgresSchema(b)
	setup, err := pgopen.Open(dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer fixtures.Close(setup)
	if err := fixtures.Migrate(context.Background(), setup); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"exec", "cache_statement", "cache_describe", "describe_exec", "simple_protocol"} {
		db, err := pgopen.Open(fixtures.WithParam(dsn, "default_query_exec_mode", mode))
		if err != nil {
			b.Fatal(err)
		}
		accounts, err := repository.New[fixtures.Account](db)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		a := &fixtures.Account{Owner: "bench-" + mode}
		if err := accounts.Create(ctx, a); err != nil {
			b.Fatal(err)
		}
		b.Run("mode="+mode+"/op=Get", func(b *testing.B) {
			for b.Loop() {
				if _, err := accounts.Get(ctx, a.ID); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("mode="+mode+"/op=Update", func(b *testing.B) {
			for b.Loop() {
				a.Balance++
				if err := accounts.Update(ctx, a); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("mode="+mode+"/op=Mutate", func(b *testing.B) {
			for b.Loop() {
				if _, err := accounts.Mutate(ctx, a.ID, func(x *fixtures.Account) error { x.Balance++; return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
		_ = fixtures.Close(db)
	}
}
