//go:build cgo

package sqlite

// cgoEnabled reports whether the program was built with cgo, which
// gorm.io/driver/sqlite's driver, github.com/mattn/go-sqlite3, needs.
const cgoEnabled = true
