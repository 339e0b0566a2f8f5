//go:build !cgo

package sqlite

// cgoEnabled reports whether the program was built with cgo, which
// gorm.io/driver/sqlite's driver, github.com/mattn/go-sqlite3, needs. Without
// it that driver is a stub whose every connection fails, so SQLite refuses
// at once instead (see errNoCgo).
const cgoEnabled = false
