// Package tempstore gives runnable examples a migrated SQLite store in a
// directory of its own, with the example's own tables, removed when they
// are done. An application does the same with sqlite.Open and
// Store.Migrate (see package sqlite's example); an example that is about
// something else calls MustOpen and shows only that.
package tempstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/weirhq/weir/store/sqlite"
)

// Store is a migrated SQLite store whose file is in Dir.
type Store struct {
	*sqlite.Store
	// Dir is the store's temporary directory, for the example's other
	// files (an embedded broker's streams, say).
	Dir string
}

// Open makes a temporary directory, opens weir.db in it, migrates it and
// runs tables, the statements that make the example's own tables.
func Open(ctx context.Context, tables ...string) (*Store, error) {
	dir, err := os.MkdirTemp("", "weir-example-")
	if err != nil {
		return nil, err
	}
	s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "weir.db")})
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	ts := &Store{Store: s, Dir: dir}
	if _, err := s.Migrate(ctx); err != nil {
		return nil, errors.Join(err, ts.Close())
	}
	for _, q := range tables {
		if _, err := s.DB().ExecContext(ctx, q); err != nil {
			return nil, errors.Join(fmt.Errorf("%s: %w", q, err), ts.Close())
		}
	}
	return ts, nil
}

// MustOpen is Open for an example, which has no test to fail: it panics
// if Open fails.
func MustOpen(ctx context.Context, tables ...string) *Store {
	s, err := Open(ctx, tables...)
	if err != nil {
		panic("tempstore: " + err.Error())
	}
	return s
}

// Close closes the store and removes its directory.
func (s *Store) Close() error {
	return errors.Join(s.Store.Close(), os.RemoveAll(s.Dir))
}
