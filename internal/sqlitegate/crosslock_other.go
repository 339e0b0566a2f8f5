//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package sqlitegate

import "errors"

const flockSupported = false

func tryFlock(int) (bool, error) { return false, errors.New("flock is not supported here") }
func waitFlock(int) error        { return errors.New("flock is not supported here") }
func unFlock(int)                {}
