// Package pgbouncer starts a private PostgreSQL server with PgBouncer in
// front of it, one PgBouncer per pool mode (transaction and session), for
// tests that run gormlock through a connection pooler, and injects the
// pooler's faults: PgBouncer killed (kill -9) and started again, and the
// PostgreSQL server behind it restarted (pg_ctl stop -m fast or -m
// immediate, then start).
//
// Start runs Debian's pgbouncer (/usr/sbin/pgbouncer, or the file named by
// GORMLOCK_PGBOUNCER) and the PostgreSQL 15 server binaries (through
// package pgpair, a primary alone), as the postgres user when the test runs
// as root (both refuse to run as root), each on a free loopback port of its
// own (never 5432), in new temporary directories. PgBouncer is configured
// as a production deployment would be:
//
//	[databases]
//	* = host=127.0.0.1 port=<server> user=postgres
//	[pgbouncer]
//	listen_addr = 127.0.0.1
//	auth_type = trust
//	auth_file = users.txt              ; "postgres" ""
//	pool_mode = transaction            ; or session
//	max_client_conn = 400
//	default_pool_size = 20
//	server_reset_query = DISCARD ALL   ; session mode only (PgBouncer's default)
//	ignore_startup_parameters = extra_float_digits
//	server_login_retry = 1             ; the default, 15 s, blocks logins long after a restart
//
// plus what a test needs (no Unix socket, a pid file, admin_users for
// SHOW CONFIG). The fallback database "*" sends every database name to the
// database of that name on the server, so each test works in a database of
// its own (CreateDatabase) through both poolers.
//
// Start skips the test when pgbouncer or the server binaries are missing,
// and fails it instead under CI=true. Every process it starts is stopped by
// its process id when the test ends; nothing else is touched. Each phase is
// logged with t.Logf and its elapsed time. The waits are hang guards sized
// for a busy 2-core machine (minutes for a start), never timing assertions.
//
// The package is Linux-only (process credentials and groups); elsewhere it
// is empty.
package pgbouncer
