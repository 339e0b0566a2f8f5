module github.com/gormlock/gormlock/gormlockvet

go 1.26.0

require (
	github.com/golangci/plugin-module-register v0.1.2
	github.com/gormlock/gormlock v0.1.0
	golang.org/x/tools v0.52.0
	gorm.io/gorm v1.30.5
)

require (
	github.com/jinzhu/inflection v1.0.0 // indirect
	github.com/jinzhu/now v1.1.5 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/text v0.20.0 // indirect
)

replace github.com/gormlock/gormlock => ../
