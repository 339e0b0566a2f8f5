module github.com/gormlock/gormlock/bench

go 1.26.0

require (
	github.com/go-sql-driver/mysql v1.10.1
	github.com/gormlock/gormlock v0.1.0
	github.com/gormlock/gormlock/internal/tests v0.1.0
	github.com/gormlock/gormlock/opendb/mysql v0.1.0
	github.com/gormlock/gormlock/opendb/postgres v0.1.0
	github.com/jackc/pgx/v5 v5.12.0
	github.com/stretchr/testify v1.12.1
	gonum.org/v1/plot v0.17.0
	gorm.io/gorm v1.30.5
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	filippo.io/edwards25519 v1.2.0 // indirect
	git.sr.ht/~sbinet/gg v0.7.0 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/gormlock/gormlock/opendb/sqlite v0.1.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/jinzhu/inflection v1.0.0 // indirect
	github.com/jinzhu/now v1.1.5 // indirect
	github.com/mattn/go-sqlite3 v1.14.22 // indirect
	github.com/mfridman/interpolate v0.0.2 // indirect
	github.com/pressly/goose/v3 v3.29.0 // indirect
	github.com/sethvargo/go-retry v0.5.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/image v0.30.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	gorm.io/driver/mysql v1.6.0 // indirect
	gorm.io/driver/postgres v1.6.1 // indirect
	gorm.io/driver/sqlite v1.6.0 // indirect
)

replace github.com/gormlock/gormlock => ..

replace github.com/gormlock/gormlock/opendb/postgres => ../opendb/postgres

replace github.com/gormlock/gormlock/opendb/mysql => ../opendb/mysql

replace github.com/gormlock/gormlock/opendb/sqlite => ../opendb/sqlite

replace github.com/gormlock/gormlock/internal/tests => ../internal/tests

replace github.com/gormlock/gormlock/opendb/puresqlite => ../opendb/puresqlite
