package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/postgres"
	"github.com/weirhq/weir/store/sqlite"
	"github.com/weirhq/weir/workflow"
)

// Where is where the workload keeps its database: a SQLite file in Dir,
// or, with Postgres set, a schema of a PostgreSQL database.
type Where struct {
	// Dir holds the run's SQLite database (without Postgres), its broker,
	// blobs and index.
	Dir string
	// Postgres is the URL of a PostgreSQL database, and Schema the schema
	// the workload keeps there (default "weir_chaos").
	Postgres, Schema string
}

// defaultSchema is the PostgreSQL schema of a run that names none.
const defaultSchema = "weir_chaos"

// txn is a transaction of the workload's database: exec runs a
// statement on the workload's tables in it, and ex is weir's Executor
// bound to it.
type txn struct {
	exec func(ctx context.Context, query string, args ...any) error
	ex   store.Executor
}

// db is the workload's database: weir's store, and the workload's own
// tables beside it (chaos_docs, chaos_notified, chaos_broker_dead). Its
// statements number their parameters ($1), which both SQLite and
// PostgreSQL read.
type db struct {
	st  workflow.Store
	sql *sql.DB
	// runTx runs fn in a transaction with weir's Executor bound to it.
	runTx func(ctx context.Context, fn func(tx txn, ex store.Executor) error) error
	close func() error
}

// The workload's tables, in each dialect.
const (
	sqliteSchema = `
CREATE TABLE IF NOT EXISTS chaos_docs (id TEXT PRIMARY KEY, poison INTEGER NOT NULL, pages INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS chaos_notified (seq INTEGER PRIMARY KEY AUTOINCREMENT, doc TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chaos_broker_dead (seq INTEGER PRIMARY KEY AUTOINCREMENT, topic TEXT NOT NULL, id TEXT NOT NULL, reason TEXT NOT NULL);`
	postgresSchema = `
CREATE TABLE IF NOT EXISTS chaos_docs (id TEXT PRIMARY KEY, poison BOOLEAN NOT NULL, pages INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS chaos_notified (seq BIGSERIAL PRIMARY KEY, doc TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chaos_broker_dead (seq BIGSERIAL PRIMARY KEY, topic TEXT NOT NULL, id TEXT NOT NULL, reason TEXT NOT NULL);`
)

// openDB opens and migrates the workload's database at w, with its
// tables.
func openDB(ctx context.Context, w Where) (*db, error) {
	if w.Postgres == "" {
		return openSQLite(ctx, w.Dir)
	}
	return openPostgres(ctx, w)
}

func openSQLite(ctx context.Context, dir string) (*db, error) {
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "weir.db")})
	if err != nil {
		return nil, err
	}
	d := &db{st: st, sql: st.DB(), close: st.Close,
		runTx: func(ctx context.Context, fn func(txn, store.Executor) error) error {
			return st.RunTx(ctx, func(tx *sql.Tx, ex store.Executor) error {
				return fn(txn{ex: ex, exec: func(ctx context.Context, q string, args ...any) error {
					_, err := tx.ExecContext(ctx, q, args...)
					return err
				}}, ex)
			})
		}}
	if err := d.migrate(ctx, st, sqliteSchema); err != nil {
		st.Close()
		return nil, err
	}
	return d, nil
}

func openPostgres(ctx context.Context, w Where) (*db, error) {
	st, err := postgres.Open(ctx, postgres.Config{URL: w.Postgres, Schema: w.schema(), MaxConns: 8})
	if err != nil {
		return nil, err
	}
	sdb := stdlib.OpenDBFromPool(st.Pool())
	d := &db{st: st, sql: sdb, close: func() error { return errors.Join(sdb.Close(), st.Close()) },
		runTx: func(ctx context.Context, fn func(txn, store.Executor) error) error {
			return st.RunTx(ctx, func(tx pgx.Tx, ex store.Executor) error {
				return fn(txn{ex: ex, exec: func(ctx context.Context, q string, args ...any) error {
					_, err := tx.Exec(ctx, q, args...)
					return err
				}}, ex)
			})
		}}
	if err := d.migrate(ctx, st, postgresSchema); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// migrate brings weir's tables up to date and creates the workload's.
func (d *db) migrate(ctx context.Context, m interface {
	Migrate(context.Context) (int, error)
}, schema string) error {
	if _, err := m.Migrate(ctx); err != nil {
		return err
	}
	if _, err := d.sql.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("chaos tables: %w", err)
	}
	return nil
}
