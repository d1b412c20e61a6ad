package chaos

import (
	"context"
	"path/filepath"

	"github.com/weirhq/weir/internal/appdb"
	"github.com/weirhq/weir/store"
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

// db is the workload's database: weir's store, and the workload's own
// tables beside it (chaos_docs, chaos_notified, chaos_broker_dead).
type db struct{ *appdb.DB }

// runTx runs fn in a transaction, in the shape inbox.Handle takes.
func (d *db) runTx(ctx context.Context, fn func(tx appdb.Tx, ex store.Executor) error) error {
	return d.RunTx(ctx, func(tx appdb.Tx) error { return fn(tx, tx.Ex) })
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
	d, err := appdb.Open(ctx, appdb.Config{URL: w.Postgres, Schema: w.schema(), MaxConns: 8, Path: filepath.Join(w.Dir, "weir.db")})
	if err != nil {
		return nil, err
	}
	if err := d.Migrate(ctx, map[appdb.Driver]string{appdb.SQLite: sqliteSchema, appdb.Postgres: postgresSchema}); err != nil {
		d.Close()
		return nil, err
	}
	return &db{d}, nil
}
