# The project's test command (README.md "Run the tests"; .ci/run calls it).
# Without GORMLOCK_POSTGRES_DSN the Postgres tests skip (CI=true makes them fail).
.PHONY: test fmt-check vet race nocgo quickstart clusters galera-up galera-down

test: fmt-check vet nocgo race

fmt-check:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	go vet ./...

# The module builds and vets without cgo (a Postgres-only service built with
# CGO_ENABLED=0, as for a static binary or a scratch image); SQLite then
# works through a pure-Go driver (opendb.PureGoSQLite), and opendb.SQLite
# says why it cannot.
nocgo:
	CGO_ENABLED=0 go build ./...
	CGO_ENABLED=0 go vet ./...
	CGO_ENABLED=0 go build -o /dev/null ./internal/nocgo
	CGO_ENABLED=0 go test -count=1 -run '^Test' ./locking/
	CGO_ENABLED=0 go test -count=1 -run 'Cgo|PureGo' ./opendb/ ./repository/

race:
	go test -race -count=1 ./...

quickstart:
	go run ./examples/quickstart

# The tests that start their own clusters (also part of race): a 3-node
# Galera cluster, and a PostgreSQL primary with a streaming standby.
clusters:
	go test -race -count=1 ./internal/galera/ ./internal/pgpair/ ./internal/failover/

# A Galera cluster that stays up, for benchmarks and manual runs: prints
# export GORMLOCK_GALERA_DSNS=...; stop it with galera-down.
galera-up:
	go run ./internal/galera/cmd/galera start

galera-down:
	go run ./internal/galera/cmd/galera stop
