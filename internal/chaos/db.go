package chaos

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/appdb"
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
	// NATS is the URL of the NATS server, with JetStream, that carries the
	// workload's messages. Empty: a server embedded in the worker, kept in
	// Dir/nats, which dies with the worker.
	NATS string
	// Topics, when set, makes the run's topics its own on a shared NATS
	// server: chaos.<Topics>.docs and chaos.<Topics>.done, each with a
	// stream of its own. Letters, digits, '_' and '-'. Empty: chaos.docs
	// and chaos.done.
	Topics string
}

// docsTopic is the topic of the messages that announce the documents.
func (w Where) docsTopic() string { return w.topic("docs") }

// doneTopic is the topic of the workflows' notifications.
func (w Where) doneTopic() string { return w.topic("done") }

func (w Where) topic(name string) string {
	if w.Topics == "" {
		return "chaos." + name
	}
	return "chaos." + w.Topics + "." + name
}

// checkTopics returns an error unless w.Topics is empty or a name that
// can stand in a topic.
func (w Where) checkTopics() error {
	for _, r := range w.Topics {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Errorf("chaos: Where.Topics %q has %q; use letters, digits, '_' and '-'", w.Topics, r)
		}
	}
	return nil
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
