//go:build unix

// Command galera starts and stops the three-node MariaDB Galera cluster of
// package internal/tests/galera by hand, for the benchmarks or for running the
// cluster tests many times against one cluster:
//
//	galera start [-dir DIR] [-db NAME]   # prints: export GORMLOCK_GALERA_DSNS='...'
//	galera status [-dir DIR]
//	galera stop [-dir DIR] [-keep]
//	galera run [-db NAME] -- COMMAND [ARG...]
//
// start leaves the cluster running (its nodes in sessions of their own) in
// DIR, by default $TMPDIR/gormlock-galera-cli, and prints the shell line
// that points the tests at it:
//
//	eval "$(go run ./internal/tests/galera/cmd/galera start)"
//	go test -count=1 ./internal/tests/galera/
//	go run ./internal/tests/galera/cmd/galera stop
//
// stop kills the nodes start recorded, by pid, and removes DIR; with -keep
// it shuts them down cleanly and keeps DIR. run launches a cluster, runs
// COMMAND with GORMLOCK_GALERA_DSNS set, stops the cluster and exits with
// COMMAND's status; its nodes die with it even if it is killed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gormlock/gormlock/internal/tests/galera"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	code := 0
	switch os.Args[1] {
	case "start":
		err = start(os.Args[2:])
	case "stop":
		err = stop(os.Args[2:])
	case "status":
		err = status(os.Args[2:])
	case "run":
		code, err = run(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "galera:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: galera start [-dir DIR] [-db NAME] [-timeout D]
       galera status [-dir DIR]
       galera stop [-dir DIR] [-keep]
       galera run [-db NAME] [-timeout D] -- COMMAND [ARG...]`)
	os.Exit(2)
}

// defaultDir is where start puts the cluster.
func defaultDir() string { return filepath.Join(os.TempDir(), "gormlock-galera-cli") }

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// exportLine is the shell line that points the tests at c.
func exportLine(c *galera.Cluster) string {
	return fmt.Sprintf("export %s='%s'", galera.DSNsEnv, strings.Join(c.DSNs(), ","))
}

func start(args []string) error {
	fs := flag.NewFlagSet("start", flag.ExitOnError)
	dir := fs.String("dir", defaultDir(), "the cluster's directory (must not hold a cluster)")
	db := fs.String("db", galera.DefaultDatabase, "the database to create")
	timeout := fs.Duration("timeout", galera.DefaultTimeout, "bound on the launch")
	_ = fs.Parse(args)
	if c, err := galera.Attach(*dir, true); err == nil && c.Running() {
		return fmt.Errorf("a cluster is already running in %s (galera stop -dir %s)", *dir, *dir)
	}
	if _, err := os.Stat(filepath.Join(*dir, "cluster.json")); err == nil {
		// A cluster that is not running any more: start afresh.
		if err := os.RemoveAll(*dir); err != nil {
			return err
		}
	}
	c, err := galera.Launch(context.Background(), galera.Config{Dir: *dir, Database: *db, Detached: true, Timeout: *timeout, Logf: logf})
	if err != nil {
		return err
	}
	for i, n := range c.Nodes {
		logf("node %d: pid %d, %s, error log %s", i+1, n.PID, c.DSN(i), n.ErrorLog())
	}
	logf("stop it with: go run ./internal/tests/galera/cmd/galera stop -dir %s", c.Dir)
	fmt.Println(exportLine(c))
	return nil
}

func stop(args []string) error {
	fs := flag.NewFlagSet("stop", flag.ExitOnError)
	dir := fs.String("dir", defaultDir(), "the cluster's directory")
	keep := fs.Bool("keep", false, "shut the nodes down cleanly and keep the directory")
	_ = fs.Parse(args)
	c, err := galera.Attach(*dir, *keep)
	if err != nil {
		return err
	}
	began := time.Now()
	if err := c.Stop(); err != nil {
		return err
	}
	logf("galera: stopped the cluster in %s in %v", *dir, time.Since(began).Round(time.Millisecond))
	return nil
}

func status(args []string) error {
	fs := flag.NewFlagSet("status", flag.ExitOnError)
	dir := fs.String("dir", defaultDir(), "the cluster's directory")
	_ = fs.Parse(args)
	c, err := galera.Attach(*dir, true)
	if err != nil {
		return err
	}
	for i, n := range c.Nodes {
		fmt.Printf("node %d: pid %d, client port %d, %s\n", i+1, n.PID, n.Port, c.DSN(i))
	}
	if !c.Running() {
		return errors.New("not running")
	}
	fmt.Println(exportLine(c))
	return nil
}

func run(args []string) (int, error) {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	db := fs.String("db", galera.DefaultDatabase, "the database to create")
	timeout := fs.Duration("timeout", galera.DefaultTimeout, "bound on the launch")
	_ = fs.Parse(args)
	cmdArgs := fs.Args()
	if len(cmdArgs) == 0 {
		usage()
	}
	c, err := galera.Launch(context.Background(), galera.Config{Database: *db, Timeout: *timeout, Logf: logf})
	if err != nil {
		return 0, err
	}
	defer func() { _ = c.Stop() }()
	// ^C reaches the command (same process group); this process waits for
	// it and then stops the cluster.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
	cmd := exec.Command(cmdArgs[0], cmdArgs[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), galera.DSNsEnv+"="+strings.Join(c.DSNs(), ","))
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), c.Stop()
	}
	if err != nil {
		return 0, err
	}
	return 0, c.Stop()
}
