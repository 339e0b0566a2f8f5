//go:build unix

package galera

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ProviderEnv names the environment variable that can point at the Galera
// provider library when it is not where Debian puts it.
const ProviderEnv = "GORMLOCK_GALERA_PROVIDER"

// providers are where distributions install galera-4's library.
var providers = []string{
	"/usr/lib/galera/libgalera_smm.so",
	"/usr/lib/libgalera_smm.so",
	"/usr/lib/galera-4/libgalera_smm.so",
	"/usr/lib64/galera-4/libgalera_smm.so",
	"/usr/lib64/galera/libgalera_smm.so",
}

// Binaries are the programs and library a cluster needs.
type Binaries struct {
	Mariadbd  string // the server
	InstallDB string // mariadb-install-db
	Provider  string // libgalera_smm.so (galera-4)
	Rsync     string // the state transfer between nodes
	SSTScript string // wsrep_sst_rsync, which mariadbd runs for it
}

// Requirements finds the binaries a cluster needs. When some are missing,
// the error matches ErrMissing and names every missing one and the Debian
// packages that have them.
func Requirements() (Binaries, error) {
	var b Binaries
	var missing []string
	find := func(dst *string, name string) {
		for _, dir := range []string{"", "/usr/sbin/", "/usr/bin/", "/usr/local/sbin/", "/usr/local/bin/"} {
			if p, err := exec.LookPath(dir + name); err == nil {
				*dst = p
				return
			}
		}
		missing = append(missing, name)
	}
	find(&b.Mariadbd, "mariadbd")
	find(&b.InstallDB, "mariadb-install-db")
	find(&b.Rsync, "rsync")
	find(&b.SSTScript, "wsrep_sst_rsync")
	candidates := providers
	if p := os.Getenv(ProviderEnv); p != "" {
		candidates = []string{p}
	}
	for _, p := range candidates {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			b.Provider = p
			break
		}
	}
	if b.Provider == "" {
		missing = append(missing, "libgalera_smm.so ("+strings.Join(candidates, ", ")+"; or set "+ProviderEnv+")")
	}
	if len(missing) > 0 {
		return b, fmt.Errorf("%w: %s (Debian: apt-get install mariadb-server galera-4 rsync)", ErrMissing, strings.Join(missing, ", "))
	}
	return b, nil
}

// runner is who the nodes run as: the mysql user when this process is
// root (mariadbd refuses to run as root), this process's user otherwise.
type runner struct {
	cred *syscall.Credential
}

// runAs returns the runner for this process.
func runAs() (*runner, error) {
	if os.Geteuid() != 0 {
		return &runner{}, nil
	}
	u, err := user.Lookup("mysql")
	if err != nil {
		return nil, fmt.Errorf("galera: running as root needs the mysql user (from mariadb-server): %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("galera: the mysql user: %w", err)
	}
	return &runner{cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}}, nil
}

// chown gives everything under dir to the runner's user.
func (r *runner) chown(dir string) error {
	if r.cred == nil {
		return nil
	}
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(r.cred.Uid), int(r.cred.Gid))
	})
}

// lockLaunches takes the machine-wide lock that makes launches take turns,
// waiting for it as long as ctx lets; the function returned releases it.
func lockLaunches(ctx context.Context) (func(), error) {
	path := filepath.Join(os.TempDir(), "gormlock-galera.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("galera: lock file: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("galera: lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("galera: another launch holds %s: %w", path, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freePorts returns n distinct ports that nothing listens on, between
// 20000 and 32000: below Linux's ephemeral range (32768-60999), so the
// source port of an outgoing connection cannot take one between this check
// and the node binding it, and far from 3306 and 5432.
func freePorts(n int) ([]int, error) {
	const lo, hi = 20000, 32000
	seen := map[int]bool{}
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries > 5000 {
			return nil, errors.New("galera: no free ports between 20000 and 32000")
		}
		p := lo + rand.IntN(hi-lo)
		if seen[p] {
			continue
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		_ = l.Close()
		out = append(out, p)
	}
	return out, nil
}

// copyTree copies the directory src to dst (which must not exist): regular
// files and directories, with their permissions.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(target, info.Mode().Perm())
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, info.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			_ = out.Close()
			return err
		}
		return out.Close()
	})
}
