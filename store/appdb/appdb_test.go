package appdb_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testenv"
	"github.com/weirhq/weir/internal/teststore"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/appdb"
)

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var schema = map[appdb.Driver]string{
	appdb.SQLite:   `CREATE TABLE IF NOT EXISTS app_notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);`,
	appdb.Postgres: `CREATE TABLE IF NOT EXISTS app_notes (id BIGINT PRIMARY KEY, body TEXT NOT NULL); CREATE INDEX IF NOT EXISTS app_notes_body ON app_notes (body);`,
}

// openSQLite opens the SQLite file at path with the application's schema,
// closed at the test's end.
func openSQLite(t *testing.T, path string) *appdb.DB {
	t.Helper()
	d, err := appdb.Open(context.Background(), appdb.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if err := d.Migrate(context.Background(), schema); err != nil {
		t.Fatal(err)
	}
	return d
}

// Strings returns the one column of a query's rows, in a transaction and
// outside one, and the error of a query that fails.
func TestStringsReadsOneColumn(t *testing.T) {
	ctx := context.Background()
	d := openSQLite(t, filepath.Join(t.TempDir(), "weir.db"))
	const q = `SELECT body FROM app_notes ORDER BY id`
	var inTx []string
	err := d.RunTx(ctx, func(tx appdb.Tx) error {
		for i, body := range []string{"a", "b", "c"} {
			if _, err := tx.Exec(ctx, `INSERT INTO app_notes (id, body) VALUES ($1, $2)`, i, body); err != nil {
				return err
			}
		}
		var err error
		inTx, err = tx.Strings(ctx, q)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	outside, err := d.Strings(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "b", "c"}
	if !slices.Equal(inTx, want) || !slices.Equal(outside, want) {
		t.Fatalf("Strings in a transaction %q, outside %q, want %q", inTx, outside, want)
	}
	if _, err := d.Strings(ctx, `SELECT body FROM no_such_table`); err == nil {
		t.Fatal("Strings of a missing table returned no error")
	}
}

// A transaction writes the application's row and weir's job together, or
// neither.
func TestTxWritesBothOrNeither(t *testing.T) {
	ctx := context.Background()
	d := openSQLite(t, filepath.Join(t.TempDir(), "weir.db"))
	write := func(id int, fail bool) error {
		return d.RunTx(ctx, func(tx appdb.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO app_notes (id, body) VALUES ($1, $2)`, id, "note"); err != nil {
				return err
			}
			if _, err := tx.Ex.Insert(ctx, testNow, []store.InsertParams{{Kind: "note", Payload: []byte(`{}`)}}); err != nil {
				return err
			}
			if fail {
				return context.Canceled
			}
			return nil
		})
	}
	if err := write(1, false); err != nil {
		t.Fatal(err)
	}
	if err := write(2, true); err == nil {
		t.Fatal("a failing transaction committed")
	}
	var notes int
	if err := d.SQL.QueryRow(`SELECT count(*) FROM app_notes`).Scan(&notes); err != nil {
		t.Fatal(err)
	}
	counts, err := d.Store.Executor().CountJobs(ctx, testNow)
	if err != nil {
		t.Fatal(err)
	}
	jobs := 0
	for _, c := range counts {
		jobs += c.Count
	}
	if notes != 1 || jobs != 1 {
		t.Fatalf("%d notes and %d jobs, want 1 and 1: the failed transaction must leave neither", notes, jobs)
	}
}

func TestOpenRefusesAnotherScheme(t *testing.T) {
	_, err := appdb.Open(context.Background(), appdb.Config{URL: "mysql://user:secret@host/db"})
	if err == nil || !strings.Contains(err.Error(), "postgres://") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("err %v: want a refusal naming postgres://, without the password", err)
	}
}

// Processes starting at once on a new PostgreSQL schema all migrate it:
// the application's schema is applied under an advisory lock.
func TestConcurrentMigrateOnPostgres(t *testing.T) {
	url := testenv.Postgres(t)
	name := teststore.Schema(t, url, "appdb_")
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := appdb.Open(context.Background(), appdb.Config{URL: url, Schema: name, MaxConns: 2})
			if err != nil {
				errs <- err
				return
			}
			defer d.Close()
			errs <- d.Migrate(context.Background(), schema)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a concurrent migrate failed: %v", err)
		}
	}
}

// TestSQLiteFilesAreOwnerOnly checks that the store's database file, and
// the write-ahead log and shared memory beside it, are created readable by
// their owner only under the usual umask: they hold the documents.
func TestSQLiteFilesAreOwnerOnly(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "weir.db")
	d := openSQLite(t, path)
	if _, err := d.SQL.ExecContext(ctx, `INSERT INTO app_notes (id, body) VALUES (1, 'private')`); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("%s has mode %#o, want 0600", filepath.Base(p), got)
		}
	}
}
