//go:build unix

// Package galera starts a three-node MariaDB Galera cluster on loopback, for
// gormlock's tests and benchmarks, and holds the tests that show what
// gormlock guarantees on such a cluster.
//
// Launch creates the nodes in a new directory: free ports (client, group
// communication, state transfer, incremental state transfer; never 3306),
// node 1 bootstrapped with --wsrep-new-cluster, nodes 2 and 3 joined one
// after the other by an rsync state transfer, then waits until every node is
// Synced in a cluster of three and creates the database. Cluster.Stop stops
// exactly the processes Launch started, by pid, and removes the directory.
//
// Tests use Start, which launches one cluster per test binary on first use
// (a package calls Main from its TestMain so that the cluster is stopped when
// its tests end), or the cluster named by GORMLOCK_GALERA_DSNS. Without the
// binaries (mariadbd, mariadb-install-db, the galera-4 provider, rsync)
// Start skips the test with a message naming what is missing, or fails it
// under CI=true. The command in cmd/galera starts and stops a cluster by hand
// (for the benchmarks, or to run the tests many times against one cluster).
package galera
