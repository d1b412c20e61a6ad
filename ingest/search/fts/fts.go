package fts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/weirhq/weir/internal/sqlitefile"

	"modernc.org/sqlite"

	"github.com/weirhq/weir/ingest/search"
)

// SchemaVersion is the version of the index file's layout: its tables,
// triggers and tokenizer. Bump it when any of them changes; Open then
// recreates older (and newer) files empty, and the service reindexes.
const SchemaVersion = 1

// applicationID marks an SQLite file as a weir search index, in the
// header's application_id: "WSIX".
const applicationID = 0x57534958

// DefaultBusyTimeout is how long a statement waits for a lock that another
// connection holds before it fails with SQLITE_BUSY.
const DefaultBusyTimeout = sqlitefile.DefaultBusyTimeout

// ErrNotIndex: the file is an SQLite database of something else (it has
// tables but not the index's application id). Open refuses it, leaving it
// untouched, rather than recreating it: the path may name the service's
// own database by mistake.
var ErrNotIndex = errors.New("fts: file is not a search index")

// Config configures an Index.
type Config struct {
	// Path is the index file. Required. It is created if it does not
	// exist, readable and writable by its owner only (0600; SQLite gives
	// its -wal and -shm files the same mode); its directory must exist and be writable, since SQLite keeps
	// the write-ahead log (Path-wal) and shared memory (Path-shm) beside
	// it. It must be a file of its own, not the service's database.
	Path string
	// BusyTimeout is how long a statement waits for a lock held by another
	// connection before failing. Default 5 s (DefaultBusyTimeout); rounded
	// down to whole milliseconds, and at least 1 ms.
	BusyTimeout time.Duration
	// CheckIntegrity makes Open verify the whole file (SQLite's
	// quick_check and FTS5's integrity-check, which read every page)
	// and recreate it when it is damaged. Default false: Open then only
	// checks that the file is an index of this SchemaVersion whose tables
	// can be read, which takes milliseconds whatever the file's size.
	CheckIntegrity bool
	// Logger receives the index's logs (a file recreated). Default: none.
	Logger *slog.Logger
}

// withDefaults returns c with its defaults filled in and its Path made
// absolute, or an error naming the bad field.
func (c Config) withDefaults() (Config, error) {
	err := sqlitefile.Defaults("fts", "index file", &c.Path, &c.BusyTimeout, &c.Logger)
	return c, err
}

// Index is a full-text index in an SQLite file. It is safe for concurrent
// use.
type Index struct {
	path    string
	write   *sql.DB // one connection; every transaction BEGIN IMMEDIATE
	read    *sql.DB // several connections, query_only
	rebuilt bool
	logger  *slog.Logger

	// Statements prepared at Open: put and del on write, the rest on read.
	put, del, get, find, entries, count *sql.Stmt

	closeOnce sync.Once
	closeErr  error
}

var _ search.Index = (*Index)(nil)

// Open opens the index file at cfg.Path, creating it if it does not
// exist. A file of another SchemaVersion, or one that is not an SQLite
// database or is damaged, is deleted (with its -wal and -shm files) and
// recreated empty, and Rebuilt reports it: the caller must then reindex
// everything. An SQLite database of another application is refused with
// ErrNotIndex and left as it is.
//
// Recreating deletes the file: no other process may have it open then.
func Open(ctx context.Context, cfg Config) (*Index, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	path := cfg.Path
	ix, reason, err := open(ctx, cfg, path)
	if err != nil {
		return nil, err
	}
	if reason == "" {
		cfg.Logger.Debug("search index opened", "path", path)
		return ix, nil
	}

	cfg.Logger.Warn("search index recreated empty: reindex everything", "path", path, "reason", reason)
	if err := removeFiles(path); err != nil {
		return nil, fmt.Errorf("fts: open %s: recreate (%s): %w", path, reason, err)
	}
	ix, again, err := open(ctx, cfg, path)
	if err != nil {
		return nil, err
	}
	if again != "" {
		ix.Close()
		return nil, fmt.Errorf("fts: open %s: recreated file is unusable: %s", path, again)
	}
	ix.rebuilt = true
	return ix, nil
}

// open opens the file at path and makes it a usable index: it creates the
// schema in an empty file. When the file must be recreated, open closes
// everything and returns the reason, with a nil Index.
func open(ctx context.Context, cfg Config, path string) (_ *Index, reason string, err error) {
	// A new file is created readable by its owner only: it holds the
	// documents' text.
	if err := sqlitefile.CreateFile("fts", path); err != nil {
		return nil, "", err
	}
	write, err := sqlitefile.OpenWriter(path, cfg.BusyTimeout)
	if err != nil {
		return nil, "", fmt.Errorf("fts: open %s: %w", path, err)
	}

	ix := &Index{path: path, write: write, logger: cfg.Logger}
	fail := func(err error) (*Index, string, error) {
		ix.Close()
		return nil, "", fmt.Errorf("fts: open %s: %w", path, err)
	}

	reason, err = inspect(ctx, write, cfg.CheckIntegrity)
	if err != nil {
		if errors.Is(err, ErrNotIndex) {
			ix.Close()
			return nil, "", fmt.Errorf("fts: open %s: refusing to recreate it: %w", path, err)
		}
		return fail(err)
	}
	if reason != "" {
		ix.Close()
		return nil, reason, nil
	}
	// Concurrent searches during a Put need WAL mode.
	if err := sqlitefile.CheckWAL(ctx, write); err != nil {
		return fail(err)
	}

	read, err := sqlitefile.OpenReader(path, cfg.BusyTimeout)
	if err != nil {
		return fail(err)
	}
	ix.read = read
	if err := ix.prepare(ctx); err != nil {
		return fail(err)
	}
	return ix, "", nil
}

// inspect reads what the file at the other end of db is, creating the
// schema when it is empty. It returns a reason to recreate the file
// (another schema version, a damaged file), or "" when the file is an
// index of this SchemaVersion; an error wrapping ErrNotIndex for a
// database of another application, another error when the file cannot
// be read for another cause (permissions, locks), which recreating it
// would not cure.
func inspect(ctx context.Context, db *sql.DB, checkIntegrity bool) (reason string, err error) {
	var appID, version, objects int
	err = db.QueryRowContext(ctx, `SELECT
		(SELECT application_id FROM pragma_application_id),
		(SELECT user_version FROM pragma_user_version),
		(SELECT count(*) FROM sqlite_schema)`).Scan(&appID, &version, &objects)
	if err != nil {
		return damaged(err)
	}
	switch {
	case objects == 0:
		// A new (or empty) file.
		if err := createSchema(ctx, db); err != nil {
			return damaged(fmt.Errorf("create schema: %w", err))
		}
		return "", nil
	case appID != applicationID:
		return "", fmt.Errorf("%w: it is an SQLite database with %d schema objects and application id %#x", ErrNotIndex, objects, appID)
	case version != SchemaVersion:
		return fmt.Sprintf("the file has schema version %d, this index %d", version, SchemaVersion), nil
	}

	// An index of this version: can its tables be read?
	var have int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name IN ('docs', 'docs_fts', 'docs_ai', 'docs_ad', 'docs_au')`).Scan(&have); err != nil {
		return damaged(err)
	}
	if have != 5 {
		return "the file lacks some of the index's tables and triggers", nil
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM docs LIMIT 1)`).Scan(&n); err != nil {
		return damaged(err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM docs_fts WHERE docs_fts MATCH '"weir"' LIMIT 1)`).Scan(&n); err != nil {
		return damaged(err)
	}
	if !checkIntegrity {
		return "", nil
	}
	var result string
	if err := db.QueryRowContext(ctx, `PRAGMA quick_check(1)`).Scan(&result); err != nil {
		return damaged(err)
	}
	if result != "ok" {
		return "quick_check: " + result, nil
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO docs_fts(docs_fts, rank) VALUES ('integrity-check', 1)`); err != nil {
		return damaged(err)
	}
	return "", nil
}

// SQLite's primary result codes for a damaged file.
const (
	sqliteCorrupt = 11 // SQLITE_CORRUPT, and SQLITE_CORRUPT_VTAB for FTS5
	sqliteNotADB  = 26 // SQLITE_NOTADB: not a database file
)

// damaged turns err into a reason to recreate the file when SQLite found
// the file damaged or not a database; other errors it returns as they are.
func damaged(err error) (string, error) {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqliteCorrupt, sqliteNotADB:
			return "the file is damaged or not an SQLite database: " + se.Error(), nil
		}
	}
	return "", err
}

// removeFiles deletes the index file and SQLite's files beside it.
func removeFiles(path string) error {
	var errs []error
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Rebuilt reports whether Open found an index file of another
// SchemaVersion, or a damaged or unreadable one, and recreated it empty:
// the caller must reindex everything.
func (ix *Index) Rebuilt() bool { return ix.rebuilt }

// SchemaVersion returns the version of the open file's layout, which is
// always the package's SchemaVersion once Open has returned.
func (ix *Index) SchemaVersion() int { return SchemaVersion }

// Close closes the index's statements and connections. It is safe to call
// more than once; other calls fail after it.
func (ix *Index) Close() error {
	ix.closeOnce.Do(func() {
		var errs []error
		for _, st := range []*sql.Stmt{ix.put, ix.del, ix.get, ix.find, ix.entries, ix.count} {
			if st != nil {
				errs = append(errs, st.Close())
			}
		}
		if ix.read != nil {
			errs = append(errs, ix.read.Close())
		}
		errs = append(errs, ix.write.Close())
		ix.closeErr = errors.Join(errs...)
	})
	return ix.closeErr
}
