// Package failover holds gormlock's tests on a PostgreSQL primary with a
// streaming standby (package internal/tests/pgpair starts the pair): reads through
// gorm.io/plugin/dbresolver from a replica that is provably stale, writers
// that keep going through a failover on a two-host DSN with
// target_session_attrs=read-write, with synchronous and with asynchronous
// replication, and the versions of records after a failover that lost
// acknowledged writes.
//
// Each test accounts exactly for every write: what the call reported
// (applied, not applied, unknown) against what the promoted server holds,
// checked through the operation keys (repository.LookupOperation) and the
// counters. The negative controls show what the checks catch: asynchronous
// replication loses acknowledged writes, an unknown outcome without an
// operation key cannot be resolved, a read from the replica livelocks a
// guarded read-modify-write, and counter versions let a client holding a
// lost version overwrite newer data.
//
// The tests skip without the PostgreSQL server binaries (see pgpair), and
// fail instead under CI=true.
package failover
