module github.com/gormlock/gormlock/opendb/sqlite

go 1.24.0

require (
	github.com/gormlock/gormlock v0.1.0
	gorm.io/driver/sqlite v1.6.0
	gorm.io/gorm v1.30.5
)

require (
	github.com/jinzhu/inflection v1.0.0 // indirect
	github.com/jinzhu/now v1.1.5 // indirect
	github.com/mattn/go-sqlite3 v1.14.22 // indirect
	golang.org/x/text v0.20.0 // indirect
)

replace github.com/gormlock/gormlock => ../..
