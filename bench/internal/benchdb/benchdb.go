// Package benchdb opens the SQLite stores of the comparison programs: a
// fresh, migrated weir store in a temporary directory, and a read-only
// handle that counts rows without queueing behind the system's writes.
package benchdb

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"

	"github.com/weirhq/weir/store/sqlite"
)

// OpenReader opens a read-only handle on the SQLite file at path.
func OpenReader(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=query_only(ON)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// Count runs q, a query of one integer, on db.
func Count(ctx context.Context, db *sql.DB, q string) (int, error) {
	var c int
	err := db.QueryRowContext(ctx, q).Scan(&c)
	return c, err
}

// OpenWeir opens and migrates a weir store in a new temporary directory
// named after prefix, and returns it with a function that runs countQuery
// on a read-only handle, and one that closes both and removes the
// directory.
func OpenWeir(ctx context.Context, prefix, countQuery string) (st *sqlite.Store, count func(context.Context) (int, error), cleanup func(), err error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, nil, nil, err
	}
	path := filepath.Join(dir, "weir.db")
	st, err = sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	reader, err := OpenReader(path)
	if err != nil {
		st.Close()
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	cleanup = func() {
		reader.Close()
		st.Close()
		os.RemoveAll(dir)
	}
	if _, err := st.Migrate(ctx); err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	return st, func(ctx context.Context) (int, error) { return Count(ctx, reader, countQuery) }, cleanup, nil
}
