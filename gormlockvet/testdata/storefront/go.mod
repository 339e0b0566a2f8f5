module example.com/storefront

go 1.26.0

require (
	github.com/gormlock/gormlock v0.1.0
	gorm.io/gorm v1.30.5
)

require (
	github.com/jinzhu/inflection v1.0.0 // indirect
	github.com/jinzhu/now v1.1.5 // indirect
	golang.org/x/text v0.43.0 // indirect
)

replace github.com/gormlock/gormlock => ../../..
