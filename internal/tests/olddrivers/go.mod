module github.com/gormlock/gormlock/internal/tests/olddrivers

go 1.24.0

require (
	github.com/go-sql-driver/mysql v1.7.0
	github.com/gormlock/gormlock v0.1.0
	github.com/jackc/pgconn v1.13.0
	gorm.io/driver/mysql v1.4.7
	gorm.io/driver/postgres v1.4.1
	gorm.io/gorm v1.30.5
)

require (
	github.com/jackc/chunkreader/v2 v2.0.1 // indirect
	github.com/jackc/pgio v1.0.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgproto3/v2 v2.3.1 // indirect
	github.com/jackc/pgservicefile v0.0.0-20200714003250-2b9c44734f2b // indirect
	github.com/jackc/pgtype v1.12.0 // indirect
	github.com/jackc/pgx/v4 v4.17.2 // indirect
	github.com/jinzhu/inflection v1.0.0 // indirect
	github.com/jinzhu/now v1.1.5 // indirect
	golang.org/x/crypto v0.0.0-20220722155217-630584e8d5aa // indirect
	golang.org/x/text v0.20.0 // indirect
)

replace github.com/gormlock/gormlock => ../../..
