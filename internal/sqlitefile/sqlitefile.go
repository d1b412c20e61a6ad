// Package sqlitefile holds what weir's SQLite files share, the store's
// database (store/sqlite) and the search index (search/fts): the checks
// and defaults of their Config, the data source name of a file, the check
// of its path, its creation readable by its owner only, its writing and
// reading pools, the check of its WAL mode, and the encoding of times as
// microseconds.
package sqlitefile

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// DefaultBusyTimeout is how long a statement waits for a lock that another
// connection holds before it fails with SQLITE_BUSY, unless configured.
const DefaultBusyTimeout = 5 * time.Second

// Defaults checks the fields that the Config of each SQLite file has, and
// fills their defaults: path must name a file (not empty, not ":memory:",
// not a file: URI), and becomes absolute, checked by CheckPath; busy, the
// busy timeout, must not be negative, and 0 becomes DefaultBusyTimeout; a
// nil logger becomes one that discards. pkg begins the message of an
// error ("sqlite", "fts"); what names the file ("database file", "index
// file").
func Defaults(pkg, what string, path *string, busy *time.Duration, logger **slog.Logger) error {
	if *path == "" {
		return fmt.Errorf("%s: Config.Path is empty: name the %s", pkg, what)
	}
	if *path == ":memory:" || strings.HasPrefix(*path, "file:") {
		return fmt.Errorf("%s: Config.Path %q: give a file path, not an in-memory database or URI", pkg, *path)
	}
	if *busy < 0 {
		return fmt.Errorf("%s: Config.BusyTimeout %v is negative", pkg, *busy)
	}
	abs, err := AbsPath(pkg, what, *path)
	if err != nil {
		return err
	}
	*path = abs
	if *busy == 0 {
		*busy = DefaultBusyTimeout
	}
	if *logger == nil {
		*logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// DSN is the modernc.org/sqlite data source name of the file at the
// absolute path abs, with the query q: a file: URI, so that no character
// of the path (a '?', a '#', a '%') is read as part of the query.
func DSN(abs string, q url.Values) string {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows drive letter: file:///C:/...
	}
	u := url.URL{Scheme: "file", Path: p, RawQuery: q.Encode()}
	return u.String()
}

// AbsPath is path made absolute and checked by CheckPath. pkg begins the
// message of an error; what names the file.
func AbsPath(pkg, what, path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%s: open %s: %w", pkg, path, err)
	}
	if err := CheckPath(pkg, what, abs); err != nil {
		return "", err
	}
	return abs, nil
}

// CheckPath returns a clear error when path cannot be such a file: its
// directory is missing or not a directory, or path is a directory. pkg
// begins the message ("sqlite", "fts"); what names the file ("database
// file", "index file").
func CheckPath(pkg, what, path string) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: open %s: directory %s does not exist", pkg, path, dir)
	case err != nil:
		return fmt.Errorf("%s: open %s: %w", pkg, path, err)
	case !fi.IsDir():
		return fmt.Errorf("%s: open %s: %s is not a directory", pkg, path, dir)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s: open %s: it is a directory, not a %s", pkg, path, what)
	}
	return nil
}

// FileMode is the mode CreateFile gives a new database file: read and
// write for its owner only. SQLite gives the files it keeps beside it
// (-wal, -shm, -journal) the mode of the main file.
const FileMode fs.FileMode = 0o600

// CreateFile creates an empty file at path, readable and writable by its
// owner only (FileMode, whatever the umask allows beyond it), unless a
// file is there already, which it leaves as it is. SQLite would create a
// missing file itself with the mode 0644 less the umask: a database and
// an index hold the documents, which other users of the machine must not
// read. pkg begins the message of an error ("sqlite", "fts").
func CreateFile(pkg, path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, FileMode)
	switch {
	case errors.Is(err, fs.ErrExist):
		return nil
	case err != nil:
		return fmt.Errorf("%s: create %s: %w", pkg, path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s: create %s: %w", pkg, path, err)
	}
	return nil
}

// OpenWriter opens the pool that writes to the file at the absolute path
// abs: one connection, kept for the pool's life, so that writers queue for
// it in this process instead of contending for SQLite's write lock; every
// transaction BEGIN IMMEDIATE; WAL journal, synchronous NORMAL, busy
// timeout busy (at least 1 ms), then the pragmas given. The pragmas apply
// when the connection opens, at its first use. The caller has registered
// the modernc.org/sqlite driver.
func OpenWriter(abs string, busy time.Duration, pragmas ...string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", DSN(abs, url.Values{
		"_txlock": {"immediate"},
		"_pragma": append([]string{busyTimeout(busy), "journal_mode(WAL)", "synchronous(NORMAL)"}, pragmas...),
	}))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db, nil
}

// OpenReader opens the pool that reads the file at the absolute path abs:
// max(4, GOMAXPROCS) query-only connections, with the busy timeout busy
// (at least 1 ms).
func OpenReader(abs string, busy time.Duration) (*sql.DB, error) {
	db, err := sql.Open("sqlite", DSN(abs, url.Values{
		"_pragma": {busyTimeout(busy), "query_only(ON)"},
	}))
	if err != nil {
		return nil, err
	}
	n := max(4, runtime.GOMAXPROCS(0))
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	return db, nil
}

// ErrNotWAL: the file is not in WAL mode although the writer's pragma
// asked for it, and the reading pool cannot read beside the writer.
var ErrNotWAL = errors.New("not WAL: the file system may not support WAL's shared memory")

// CheckWAL reads the journal mode of db's file (the first use of the
// writer opens its connection and applies its pragmas) and returns an
// error wrapping ErrNotWAL unless it is WAL; the error of the query as it
// is when that fails.
func CheckWAL(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode is %q, %w", mode, ErrNotWAL)
	}
	return nil
}

func busyTimeout(d time.Duration) string {
	return fmt.Sprintf("busy_timeout(%d)", max(1, d.Milliseconds()))
}

// EncodeTime is t's column value: nil (NULL) for the zero time, otherwise
// microseconds since the Unix epoch. Callers check that t fits (about
// ±292,000 years).
func EncodeTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// DecodeTime is the time a column holds: the zero time for NULL,
// otherwise the instant in UTC.
func DecodeTime(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMicro(v.Int64).UTC()
}
