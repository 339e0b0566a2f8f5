# The project's test command (CONTRIBUTING.md "Running the tests"; .ci/run
# calls it).
#
# The repository holds several modules (go.work ties them together): the
# library at the root, one opener module per driver under opendb/, the
# tests that need drivers in internal/tests, the examples and the benchmark
# command. Without GORMLOCK_POSTGRES_DSN and GORMLOCK_MARIADB_DSN the server
# tests skip (CI=true makes them fail).
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -ec

MODULES := . opendb/postgres opendb/mysql opendb/sqlite opendb/puresqlite internal/tests examples bench otelgormlock otelgormlock/internal/tests gormlockvet
PACKAGES := $(foreach m,$(MODULES),$(if $(filter .,$(m)),./...,./$(m)/...))

# Tools, pinned.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
NEWER_GO := go1.27.3

# go test's own limit per test binary; the suites print progress every
# minute (testprogress) and bound their own waits.
TEST_FLAGS := -count=1 -timeout 45m
PROGRESS := go run ./internal/tests/cmd/testprogress

# gormlock through the oldest GORM drivers docs/adopting.md claims: a
# module of its own outside go.work, so that no other module raises them.
OLD_DRIVERS := internal/tests/olddrivers

.PHONY: test fmt-check vet staticcheck tidy-check importer-check docs-check nocgo old-drivers race newer-go quickstart clusters galera-up galera-down bench-report bench-docs

test: fmt-check vet staticcheck tidy-check importer-check docs-check nocgo old-drivers race newer-go

fmt-check:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	go vet $(PACKAGES)

staticcheck:
	go run $(STATICCHECK) $(PACKAGES)

# Every module's go.mod and go.sum are what go mod tidy makes them.
tidy-check:
	for m in $(MODULES) $(OLD_DRIVERS); do echo "go mod tidy -diff in $$m"; (cd $$m && GOWORK=off go mod tidy -diff); done

# What an application that imports gormlock downloads and links.
importer-check:
	bash .ci/importer-check

# The documents agree with each other and with the repository: links,
# anchors and paths exist, and each figure is stated once
# (CONTRIBUTING.md "Style").
docs-check:
	go run ./internal/tests/cmd/docscheck

# The library and the pure-Go openers build and vet without cgo (a
# PostgreSQL-only service built with CGO_ENABLED=0, as for a static binary
# or a scratch image); SQLite then works through opendb/puresqlite, and
# opendb/sqlite says why it cannot.
nocgo:
	CGO_ENABLED=0 go build ./... ./opendb/postgres/... ./opendb/mysql/... ./opendb/puresqlite/...
	CGO_ENABLED=0 go vet ./... ./opendb/postgres/... ./opendb/mysql/... ./opendb/puresqlite/...
	CGO_ENABLED=0 go build -o /dev/null ./internal/tests/nocgo
	CGO_ENABLED=0 go test -count=1 ./opendb/puresqlite/...
	CGO_ENABLED=0 go test -count=1 -run '^Test' ./internal/tests/locking/
	CGO_ENABLED=0 go test -count=1 -run 'Cgo|PureGo' ./internal/tests/opendb/ ./internal/tests/repository/

# gorm.io/driver/postgres v1.4.1 (pgx v4) and gorm.io/driver/mysql v1.4.7
# (go-sql-driver/mysql v1.7.0), opened as an application that keeps its
# own gorm.Open does.
old-drivers:
	cd $(OLD_DRIVERS) && GOWORK=off go vet ./... && GOWORK=off go run $(STATICCHECK) ./...
	cd $(OLD_DRIVERS) && GOWORK=off go test -race $(TEST_FLAGS) ./...

race:
	go test -race $(TEST_FLAGS) -json $(PACKAGES) | $(PROGRESS)

# The whole suite again on the newer Go toolchain, which the module proxy
# serves (about 76 MB, once per machine).
newer-go:
	GOTOOLCHAIN=$(NEWER_GO) go version
	GOTOOLCHAIN=$(NEWER_GO) go test $(TEST_FLAGS) -json $(PACKAGES) | $(PROGRESS)

quickstart:
	go run ./examples/quickstart

# The tests that start their own clusters (also part of race): a 3-node
# Galera cluster, a PostgreSQL primary with a streaming standby, PgBouncer
# in front of a PostgreSQL server, and Patroni with etcd.
clusters:
	go test -race $(TEST_FLAGS) -json ./internal/tests/galera/ ./internal/tests/pgpair/ ./internal/tests/failover/ ./internal/tests/pgbouncer/ ./internal/tests/patroni/ | $(PROGRESS)

# A Galera cluster that stays up, for benchmarks and manual runs: prints
# export GORMLOCK_GALERA_DSNS=...; stop it with galera-down.
galera-up:
	go run ./internal/tests/galera/cmd/galera start

galera-down:
	go run ./internal/tests/galera/cmd/galera stop

# The benchmark matrix (bench/README.md "Current results"): every mode on
# SQLite, PostgreSQL and MariaDB, 5 interleaved rounds of 1 s per cell,
# and SQLite again with 32 workers in 4 processes, into
# bench/results/<db>.json and .svg, then the generated tables of
# bench/README.md and docs/performance.md from those runs (bench-docs).
# Not part of test: its run time is in bench/README.md.
# Galera runs too when GORMLOCK_GALERA_DSNS is set (make galera-up);
# otherwise its tables come from the committed bench/results/galera.json.
BENCH_RUN := -duration 1s -rounds 5
bench-report:
	@test -n "$$GORMLOCK_POSTGRES_DSN" -a -n "$$GORMLOCK_MARIADB_DSN" || { echo "bench-report needs GORMLOCK_POSTGRES_DSN and GORMLOCK_MARIADB_DSN"; exit 1; }
	tmp="$$(mktemp -d)"; go build -o "$$tmp/bench" ./bench; \
	dbs="sqlite postgres mariadb"; if [ -n "$$GORMLOCK_GALERA_DSNS" ]; then dbs="$$dbs galera"; fi; \
	for db in $$dbs; do \
	  case $$db in postgres) dsn="$$GORMLOCK_POSTGRES_DSN";; mariadb) dsn="$$GORMLOCK_MARIADB_DSN";; *) dsn="";; esac; \
	  echo "bench-report: $$db"; \
	  "$$tmp/bench" -db $$db $${dsn:+-dsn "$$dsn"} $(BENCH_RUN) -out "$$tmp/$$db" > "$$tmp/$$db.md"; \
	  cp "$$tmp/$$db/results.json" bench/results/$$db.json; cp "$$tmp/$$db/throughput.svg" bench/results/$$db.svg; \
	done; \
	echo "bench-report: sqlite, 32 workers in 4 processes"; \
	"$$tmp/bench" -db sqlite -procs 4 -workers 32 $(BENCH_RUN) -out "$$tmp/sqlite-procs" > "$$tmp/sqlite-procs.md"; \
	cp "$$tmp/sqlite-procs/results.json" bench/results/sqlite-procs.json; cp "$$tmp/sqlite-procs/throughput.svg" bench/results/sqlite-procs.svg; \
	rm -rf "$$tmp"
	$(MAKE) bench-docs

# The generated tables of bench/README.md and docs/performance.md, from
# the committed bench/results/<db>.json; bench's TestDocsAreGenerated
# fails when they differ.
bench-docs:
	go run ./bench -docs
