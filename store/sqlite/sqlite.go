package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/weirhq/weir/internal/sqlitefile"

	// The pure-Go SQLite driver, registered as "sqlite".
	_ "modernc.org/sqlite"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/migration"
)

// DefaultBusyTimeout is how long a connection waits for a lock another
// connection (another process, or this store's readers during a checkpoint)
// holds before it gives up with SQLITE_BUSY.
const DefaultBusyTimeout = sqlitefile.DefaultBusyTimeout

// Config configures a Store.
type Config struct {
	// Path is the database file. Required. It is created, readable and
	// writable by its owner only (0600), if it does not exist; its
	// directory must exist and be writable, since SQLite keeps
	// the write-ahead log (Path-wal) and shared memory (Path-shm) beside
	// it. In-memory databases are refused: the store's two pools must
	// share one database.
	Path string
	// BusyTimeout is how long a statement waits for a lock held by another
	// connection before failing. Default 5 s (DefaultBusyTimeout); it is
	// rounded down to whole milliseconds, and is at least 1 ms.
	BusyTimeout time.Duration
	// Logger receives the store's logs (migrations applied). Default: none.
	Logger *slog.Logger
}

// withDefaults returns c with its defaults filled in and its Path made
// absolute, or an error naming the bad field.
func (c Config) withDefaults() (Config, error) {
	err := sqlitefile.Defaults("sqlite", "database file", &c.Path, &c.BusyTimeout, &c.Logger)
	return c, err
}

//go:embed migrations/*.sql
var migrationFS embed.FS

// Store is weir's job store on a SQLite file. It is safe for concurrent use.
type Store struct {
	path       string
	write      *sql.DB // one connection; every transaction BEGIN IMMEDIATE
	read       *sql.DB // several connections, query_only
	logger     *slog.Logger
	migrations []migration.Migration
	stmts      stmtCache // the hot statements, prepared on write
	readStmts  stmtCache // the hot reads, prepared on read

	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database file at cfg.Path in WAL mode
// and returns a Store on it. It does not migrate: call Migrate.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	path := cfg.Path
	if err := sqlitefile.CreateFile("sqlite", path); err != nil {
		return nil, err
	}
	ms, err := migration.Load(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}

	// One connection, kept for the life of the store: weir's writes and
	// the callers' write transactions queue for it in this process instead
	// of contending for SQLite's write lock (see doc.go).
	write, err := sqlitefile.OpenWriter(path, cfg.BusyTimeout, "foreign_keys(ON)")
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}

	if err := checkWAL(ctx, write, path); err != nil {
		write.Close()
		return nil, err
	}

	read, err := sqlitefile.OpenReader(path, cfg.BusyTimeout)
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("sqlite: open %s for reading: %w", path, err)
	}
	if err := read.PingContext(ctx); err != nil {
		write.Close()
		read.Close()
		return nil, fmt.Errorf("sqlite: open %s for reading: %w", path, err)
	}

	cfg.Logger.Debug("sqlite store opened", "path", path, "busy_timeout", cfg.BusyTimeout)
	return &Store{path: path, write: write, read: read, logger: cfg.Logger, migrations: ms,
		stmts: stmtCache{queries: hotQueries}, readStmts: stmtCache{queries: readQueries}}, nil
}

// checkWAL opens the write connection, which applies the DSN's pragmas, and
// makes sure the database really is in WAL mode. On failure it says why
// when it can tell: most often the directory is not writable.
func checkWAL(ctx context.Context, write *sql.DB, path string) error {
	err := sqlitefile.CheckWAL(ctx, write)
	if err != nil && !errors.Is(err, sqlitefile.ErrNotWAL) {
		if werr := probeWritable(filepath.Dir(path)); werr != nil {
			if pe := (*fs.PathError)(nil); errors.As(werr, &pe) {
				werr = pe.Err // the probe file's name says nothing
			}
			return fmt.Errorf("sqlite: open %s: directory %s is not writable (%v): %w", path, filepath.Dir(path), werr, err)
		}
	}
	if err != nil {
		return fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return nil
}

// probeWritable creates and removes a file in dir, to tell an unwritable
// directory from other open errors. It runs only after an open has failed.
func probeWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".weir-probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// DB returns the handle for the caller's own data and transactions: begin
// write transactions on it (s.DB().BeginTx) and bind weir to them with Tx,
// so that they serialise with weir's own writes in this process instead of
// failing with SQLITE_BUSY.
//
// The handle holds a single connection. While a transaction on it is open,
// every other use of it and of the store's Executor waits for that
// transaction to end; so inside one, use only the transaction and s.Tx(tx):
// calling s.Executor().Insert or s.DB().Query from the goroutine holding it
// deadlocks until its context ends. Long read-only work is better done on a
// handle of the caller's own.
func (s *Store) DB() *sql.DB { return s.write }

// Executor returns an Executor that runs each call in a transaction of its
// own: writes on the write connection, reads on the read pool.
func (s *Store) Executor() store.Executor { return executor{s: s} }

// Tx returns an Executor bound to tx, a transaction the caller began on
// s.DB(): the jobs it inserts commit or roll back with the caller's data.
func (s *Store) Tx(tx *sql.Tx) store.Executor { return executor{s: s, tx: tx} }

// RunTx runs fn in a transaction of its own on the write connection, with
// an Executor bound to it, and commits if fn returned nil (rolling back
// otherwise): the caller's writes and weir's (an inbox record, an outbox
// message, a job) commit as one.
func (s *Store) RunTx(ctx context.Context, fn func(tx *sql.Tx, ex store.Executor) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(tx, s.Tx(tx)); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// InTx runs fn in a transaction of its own, as RunTx does, for callers
// that need only the Executor (store.Transactor).
func (s *Store) InTx(ctx context.Context, fn func(ex store.Executor) error) error {
	return s.RunTx(ctx, func(_ *sql.Tx, ex store.Executor) error { return fn(ex) })
}

// Features declares SQLite's capabilities: one writer at a time, no
// database notifications, one outbox relay at a time.
func (s *Store) Features() store.Features {
	return store.Features{Name: "sqlite", ConcurrentWriters: false, Notify: false, ConcurrentRelays: false}
}

// Close closes both pools. It is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stmts.close()
		s.readStmts.close()
		s.closeErr = errors.Join(s.read.Close(), s.write.Close())
	})
	return s.closeErr
}

// SchemaVersion returns the database's migration version (0 before the
// first Migrate) and the newest this weir knows.
func (s *Store) SchemaVersion(ctx context.Context) (current, latest int, err error) {
	current, err = schemaVersion(ctx, s.read)
	if err != nil {
		return 0, 0, fmt.Errorf("schema version: %w", err)
	}
	return current, migration.Latest(s.migrations), nil
}

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// schemaVersion reads the newest applied migration; 0 when there is none,
// or no weir_migrations table yet. It writes nothing.
func schemaVersion(ctx context.Context, q querier) (int, error) {
	var tables int
	if err := q.QueryRowContext(ctx,
		"SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'weir_migrations'").Scan(&tables); err != nil {
		return 0, err
	}
	if tables == 0 {
		return 0, nil
	}
	var v int
	err := q.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM weir_migrations").Scan(&v)
	return v, err
}

// Migrate applies the migrations the database lacks, each in its own
// transaction, and returns how many it applied. It refuses, changing
// nothing, with an error wrapping store.ErrSchemaTooNew, a database that a
// newer weir has migrated.
//
// Each step reads the version inside its own write transaction, so two
// processes migrating one file at once apply each migration once.
func (s *Store) Migrate(ctx context.Context) (int, error) {
	applied := 0
	for {
		done, err := s.migrateOne(ctx)
		if err != nil {
			return applied, fmt.Errorf("migrate: %w", err)
		}
		if done {
			return applied, nil
		}
		applied++
	}
}

// migrateOne applies the next pending migration in a transaction of its
// own; done is true when there was none.
func (s *Store) migrateOne(ctx context.Context) (done bool, err error) {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	current, err := schemaVersion(ctx, tx)
	if err != nil {
		return false, err
	}
	pending, err := migration.Pending(current, s.migrations)
	if err != nil {
		return false, err
	}
	if len(pending) == 0 {
		return true, nil
	}
	m := pending[0]
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS weir_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return false, fmt.Errorf("%04d_%s: %w", m.Version, m.Name, err)
	}
	if _, err := tx.ExecContext(ctx,
		"INSERT INTO weir_migrations (version, name, applied_at) VALUES (?, ?, ?)",
		m.Version, m.Name, time.Now().UnixMicro()); err != nil {
		return false, fmt.Errorf("%04d_%s: record: %w", m.Version, m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("%04d_%s: commit: %w", m.Version, m.Name, err)
	}
	s.logger.Info("applied migration", "version", m.Version, "name", m.Name, "path", s.path)
	return false, nil
}
