module github.com/gormlock/gormlock/opendb/mysql

go 1.24.0

require (
	github.com/go-sql-driver/mysql v1.10.0
	github.com/gormlock/gormlock v0.1.0
	gorm.io/driver/mysql v1.6.0
	gorm.io/gorm v1.30.5
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/jinzhu/inflection v1.0.0 // indirect
	github.com/jinzhu/now v1.1.5 // indirect
	golang.org/x/text v0.20.0 // indirect
)

replace github.com/gormlock/gormlock => ../..
