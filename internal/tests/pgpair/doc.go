// Package pgpair starts a PostgreSQL primary and a streaming standby on
// loopback for tests, and injects the faults of a failover: the primary
// stopped at once, the standby promoted, the standby's replay paused, and
// the loss of the WAL the standby had not yet received (LoseLag).
//
// Start runs the server binaries of the machine (PostgreSQL 15 from
// /usr/lib/postgresql/15/bin, or the directory in GORMLOCK_PG_BIN) in a new
// temporary directory, on two free ports it picks (never 5432), as the
// postgres user when the test runs as root. It skips the test when the
// binaries are missing, and fails it instead under CI=true. Every server it
// starts is stopped by its process id when the test ends; nothing else is
// touched.
//
// The package is Linux-only (it reads /proc to see that a process is
// stopped); elsewhere it is empty.
package pgpair
