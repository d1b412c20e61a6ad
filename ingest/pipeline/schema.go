package pipeline

import (
	"context"
	"embed"
	"fmt"

	"github.com/weirhq/weir/store/appdb"
)

// The statuses of a file and of a document.
const (
	fileParsed    = "parsed"    // its documents are in ingest_documents
	fileProcessed = "processed" // moved to processed/
	fileFailed    = "failed"    // its parse was dead-lettered, or all its documents; moved to failed/
	// fileSuperseded: a newer version of its path was parsed before it
	// ended; its documents are the newer version's now.
	fileSuperseded = "superseded"

	docParsed = "parsed" // waiting for extract and save
	docSaved  = "saved"  // the extraction is in SQL: searchable once indexed
	docFailed = "failed" // dead-lettered; in failed/
)

// MigrationsTable records the versions of the service's tables, apart
// from weir's weir_migrations.
const MigrationsTable = "ingest_migrations"

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations are the service's tables' history (see migrations/): version 1
// makes them, or takes over the tables of the release before, which
// named them weir_*.
var migrations = appdb.Migrations{Table: MigrationsTable, FS: migrationFS, Dir: "migrations",
	Before: map[int]func(context.Context, appdb.SchemaTx) error{1: upgradeWeirTables}}

// Migrate brings weir's tables up to date, then the service's: it applies
// the migrations the database lacks, each once, recording them in
// MigrationsTable. A database of the release before, whose service tables
// were named weir_files, weir_documents, weir_reindex_runs and
// weir_failures, keeps them, renamed, with their rows. It can run again,
// and in several processes at once; a database a newer release migrated is
// refused with an error wrapping store.ErrSchemaTooNew.
func Migrate(ctx context.Context, db *appdb.DB) error {
	_, err := db.MigrateTables(ctx, migrations)
	return err
}

// SchemaVersion returns the version of the service's tables (0 before
// Migrate made them) and the newest this release knows. It writes
// nothing.
func SchemaVersion(ctx context.Context, db *appdb.DB) (current, latest int, err error) {
	return db.TablesVersion(ctx, migrations)
}

// renamed are the service's tables as the release before named them.
var renamed = []struct{ old, new string }{
	{"weir_files", "ingest_files"},
	{"weir_documents", "ingest_documents"},
	{"weir_reindex_runs", "ingest_reindex_runs"},
	{"weir_failures", "ingest_failures"},
}

// oldIndexes are the release before's secondary indexes, remade under
// the new names by the migration's SQL.
var oldIndexes = []string{"weir_files_status", "weir_files_path", "weir_documents_file", "weir_documents_path", "weir_documents_status"}

// upgradeWeirTables renames the tables of the release before to the
// service's names, when they exist (the migration's SQL then finds them in
// place), with their rows; and adds the columns that release's own
// migration added to tables made before it (the order of the versions of
// a path).
func upgradeWeirTables(ctx context.Context, tx appdb.SchemaTx) error {
	var stmts []string
	for _, r := range renamed {
		old, err := tx.HasTable(ctx, r.old)
		if err != nil {
			return err
		}
		if !old {
			continue
		}
		stmts = append(stmts, fmt.Sprintf(`ALTER TABLE %s RENAME TO %s`, r.old, r.new))
		if tx.Driver == appdb.Postgres {
			stmts = append(stmts, fmt.Sprintf(`ALTER INDEX IF EXISTS %s_pkey RENAME TO %s_pkey`, r.old, r.new))
		}
	}
	if len(stmts) == 0 {
		return nil // a new database
	}
	if tx.Driver == appdb.Postgres {
		stmts = append(stmts, `ALTER SEQUENCE IF EXISTS weir_reindex_runs_id_seq RENAME TO ingest_reindex_runs_id_seq`)
	}
	for _, ix := range oldIndexes {
		stmts = append(stmts, `DROP INDEX IF EXISTS `+ix)
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("rename the release before's tables: %w", err)
		}
	}
	for _, table := range []string{"ingest_files", "ingest_documents"} {
		for _, col := range []string{"version", "job"} {
			has, err := tx.HasColumn(ctx, table, col)
			if err != nil {
				return err
			}
			if has {
				continue
			}
			if _, err := tx.ExecContext(ctx, fmt.Sprintf(`ALTER TABLE %s ADD COLUMN %s BIGINT NOT NULL DEFAULT 0`, table, col)); err != nil {
				return fmt.Errorf("add %s.%s: %w", table, col, err)
			}
		}
	}
	return nil
}
