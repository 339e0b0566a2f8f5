//go:build cgo

package opendb_test

// cgo reports whether the tests were built with cgo, which sqlite.Open
// needs.
const cgo = true
