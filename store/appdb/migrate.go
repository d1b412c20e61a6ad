package appdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"time"

	"github.com/weirhq/weir/store/migration"
)

// Migrations are an application's versioned migrations: its tables'
// history, applied beside weir's and tracked apart from it, in a table of
// the application's own, so that the two sequences number their versions
// independently.
//
// The files follow store/migration's rules: NNNN_name.sql, versions from 1
// without gaps; a database that knows a version this binary does not is
// refused and left as it is. One file serves both drivers: statements
// number their parameters ($1, $2, …), types are those both read (TEXT,
// INTEGER, BIGINT), and the one column both cannot spell alike, an
// auto-numbered key, is written {{autoid}} (INTEGER PRIMARY KEY
// AUTOINCREMENT on SQLite, BIGSERIAL PRIMARY KEY on PostgreSQL).
type Migrations struct {
	// Table records the versions applied, such as "ingest_migrations": a
	// lower-case SQL name, never weir's own weir_migrations. Required.
	Table string
	// FS holds the migration files, in Dir ("." when empty). Required.
	FS  fs.FS
	Dir string
	// Before, for a version, runs in that migration's transaction, before
	// its SQL: for the steps SQL cannot say alike on both drivers, such as
	// renaming a table only if it exists. An error rolls the migration
	// back. Default none.
	Before map[int]func(ctx context.Context, tx SchemaTx) error
}

// SchemaTx is the transaction of one migration.
type SchemaTx struct {
	*sql.Tx
	Driver Driver
}

// HasTable reports whether the database (for PostgreSQL, the store's
// schema) holds the table name.
func (t SchemaTx) HasTable(ctx context.Context, name string) (bool, error) {
	return hasTable(ctx, t.Tx, t.Driver, name)
}

// HasColumn reports whether table has the column name.
func (t SchemaTx) HasColumn(ctx context.Context, table, name string) (bool, error) {
	q := `SELECT count(*) FROM pragma_table_info($1) WHERE name = $2`
	if t.Driver == Postgres {
		q = `SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2`
	}
	var n int
	err := t.QueryRowContext(ctx, q, table, name).Scan(&n)
	return n > 0, err
}

// HasTable reports whether the database (for PostgreSQL, the store's
// schema) holds the table name. It writes nothing.
func (d *DB) HasTable(ctx context.Context, name string) (bool, error) {
	return hasTable(ctx, d.SQL, d.Driver, name)
}

// queryRower is what *sql.DB and *sql.Tx share that hasTable needs.
type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func hasTable(ctx context.Context, q queryRower, driver Driver, name string) (bool, error) {
	query := `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = $1`
	if driver == Postgres {
		query = `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = $1`
	}
	var n int
	err := q.QueryRowContext(ctx, query, name).Scan(&n)
	return n > 0, err
}

// autoID is how each driver spells {{autoid}}.
var autoID = map[Driver]string{
	SQLite:   "INTEGER PRIMARY KEY AUTOINCREMENT",
	Postgres: "BIGSERIAL PRIMARY KEY",
}

var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// load checks m and reads its migrations.
func (m Migrations) load() ([]migration.Migration, error) {
	switch {
	case !tableName.MatchString(m.Table) || len(m.Table) > 63:
		return nil, fmt.Errorf("appdb: Migrations.Table %q: want a lower-case SQL name", m.Table)
	case m.Table == "weir_migrations":
		return nil, errors.New("appdb: Migrations.Table must not be weir's own weir_migrations")
	case m.FS == nil:
		return nil, errors.New("appdb: Migrations.FS is required")
	}
	dir := m.Dir
	if dir == "" {
		dir = "."
	}
	all, err := migration.Load(m.FS, dir)
	if err != nil {
		return nil, fmt.Errorf("appdb: %s: %w", m.Table, err)
	}
	for v := range m.Before {
		if v < 1 || v > migration.Latest(all) {
			return nil, fmt.Errorf("appdb: Migrations.Before names version %d, which %s does not have", v, m.Table)
		}
	}
	return all, nil
}

// MigrateTables brings weir's tables up to date, then applies the
// application's migrations the database lacks, each in a transaction of
// its own that records it in m.Table, and returns how many of the
// application's it applied. A database whose application tables a newer
// release migrated is refused, changed in nothing, with an error wrapping
// store.ErrSchemaTooNew. Processes that migrate one database at once apply
// each migration once: each step reads the version inside its
// transaction, which on SQLite holds the write lock and on PostgreSQL an
// advisory lock named for the schema and m.Table.
func (d *DB) MigrateTables(ctx context.Context, m Migrations) (int, error) {
	all, err := m.load()
	if err != nil {
		return 0, err
	}
	if err := d.migrateStore(ctx); err != nil {
		return 0, err
	}
	applied := 0
	for {
		done, err := d.migrateOne(ctx, m, all)
		if err != nil {
			return applied, fmt.Errorf("appdb: migrate %s: %w", m.Table, err)
		}
		if done {
			return applied, nil
		}
		applied++
	}
}

// TablesVersion returns the version of the application's tables (0
// before their first migration) and the newest of m. It writes nothing.
func (d *DB) TablesVersion(ctx context.Context, m Migrations) (current, latest int, err error) {
	all, err := m.load()
	if err != nil {
		return 0, 0, err
	}
	current, err = tablesVersion(ctx, d.SQL, d.Driver, m.Table)
	if err != nil {
		return 0, 0, fmt.Errorf("appdb: the version of %s: %w", m.Table, err)
	}
	return current, migration.Latest(all), nil
}

// tablesVersion reads the newest version recorded in table; 0 when there
// is none, or no table.
func tablesVersion(ctx context.Context, q queryRower, driver Driver, table string) (int, error) {
	ok, err := hasTable(ctx, q, driver, table)
	if err != nil || !ok {
		return 0, err
	}
	var v int
	err = q.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM `+table).Scan(&v)
	return v, err
}

// migrateStore brings weir's own tables up to date.
func (d *DB) migrateStore(ctx context.Context) error {
	m, ok := d.Store.(interface {
		Migrate(context.Context) (int, error)
	})
	if !ok {
		return errors.New("appdb: the store cannot migrate")
	}
	_, err := m.Migrate(ctx)
	return err
}

// migrateOne applies the next pending migration of m in a transaction of
// its own; done is true when none was pending.
func (d *DB) migrateOne(ctx context.Context, m Migrations, all []migration.Migration) (done bool, err error) {
	tx, err := d.SQL.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }()
	if d.Driver == Postgres {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || '.' || $1, 0))`, m.Table); err != nil {
			return false, err
		}
	}
	current, err := tablesVersion(ctx, tx, d.Driver, m.Table)
	if err != nil {
		return false, err
	}
	pending, err := migration.Pending(current, all)
	if err != nil {
		return false, err
	}
	if len(pending) == 0 {
		return true, nil
	}
	step := pending[0]
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+m.Table+` (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at BIGINT  NOT NULL
	)`); err != nil {
		return false, err
	}
	if before := m.Before[step.Version]; before != nil {
		if err := before(ctx, SchemaTx{Tx: tx, Driver: d.Driver}); err != nil {
			return false, fmt.Errorf("%04d_%s: %w", step.Version, step.Name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, strings.ReplaceAll(step.SQL, "{{autoid}}", autoID[d.Driver])); err != nil {
		return false, fmt.Errorf("%04d_%s: %w", step.Version, step.Name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+m.Table+` (version, name, applied_at) VALUES ($1, $2, $3)`,
		step.Version, step.Name, time.Now().UnixMicro()); err != nil {
		return false, fmt.Errorf("%04d_%s: record: %w", step.Version, step.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("%04d_%s: commit: %w", step.Version, step.Name, err)
	}
	return false, nil
}
