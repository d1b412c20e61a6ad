// Package tempstore gives runnable examples a migrated SQLite store in a
// directory of its own, removed when they are done. An application does
// the same with sqlite.Open and Store.Migrate (see package sqlite's
// example); an example that is about something else calls Open and
// shows only that.
package tempstore

import (
	"context"
	"errors"
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

// Open makes a temporary directory, opens weir.db in it and migrates it.
func Open(ctx context.Context) (*Store, error) {
	dir, err := os.MkdirTemp("", "weir-example-")
	if err != nil {
		return nil, err
	}
	s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "weir.db")})
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	if _, err := s.Migrate(ctx); err != nil {
		return nil, errors.Join(err, s.Close(), os.RemoveAll(dir))
	}
	return &Store{Store: s, Dir: dir}, nil
}

// Close closes the store and removes its directory.
func (s *Store) Close() error {
	return errors.Join(s.Store.Close(), os.RemoveAll(s.Dir))
}
