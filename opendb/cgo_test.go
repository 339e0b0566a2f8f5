//go:build cgo

package opendb_test

// cgo reports whether the tests were built with cgo, which opendb.SQLite
// needs.
const cgo = true
