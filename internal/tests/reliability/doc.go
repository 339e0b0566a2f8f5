// Package reliability holds gormlock's reliability suite: tests that try to
// make the library lose, double or misreport a write, on real databases.
//
//   - linearizability: client processes, each with its own Repository, run
//     random reads, creates, guarded updates, deletes and increments on a
//     few records, with and without the database killing their sessions;
//     the merged histories are checked with porcupine against a versioned
//     register (package internal/tests/linearize), and a negative control (blind
//     writes) must be rejected;
//   - faults: a TCP proxy cuts the connection just before or just after a
//     chosen statement or COMMIT is sent, and the outcome each call reports
//     must match what the database holds;
//   - cancellation at every stage of a call: prompt return, no half-written
//     row, no connection left in use, no session left in a transaction;
//   - crash durability: a process making acknowledged writes is killed with
//     SIGKILL, again and again, and no acknowledged write is missing;
//   - hostile input: every public call and every HTTP route with inputs
//     meant to break it.
//
// The default run is short enough for CI; GORMLOCK_RELIABILITY=long runs
// more operations and rounds. docs/reliability.md has the figures.
package reliability
