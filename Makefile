# The project's test command (README.md "Run the tests"; .ci/run calls it).
# Without GORMLOCK_POSTGRES_DSN the Postgres tests skip (CI=true makes them fail).
.PHONY: test fmt-check vet race quickstart

test: fmt-check vet race

fmt-check:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	go vet ./...

race:
	go test -race -count=1 ./...

quickstart:
	go run ./examples/quickstart
