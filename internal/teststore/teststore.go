// Package teststore opens the stores of tests: a migrated SQLite file, a
// migrated PostgreSQL schema of the test's own (reached directly or
// through a faultproxy); and runs a test in a child process that a crash
// point kills.
package teststore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/internal/crashpoint"
	"github.com/weirhq/weir/internal/faultproxy"
	"github.com/weirhq/weir/internal/testenv"
	"github.com/weirhq/weir/store/postgres"
	"github.com/weirhq/weir/store/sqlite"
)

// SQLite opens and migrates a SQLite store at path, closed at the test's
// end.
func SQLite(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// ArmCrashPoint arms, in a crash test's child process, the crash point
// its parent named in the child's environment (crashpoint.Env), as the
// weir command does for the processes `weir chaos` runs.
func ArmCrashPoint(t testing.TB) {
	t.Helper()
	if err := crashpoint.Arm(os.Getenv(crashpoint.Env)); err != nil {
		t.Fatal(err)
	}
}

// RunKilled runs the test named test again in a child process, with env
// added to its environment, and fails unless the child dies of SIGKILL (a
// crash point). The child calls ArmCrashPoint. It returns the child's
// output.
func RunKilled(t testing.TB, test string, env ...string) []byte {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if !crashpoint.Killed(err) {
		t.Fatalf("child %s: %v, want it killed by SIGKILL; output:\n%s", test, err, out)
	}
	return out
}

// Schema names a PostgreSQL schema of the test's own, prefix plus random
// hex, and drops it, with all it holds, at the test's end, over a
// connection of its own to the database at url.
func Schema(t testing.TB, url, prefix string) string {
	t.Helper()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	schema := prefix + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// PostgresStore opens and migrates a PostgreSQL store in a schema of its
// own, named prefix plus random hex and dropped when the test ends, and
// returns it with the server's URL. It skips the test, loudly, without
// PostgreSQL (fails it under WEIR_REQUIRE_SERVICES=1).
func PostgresStore(t testing.TB, prefix string, maxConns int32) (*postgres.Store, string) {
	t.Helper()
	url := testenv.Postgres(t)
	return openPostgres(t, url, Schema(t, url, prefix), maxConns), url
}

// PostgresBehindProxy is PostgresStore with the store's connections going
// through a faultproxy, which the test cuts and restores. It returns the
// store, the proxy and the server's URL, which reaches it past the proxy.
func PostgresBehindProxy(t testing.TB, prefix string, maxConns int32) (*postgres.Store, *faultproxy.Proxy, string) {
	t.Helper()
	url := testenv.Postgres(t)
	p, via := faultproxy.ForURL(t, url)
	return openPostgres(t, via, Schema(t, url, prefix), maxConns), p, url
}

// openPostgres opens and migrates a PostgreSQL store of url in schema,
// closed at the test's end.
func openPostgres(t testing.TB, url, schema string, maxConns int32) *postgres.Store {
	t.Helper()
	ctx := context.Background()
	s, err := postgres.Open(ctx, postgres.Config{URL: url, Schema: schema, MaxConns: maxConns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}
