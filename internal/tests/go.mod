module github.com/gormlock/gormlock/internal/tests

go 1.26.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/glebarez/sqlite v1.11.0
	github.com/go-sql-driver/mysql v1.10.1
	github.com/google/uuid v1.6.0
	github.com/gormlock/gormlock v0.1.0
	github.com/gormlock/gormlock/opendb/mysql v0.1.0
	github.com/gormlock/gormlock/opendb/postgres v0.1.0
	github.com/gormlock/gormlock/opendb/puresqlite v0.1.0
	github.com/gormlock/gormlock/opendb/sqlite v0.1.0
	github.com/jackc/pgx/v5 v5.12.0
	github.com/mattn/go-sqlite3 v1.14.22
	github.com/pressly/goose/v3 v3.29.0
	github.com/stretchr/testify v1.12.1
	golang.org/x/sync v0.24.0
	golang.org/x/sys v0.49.0
	gorm.io/driver/mysql v1.6.0
	gorm.io/driver/postgres v1.6.1
	gorm.io/driver/sqlite v1.6.0
	gorm.io/gorm v1.30.5
	gorm.io/plugin/dbresolver v1.6.2
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/dustin/go-humanize v1.1.0 // indirect
	github.com/glebarez/go-sqlite v1.21.2 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/jinzhu/inflection v1.0.0 // indirect
	github.com/jinzhu/now v1.1.5 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/mfridman/interpolate v0.0.2 // indirect
	github.com/ncruces/go-strftime v1.1.0 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	github.com/sethvargo/go-retry v0.5.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/text v0.43.0 // indirect
	modernc.org/libc v1.78.0 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.12.1 // indirect
	modernc.org/sqlite v1.60.1 // indirect
)

replace github.com/gormlock/gormlock => ../..

replace github.com/gormlock/gormlock/opendb/postgres => ../../opendb/postgres

replace github.com/gormlock/gormlock/opendb/mysql => ../../opendb/mysql

replace github.com/gormlock/gormlock/opendb/sqlite => ../../opendb/sqlite

replace github.com/gormlock/gormlock/opendb/puresqlite => ../../opendb/puresqlite
