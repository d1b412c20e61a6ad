package teststore

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/internal/testenv"
)

// PostgresServer is a PostgreSQL server of one test's own, in a temporary
// directory, on a free loopback port: a test can restart it, or crash it,
// without disturbing the tests that share the machine's server.
type PostgresServer struct {
	// URL reaches the server's database postgres as the user postgres.
	URL string

	bin, dir, data string
	port           int
	asPostgres     bool // run the server's programs as the user postgres (the test runs as root, which they refuse)
}

// NewPostgresServer initialises and starts a server that the test's end
// stops and deletes. It skips the test, loudly, where PostgreSQL's server
// programs (initdb, pg_ctl) are not installed, and fails it instead under
// WEIR_REQUIRE_SERVICES=1.
func NewPostgresServer(t testing.TB) *PostgresServer {
	t.Helper()
	bin := postgresBin()
	if bin == "" {
		testenv.Missing(t, "PostgreSQL's initdb and pg_ctl are not installed (looked on PATH and in /usr/lib/postgresql/*/bin)")
	}
	// Not t.TempDir: its parents are closed to the user postgres.
	dir, err := os.MkdirTemp("", "weir-pgserver-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s := &PostgresServer{bin: bin, dir: dir, data: filepath.Join(dir, "data"), asPostgres: os.Geteuid() == 0}
	if s.asPostgres {
		if out, err := exec.Command("chown", "postgres", dir).CombinedOutput(); err != nil {
			t.Fatalf("chown the server's directory to postgres: %v: %s", err, out)
		}
	}
	if s.port, err = freePort(); err != nil {
		t.Fatal(err)
	}
	if out, err := s.run("initdb", "-D", s.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v: %s", err, out)
	}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = s.run("pg_ctl", "-D", s.data, "-m", "immediate", "-w", "stop") })
	s.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	return s
}

// Addr is the server's host:port.
func (s *PostgresServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Restart stops the server and starts it again. Mode "fast" ends the
// sessions and shuts down cleanly; "immediate" kills the server as a
// crash would, and the start recovers from its write-ahead log.
func (s *PostgresServer) Restart(mode string) error {
	if out, err := s.run("pg_ctl", "-D", s.data, "-m", mode, "-w", "stop"); err != nil {
		return fmt.Errorf("stop the server (%s): %v: %s", mode, err, out)
	}
	return s.start()
}

// start starts the server and waits until it takes connections.
func (s *PostgresServer) start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", s.port, s.dir)
	if out, err := s.run("pg_ctl", "-D", s.data, "-o", opts, "-l", filepath.Join(s.dir, "server.log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
		return fmt.Errorf("start the server: %v: %s\nits log:\n%s", err, out, log)
	}
	// pg_ctl -w returns once the server answers; a first connection
	// confirms it takes ours.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var closeErr error
	why, ok := eventually.Wait(30*time.Second, func() (bool, string) {
		conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port))
		if err != nil {
			return false, err.Error()
		}
		closeErr = conn.Close(ctx)
		return true, ""
	})
	if !ok {
		return fmt.Errorf("the server does not take connections: %s", why)
	}
	return closeErr
}

// run runs one of the server's programs, as the user postgres when the
// test runs as root.
func (s *PostgresServer) run(prog string, args ...string) ([]byte, error) {
	path := filepath.Join(s.bin, prog)
	cmd := exec.Command(path, args...)
	if s.asPostgres {
		cmd = exec.Command("runuser", slices.Concat([]string{"-u", "postgres", "--", path}, args)...)
	}
	cmd.Dir = s.dir
	return cmd.CombinedOutput()
}

// postgresBin finds the directory of initdb and pg_ctl: on PATH, or the
// newest under /usr/lib/postgresql (Debian's packages).
func postgresBin() string {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return va - vb
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "pg_ctl")); err == nil {
			return dirs[i]
		}
	}
	return ""
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
