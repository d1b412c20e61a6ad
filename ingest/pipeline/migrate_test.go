package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/appdb"
)

// previousRelease is the service's tables as the release before this one
// made them, named weir_*, with {{id}} for its auto-numbered key; the
// columns version and job its own migration added to the first release's
// tables are {{columns}}.
const previousRelease = `
CREATE TABLE weir_files (id TEXT PRIMARY KEY, path TEXT NOT NULL, source TEXT NOT NULL, etag TEXT NOT NULL,
	format TEXT NOT NULL, status TEXT NOT NULL, documents INTEGER NOT NULL,{{columns}}
	created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL);
CREATE INDEX weir_files_status ON weir_files (status);
CREATE INDEX weir_files_path ON weir_files (path);
CREATE TABLE weir_documents (id TEXT PRIMARY KEY, file_id TEXT NOT NULL, key TEXT NOT NULL, source TEXT NOT NULL,
	path TEXT NOT NULL, status TEXT NOT NULL, title TEXT NOT NULL, body TEXT NOT NULL, meta TEXT NOT NULL,
	language TEXT NOT NULL DEFAULT '', word_count INTEGER NOT NULL DEFAULT 0, key_terms TEXT NOT NULL DEFAULT '[]',
	summary TEXT NOT NULL DEFAULT '', extractor TEXT NOT NULL DEFAULT '', index_error TEXT NOT NULL DEFAULT '',
	indexed_at BIGINT NOT NULL DEFAULT 0,{{columns}} created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL);
CREATE INDEX weir_documents_file ON weir_documents (file_id);
CREATE INDEX weir_documents_path ON weir_documents (path);
CREATE INDEX weir_documents_status ON weir_documents (status, id);
CREATE TABLE weir_reindex_runs (id {{id}}, trigger TEXT NOT NULL, status TEXT NOT NULL, started_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL, finished_at BIGINT, total INTEGER NOT NULL DEFAULT 0, checked INTEGER NOT NULL DEFAULT 0,
	missing INTEGER NOT NULL DEFAULT 0, stale INTEGER NOT NULL DEFAULT 0, extra INTEGER NOT NULL DEFAULT 0,
	repaired INTEGER NOT NULL DEFAULT 0, last_id TEXT NOT NULL DEFAULT '', error TEXT NOT NULL DEFAULT '');
CREATE TABLE weir_failures (dead_letter_id BIGINT PRIMARY KEY, dir TEXT NOT NULL, written_at BIGINT NOT NULL);`

// makePreviousRelease makes, in db, weir's tables and the service's as the
// release before left them (with the columns version and job, or as the
// first release made them without), holding one processed file, its
// saved document, a finished reindex run and a failure; it returns the
// document's id.
func makePreviousRelease(t *testing.T, db *appdb.DB, withColumns bool) string {
	t.Helper()
	ctx := context.Background()
	if err := db.Migrate(ctx, nil); err != nil { // weir's own tables
		t.Fatal(err)
	}
	id := map[appdb.Driver]string{appdb.SQLite: "INTEGER PRIMARY KEY AUTOINCREMENT", appdb.Postgres: "BIGSERIAL PRIMARY KEY"}[db.Driver]
	columns, rowColumns, values := "", "", ""
	if withColumns {
		columns, rowColumns, values = " version BIGINT NOT NULL DEFAULT 0, job BIGINT NOT NULL DEFAULT 0,", ", version, job", ", 5, 9"
	}
	ddl := strings.NewReplacer("{{id}}", id, "{{columns}}", columns).Replace(previousRelease)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixMicro()
	fileID := pipeline.FileID("notes/bees.md", pipeline.ETag([]byte("# Bees")))
	docID := pipeline.DocumentID("notes/bees.md", "")
	for _, q := range []string{
		ddl,
		fmt.Sprintf(`INSERT INTO weir_files (id, path, source, etag, format, status, documents, created_at, updated_at%s)
			VALUES ('%s', 'notes/bees.md', 'notes', 'e1', 'markdown', 'processed', 1, %d, %d%s)`, rowColumns, fileID, at, at, values),
		fmt.Sprintf(`INSERT INTO weir_documents (id, file_id, key, source, path, status, title, body, meta, language, word_count,
			key_terms, summary, extractor, indexed_at, created_at, updated_at%s)
			VALUES ('%s', '%s', '', 'notes', 'notes/bees.md', 'saved', 'Bees', 'A hive of bees makes honey.', '{}', 'en', 6,
			'["bees","honey"]', 'Bees make honey.', 'local', %d, %d, %d%s)`, rowColumns, docID, fileID, at, at, at, values),
		fmt.Sprintf(`INSERT INTO weir_reindex_runs (trigger, status, started_at, updated_at, finished_at, total, checked)
			VALUES ('cli', 'done', %d, %d, %d, 1, 1)`, at, at, at),
		fmt.Sprintf(`INSERT INTO weir_failures (dead_letter_id, dir, written_at) VALUES (42, 'failed/x', %d)`, at),
	} {
		if _, err := db.SQL.ExecContext(ctx, q); err != nil {
			t.Fatalf("make the release before's tables: %v\n%s", err, q)
		}
	}
	return docID
}

// A database the release before made, whose service tables were named
// weir_*, is upgraded when the service opens it: the tables are renamed
// to ingest_*, with their rows, the columns a first-release database
// lacked are added, and the document is there to read, to search once
// reconciled, and to replace.
func TestPreviousReleaseDatabaseIsUpgradedDocumentsKept(t *testing.T) {
	for _, kind := range stores {
		for _, withColumns := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/columns=%v", kind, withColumns), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				root := t.TempDir()
				db := openDB(t, kind, root)
				docID := makePreviousRelease(t, db, withColumns)
				if cur, latest, err := pipeline.SchemaVersion(ctx, db); err != nil || cur != 0 || latest < 1 {
					t.Fatalf("SchemaVersion of the release before's database: %d, %d, %v; want 0 of at least 1", cur, latest, err)
				}

				h := newHarnessOver(t, root, db, nil) // pipeline.New migrates
				for _, table := range []string{"weir_files", "weir_documents", "weir_reindex_runs", "weir_failures"} {
					if ok, err := db.HasTable(ctx, table); err != nil || ok {
						t.Errorf("table %s is still there after the upgrade (%v)", table, err)
					}
				}
				if cur, latest, err := pipeline.SchemaVersion(ctx, db); err != nil || cur != latest {
					t.Fatalf("SchemaVersion after the upgrade: %d of %d (%v)", cur, latest, err)
				}
				doc, err := h.svc.Document(ctx, docID)
				if err != nil || doc.Title != "Bees" || doc.Body != "A hive of bees makes honey." || doc.Status != "saved" ||
					strings.Join(doc.KeyTerms, ",") != "bees,honey" || doc.Summary != "Bees make honey." {
					t.Fatalf("the release before's document after the upgrade: %+v, %v", doc, err)
				}
				if n := count(t, db, `SELECT count(*) FROM ingest_failures WHERE dead_letter_id = 42`); n != 1 {
					t.Fatalf("the release before's failure: %d rows in ingest_failures, want 1", n)
				}
				// The index (new, empty) is repaired from SQL: the document is
				// found again, and the new run is numbered after the old one.
				run, err := h.svc.Reindex(ctx, pipeline.TriggerCLI, nil)
				if err != nil || run.Missing != 1 || run.Repaired != 1 || run.ID != 2 {
					t.Fatalf("reindex after the upgrade: %+v, %v; want run 2 repairing the missing document", run, err)
				}
				hits, err := h.svc.Search(ctx, "honey", 10)
				if err != nil || len(hits) != 1 || hits[0].ID != docID {
					t.Fatalf("search after the upgrade: %+v, %v; want the release before's document", hits, err)
				}
				runs, err := h.svc.ReindexRuns(ctx, 10)
				if err != nil || len(runs) != 2 || runs[1].ID != 1 || runs[1].Trigger != "cli" {
					t.Fatalf("reindex runs after the upgrade: %+v, %v; want the old run kept", runs, err)
				}
				// A new version of the file replaces the document: the order of
				// versions works on the renamed tables (version and job).
				drop(t, h.dir, "notes/bees.md", []byte("# Bees\n\nBees dance to tell of flowers."))
				h.start()
				waitFor(t, "the new version's document", waitTimeout, func() (bool, string) {
					d, err := h.svc.Document(ctx, docID)
					return err == nil && strings.Contains(d.Body, "dance"), fmt.Sprintf("%q, %v", d.Body, err)
				})
			})
		}
	}
}

// The service's migrations are recorded in ingest_migrations, apart from
// weir's, and run once however often the service opens the database; a
// database a newer release migrated is refused.
func TestServiceTablesHaveTheirOwnHistory(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		_, latest, err := pipeline.SchemaVersion(ctx, h.db)
		if err != nil {
			t.Fatal(err)
		}
		if n := count(t, h.db, `SELECT count(*) FROM `+pipeline.MigrationsTable); n != latest {
			t.Fatalf("%s holds %d versions, want %d", pipeline.MigrationsTable, n, latest)
		}
		weirs := count(t, h.db, `SELECT count(*) FROM weir_migrations`)
		for range 2 {
			if err := pipeline.Migrate(ctx, h.db); err != nil {
				t.Fatal(err)
			}
		}
		if n := count(t, h.db, `SELECT count(*) FROM `+pipeline.MigrationsTable); n != latest {
			t.Fatalf("after Migrate twice, %s holds %d versions, want %d", pipeline.MigrationsTable, n, latest)
		}
		if n := count(t, h.db, `SELECT count(*) FROM weir_migrations`); n != weirs {
			t.Fatalf("the service's migrations wrote into weir_migrations: %d rows, want %d", n, weirs)
		}
		if _, err := h.db.SQL.ExecContext(ctx, `INSERT INTO `+pipeline.MigrationsTable+` (version, name, applied_at) VALUES ($1, 'future', 0)`, latest+1); err != nil {
			t.Fatal(err)
		}
		if err := pipeline.Migrate(ctx, h.db); !errors.Is(err, store.ErrSchemaTooNew) {
			t.Fatalf("Migrate of a database a newer release migrated: %v, want ErrSchemaTooNew", err)
		}
	})
}
