//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sqlitegate

import (
	"errors"
	"syscall"
)

const flockSupported = true

// tryFlock takes the lock if it is free.
func tryFlock(fd int) (bool, error) {
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		}
		return false, err
	}
}

// waitFlock blocks until the lock is taken.
func waitFlock(fd int) error {
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

func unFlock(fd int) { _ = syscall.Flock(fd, syscall.LOCK_UN) }
