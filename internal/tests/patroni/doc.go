// Package patroni starts a Patroni-managed PostgreSQL cluster on loopback for
// tests: one etcd member (the DCS, through its v3 API) and three Patroni
// nodes, n1, n2 and n3, each running its own PostgreSQL, with synchronous
// replication (synchronous_mode: true), and injects the faults a production
// cluster sees: a switchover through the leader's REST API and a kill -9 of
// the leader node (its Patroni, its postmaster and the postmaster's
// children). A killed node can be restarted, and rejoins through pg_rewind.
//
// It is the slow, production-shaped sibling of package pgpair, whose
// promotion is made by hand: here Patroni decides, and the application finds
// the new leader only through its multi-host DSN with
// target_session_attrs=read-write (Cluster.DSN).
//
// Start runs the machine's binaries: patroni (Debian's patroni 3.0.2,
// /usr/bin/patroni, or GORMLOCK_PATRONI), etcd (Debian's etcd-server 3.4,
// /usr/bin/etcd, or GORMLOCK_ETCD) and PostgreSQL 15
// (/usr/lib/postgresql/15/bin, or GORMLOCK_PG_BIN). Everything lives in a new
// temporary directory, on free loopback ports it picks (never 5432 or 3306),
// and runs as the postgres user when the test runs as root (PostgreSQL refuses
// to run as root). It skips the test when a binary is missing, and fails it
// instead under CI=true. Every process it starts, and every postmaster Patroni
// starts, is stopped by its process id when the test ends (Cluster.Stop),
// within bounded time; nothing else is touched.
//
// The calls: Start returns a healthy *Cluster; DSN is the application's
// multi-host DSN; Leader and Status tell what Patroni shows; Switchover(to)
// and KillLeader inject the faults; WaitLeader, WaitSyncStandby and
// WaitHealthy wait, generously and logging each phase with its time, for a
// new leader, for a synchronous standby named again, and for every running
// member streaming; Restart brings a killed member back; LogLines reads a
// member's log (pg_rewind's report); Stop, registered with t.Cleanup, ends it
// all.
//
// The bootstrap DCS configuration is the one measured in
// shared/research/production-components.md, section 2: ttl 10, loop_wait 2,
// retry_timeout 4, maximum_lag_on_failover 1048576, synchronous_mode: true,
// use_pg_rewind, wal_level replica, hot_standby, max_wal_senders and
// max_replication_slots 10, wal_log_hints on, synchronous_commit on, and
// pg_hba trusting loopback connections and replication.
//
// The package is Linux-only (it reads /proc to find a postmaster's children
// and to see that a process is gone); elsewhere it is empty.
package patroni
