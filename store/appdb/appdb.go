// Package appdb opens weir's store together with an application's own
// tables beside it, on SQLite or PostgreSQL, and runs transactions that
// write both: the application's rows and weir's (a job, an outbox
// message) commit as one. The ingestion service and the chaos harness keep
// their tables this way.
//
// Statements number their parameters ($1, $2, …), which both SQLite and
// PostgreSQL read, so one statement serves both drivers. An application's
// tables get a versioned history of their own with MigrateTables: files
// NNNN_name.sql that serve both drivers, recorded in a table of the
// application's, apart from weir's weir_migrations.
package appdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/postgres"
	"github.com/weirhq/weir/store/sqlite"
)

// Driver names the database behind a DB.
type Driver string

// The drivers.
const (
	SQLite   Driver = "sqlite"
	Postgres Driver = "postgres"
)

// Store is weir's store as a DB holds it: its queries, and transactions
// of its own.
type Store interface {
	store.Store
	store.Transactor
}

// Config says where the database is.
type Config struct {
	// URL is a PostgreSQL URL (postgres:// or postgresql://); empty for
	// the SQLite file at Path.
	URL string
	// Schema is the PostgreSQL schema of weir's tables and the
	// application's. Default postgres.DefaultSchema.
	Schema string
	// MaxConns bounds the PostgreSQL pool. Default: pgx's.
	MaxConns int32
	// Path is the SQLite file, used when URL is empty. Required then.
	Path string
}

// DB is weir's store and the application's tables beside it.
type DB struct {
	// Store is weir's store.
	Store Store
	// SQL reaches the application's tables (for PostgreSQL, over the
	// store's own pool, in its schema).
	SQL    *sql.DB
	Driver Driver

	runTx func(ctx context.Context, fn func(Tx) error) error
	close func() error
}

// Tx is a transaction of a DB: the application's statements, and weir's
// Executor bound to the same transaction.
type Tx struct {
	// Ex is weir's Executor in the transaction.
	Ex store.Executor

	exec     func(ctx context.Context, query string, args ...any) (int64, error)
	queryRow func(ctx context.Context, query string, args ...any) Row
	query    func(ctx context.Context, query string, args ...any) (Rows, error)
}

// Row is one row of a query: database/sql's and pgx's both scan so.
type Row interface{ Scan(dest ...any) error }

// Rows is the rows of a query, closed by the caller.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Exec runs a statement in the transaction and returns the rows it
// affected.
func (t Tx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return t.exec(ctx, query, args...)
}

// QueryRow runs a query in the transaction that returns at most one row.
func (t Tx) QueryRow(ctx context.Context, query string, args ...any) Row {
	return t.queryRow(ctx, query, args...)
}

// Query runs a query in the transaction.
func (t Tx) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	return t.query(ctx, query, args...)
}

// Strings runs a query in the transaction whose rows have one text
// column, and returns the column's values.
func (t Tx) Strings(ctx context.Context, query string, args ...any) ([]string, error) {
	rows, err := t.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return scanStrings(rows)
}

// Strings runs a query of the application's tables whose rows have one
// text column, and returns the column's values.
func (db *DB) Strings(ctx context.Context, query string, args ...any) ([]string, error) {
	rows, err := db.SQL.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return scanStrings(sqlRows{rows})
}

// scanStrings returns the values of the one column of rows, and closes
// them.
func scanStrings(rows Rows) ([]string, error) {
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// Open opens the database cfg names. It does not migrate: call Migrate.
// A SQLite file's directory must exist.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	switch {
	case cfg.URL == "" && cfg.Path == "":
		return nil, errors.New("appdb: neither a PostgreSQL URL nor a SQLite path")
	case cfg.URL == "":
		return openSQLite(ctx, cfg.Path)
	case strings.HasPrefix(cfg.URL, "postgres://") || strings.HasPrefix(cfg.URL, "postgresql://"):
		return openPostgres(ctx, cfg)
	default:
		return nil, fmt.Errorf("appdb: store URL %q: want postgres://… or postgresql://… (or none, for the embedded SQLite file)", redactURL(cfg.URL))
	}
}

// redactURL keeps a URL's scheme and host, not its credentials.
func redactURL(u string) string {
	if i := strings.Index(u, "@"); i >= 0 {
		if j := strings.Index(u, "://"); j >= 0 && j < i {
			return u[:j+3] + "…" + u[i:]
		}
	}
	return u
}

func openSQLite(ctx context.Context, path string) (*DB, error) {
	if _, err := os.Stat(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("appdb: %w", err)
	}
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		return nil, err
	}
	return &DB{Store: st, SQL: st.DB(), Driver: SQLite, close: st.Close,
		runTx: func(ctx context.Context, fn func(Tx) error) error {
			return st.RunTx(ctx, func(tx *sql.Tx, ex store.Executor) error {
				return fn(Tx{Ex: ex,
					exec: func(ctx context.Context, q string, args ...any) (int64, error) {
						res, err := tx.ExecContext(ctx, q, args...)
						if err != nil {
							return 0, err
						}
						return res.RowsAffected()
					},
					queryRow: func(ctx context.Context, q string, args ...any) Row { return tx.QueryRowContext(ctx, q, args...) },
					query: func(ctx context.Context, q string, args ...any) (Rows, error) {
						rows, err := tx.QueryContext(ctx, q, args...)
						if err != nil {
							return nil, err
						}
						return sqlRows{rows}, nil
					},
				})
			})
		}}, nil
}

// sqlRows adapts *sql.Rows, whose Close returns an error, to Rows.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

func openPostgres(ctx context.Context, cfg Config) (*DB, error) {
	st, err := postgres.Open(ctx, postgres.Config{URL: cfg.URL, Schema: cfg.Schema, MaxConns: cfg.MaxConns})
	if err != nil {
		return nil, err
	}
	sdb := stdlib.OpenDBFromPool(st.Pool())
	return &DB{Store: st, SQL: sdb, Driver: Postgres, close: func() error { return errors.Join(sdb.Close(), st.Close()) },
		runTx: func(ctx context.Context, fn func(Tx) error) error {
			return st.RunTx(ctx, func(tx pgx.Tx, ex store.Executor) error {
				return fn(Tx{Ex: ex,
					exec: func(ctx context.Context, q string, args ...any) (int64, error) {
						tag, err := tx.Exec(ctx, q, args...)
						return tag.RowsAffected(), err
					},
					queryRow: func(ctx context.Context, q string, args ...any) Row { return tx.QueryRow(ctx, q, args...) },
					query: func(ctx context.Context, q string, args ...any) (Rows, error) {
						rows, err := tx.Query(ctx, q, args...)
						if err != nil {
							return nil, err
						}
						return pgxRows{rows}, nil
					},
				})
			})
		}}, nil
}

// pgxRows adapts pgx.Rows, whose Err and Close differ, to Rows.
type pgxRows struct{ pgx.Rows }

func (r pgxRows) Close() { r.Rows.Close() }

// RunTx runs fn in a transaction and commits it if fn returns nil.
func (d *DB) RunTx(ctx context.Context, fn func(Tx) error) error { return d.runTx(ctx, fn) }

// Migrate brings weir's tables up to date, then runs the application's
// schema for this driver: statements that can run again (CREATE … IF NOT
// EXISTS), separated by semicolons. MigrateTables gives an application's
// tables a versioned history instead.
func (d *DB) Migrate(ctx context.Context, schema map[Driver]string) error {
	if err := d.migrateStore(ctx); err != nil {
		return err
	}
	s := schema[d.Driver]
	if s == "" {
		return nil
	}
	if err := d.applySchema(ctx, s); err != nil {
		return fmt.Errorf("appdb: the application's tables: %w", err)
	}
	return nil
}

// schemaLockKey is the PostgreSQL advisory lock under which processes
// starting at once apply the application's schema one after another
// (CREATE … IF NOT EXISTS run concurrently can still collide).
const schemaLockKey = 0x77656972617070 // "weirapp"

// applySchema runs the statements of schema: on PostgreSQL in one
// transaction under schemaLockKey.
func (d *DB) applySchema(ctx context.Context, schema string) error {
	if d.Driver != Postgres {
		_, err := d.SQL.ExecContext(ctx, schema)
		return err
	}
	tx, err := d.SQL.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(schemaLockKey)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, schema); err != nil {
		return err
	}
	return tx.Commit()
}

// Close closes the database.
func (d *DB) Close() error { return d.close() }
