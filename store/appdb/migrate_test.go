package appdb_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/weirhq/weir/internal/testenv"
	"github.com/weirhq/weir/internal/teststore"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/appdb"
)

// notesV1 and notesV2 are an application's two migrations: one file each
// for both drivers.
var notesV1 = fstest.MapFS{
	"m/0001_notes.sql": {Data: []byte(`CREATE TABLE app_notes (id {{autoid}}, body TEXT NOT NULL, at BIGINT NOT NULL);
CREATE INDEX app_notes_at ON app_notes (at);`)},
}

func notesV2() fstest.MapFS {
	fs := fstest.MapFS{"m/0002_tags.sql": {Data: []byte(`ALTER TABLE app_notes ADD COLUMN tag TEXT NOT NULL DEFAULT '';`)}}
	for k, v := range notesV1 {
		fs[k] = v
	}
	return fs
}

// openOn opens a database on the driver named kind: a SQLite file of the
// test's own, or a PostgreSQL schema of the test's own (dropped at its
// end). More than one call with one t on PostgreSQL open the same schema.
func openOn(t *testing.T, kind string) func() *appdb.DB {
	t.Helper()
	cfg := appdb.Config{Path: filepath.Join(t.TempDir(), "weir.db")}
	if kind == "postgres" {
		url := testenv.Postgres(t)
		cfg = appdb.Config{URL: url, Schema: teststore.Schema(t, url, "appdb_"), MaxConns: 4}
	}
	return func() *appdb.DB {
		t.Helper()
		d, err := appdb.Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}
}

var drivers = []string{"sqlite", "postgres"}

// An application's migrations are applied in order, once, and recorded in
// its own table, apart from weir's: one file serves both drivers, the
// auto-numbered key included.
func TestMigrateTablesAppliesEachVersionOnce(t *testing.T) {
	for _, kind := range drivers {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			d := openOn(t, kind)()
			m := appdb.Migrations{Table: "app_migrations", FS: notesV1, Dir: "m"}
			if cur, latest, err := d.TablesVersion(ctx, m); err != nil || cur != 0 || latest != 1 {
				t.Fatalf("TablesVersion before: %d, %d, %v; want 0, 1", cur, latest, err)
			}
			if ok, err := d.HasTable(ctx, "app_migrations"); err != nil || ok {
				t.Fatalf("TablesVersion made the table app_migrations (%v, %v): it must write nothing", ok, err)
			}
			if n, err := d.MigrateTables(ctx, m); err != nil || n != 1 {
				t.Fatalf("first MigrateTables: %d, %v; want 1 applied", n, err)
			}
			// weir's own tables were migrated first, and keep their own
			// history.
			if cur, latest, err := d.Store.SchemaVersion(ctx); err != nil || cur != latest {
				t.Fatalf("weir's schema at %d of %d (%v) after MigrateTables", cur, latest, err)
			}
			m.FS = notesV2()
			if n, err := d.MigrateTables(ctx, m); err != nil || n != 1 {
				t.Fatalf("MigrateTables with a second version: %d, %v; want 1 applied", n, err)
			}
			if n, err := d.MigrateTables(ctx, m); err != nil || n != 0 {
				t.Fatalf("MigrateTables again: %d, %v; want none applied", n, err)
			}
			if cur, latest, err := d.TablesVersion(ctx, m); err != nil || cur != 2 || latest != 2 {
				t.Fatalf("TablesVersion after: %d, %d, %v; want 2, 2", cur, latest, err)
			}
			var names []string
			rows, err := d.SQL.QueryContext(ctx, `SELECT name FROM app_migrations ORDER BY version`)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var n string
				if err := rows.Scan(&n); err != nil {
					t.Fatal(err)
				}
				names = append(names, n)
			}
			if err := rows.Close(); err != nil || strings.Join(names, ",") != "notes,tags" {
				t.Fatalf("app_migrations records %v (%v), want notes,tags", names, err)
			}
			for i := range 2 {
				var id int64
				if err := d.SQL.QueryRowContext(ctx, `INSERT INTO app_notes (body, at, tag) VALUES ('n', 1, 't') RETURNING id`).Scan(&id); err != nil || id != int64(i+1) {
					t.Fatalf("insert without an id: id %d, %v; want %d", id, err, i+1)
				}
			}
		})
	}
}

// A database whose application tables a newer release migrated is
// refused, and left as it is.
func TestMigrateTablesRefusesANewerDatabase(t *testing.T) {
	for _, kind := range drivers {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			d := openOn(t, kind)()
			if _, err := d.MigrateTables(ctx, appdb.Migrations{Table: "app_migrations", FS: notesV2(), Dir: "m"}); err != nil {
				t.Fatal(err)
			}
			older := appdb.Migrations{Table: "app_migrations", FS: notesV1, Dir: "m"}
			n, err := d.MigrateTables(ctx, older)
			if !errors.Is(err, store.ErrSchemaTooNew) || n != 0 || !strings.Contains(err.Error(), "app_migrations") {
				t.Fatalf("an older release's MigrateTables: %d, %v; want ErrSchemaTooNew naming app_migrations", n, err)
			}
			if cur, _, err := d.TablesVersion(ctx, older); err != nil || cur != 2 {
				t.Fatalf("version %d (%v) after the refusal, want 2 kept", cur, err)
			}
		})
	}
}

// A migration's Before step runs in its transaction: when the step or the
// SQL fails, neither its changes nor the record of the version stay.
func TestMigrateTablesBeforeStepIsInTheTransaction(t *testing.T) {
	for _, kind := range drivers {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			d := openOn(t, kind)()
			if _, err := d.SQL.ExecContext(ctx, `CREATE TABLE old_notes (id BIGINT PRIMARY KEY, body TEXT NOT NULL, at BIGINT NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			if _, err := d.SQL.ExecContext(ctx, `INSERT INTO old_notes (id, body, at) VALUES (7, 'kept', 1)`); err != nil {
				t.Fatal(err)
			}
			fail := errors.New("planted failure")
			var failing bool
			rename := func(ctx context.Context, tx appdb.SchemaTx) error {
				old, err := tx.HasTable(ctx, "old_notes")
				if err != nil || !old {
					return err
				}
				if has, err := tx.HasColumn(ctx, "old_notes", "at"); err != nil || !has {
					t.Errorf("HasColumn(old_notes, at) = %v, %v; want true", has, err)
				}
				if has, err := tx.HasColumn(ctx, "old_notes", "tag"); err != nil || has {
					t.Errorf("HasColumn(old_notes, tag) = %v, %v; want false", has, err)
				}
				if _, err := tx.ExecContext(ctx, `ALTER TABLE old_notes RENAME TO app_notes`); err != nil {
					return err
				}
				if failing {
					return fail
				}
				return nil
			}
			fsys := fstest.MapFS{"0001_notes.sql": {Data: []byte(`CREATE TABLE IF NOT EXISTS app_notes (id {{autoid}}, body TEXT NOT NULL, at BIGINT NOT NULL);`)}}
			m := appdb.Migrations{Table: "app_migrations", FS: fsys, Before: map[int]func(context.Context, appdb.SchemaTx) error{1: rename}}
			failing = true
			if _, err := d.MigrateTables(ctx, m); !errors.Is(err, fail) {
				t.Fatalf("MigrateTables with a failing Before: %v, want the failure", err)
			}
			for table, want := range map[string]bool{"old_notes": true, "app_notes": false} {
				if ok, err := d.HasTable(ctx, table); err != nil || ok != want {
					t.Fatalf("after the failed migration, table %s exists: %v (%v); want %v", table, ok, err, want)
				}
			}
			if cur, _, err := d.TablesVersion(ctx, m); err != nil || cur != 0 {
				t.Fatalf("version %d (%v) after a failed migration, want 0", cur, err)
			}
			failing = false
			if n, err := d.MigrateTables(ctx, m); err != nil || n != 1 {
				t.Fatalf("MigrateTables: %d, %v", n, err)
			}
			var body string
			if err := d.SQL.QueryRowContext(ctx, `SELECT body FROM app_notes WHERE id = 7`).Scan(&body); err != nil || body != "kept" {
				t.Fatalf("the renamed table's row: %q, %v", body, err)
			}
		})
	}
}

// Processes that migrate one database at once apply each migration once.
func TestMigrateTablesConcurrently(t *testing.T) {
	for _, kind := range drivers {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			open := openOn(t, kind)
			var wg sync.WaitGroup
			applied := make(chan int, 4)
			errs := make(chan error, 4)
			for range 4 {
				d := open()
				wg.Go(func() {
					n, err := d.MigrateTables(context.Background(), appdb.Migrations{Table: "app_migrations", FS: notesV2(), Dir: "m"})
					applied <- n
					errs <- err
				})
			}
			wg.Wait()
			close(applied)
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("a concurrent MigrateTables failed: %v", err)
				}
			}
			total := 0
			for n := range applied {
				total += n
			}
			if total != 2 {
				t.Fatalf("%d migrations applied in all by 4 processes, want 2: each once", total)
			}
		})
	}
}

// Migrations are checked before anything is run.
func TestMigrationsRefuseBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openOn(t, "sqlite")()
	for _, c := range []struct {
		m    appdb.Migrations
		want string
	}{
		{appdb.Migrations{FS: notesV1, Dir: "m"}, "Migrations.Table"},
		{appdb.Migrations{Table: "App; DROP", FS: notesV1, Dir: "m"}, "lower-case SQL name"},
		{appdb.Migrations{Table: "weir_migrations", FS: notesV1, Dir: "m"}, "weir's own"},
		{appdb.Migrations{Table: "app_migrations"}, "FS is required"},
		{appdb.Migrations{Table: "app_migrations", FS: fstest.MapFS{"m/1_x.sql": {}}, Dir: "m"}, "NNNN_name.sql"},
		{appdb.Migrations{Table: "app_migrations", FS: notesV1, Dir: "m",
			Before: map[int]func(context.Context, appdb.SchemaTx) error{2: nil}}, "version 2"},
	} {
		if _, err := d.MigrateTables(ctx, c.m); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("MigrateTables(%+v): %v, want an error naming %q", c.m, err, c.want)
		}
	}
	if ok, err := d.HasTable(ctx, "weir_jobs"); err != nil || ok {
		t.Fatalf("a refused MigrateTables migrated weir's tables (%v, %v)", ok, err)
	}
}
