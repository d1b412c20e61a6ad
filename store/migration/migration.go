// Package migration reads a driver's embedded, versioned SQL migrations and
// decides which of them a database still needs. Drivers run the SQL; this
// package holds the rules they share: files named NNNN_name.sql, versions
// from 1 without gaps, and a database that knows a version this binary does
// not is refused, not touched.
package migration

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"

	"github.com/weirhq/weir/store"
)

// Migration is one step of a driver's schema.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

var fileName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.sql$`)

// Load reads the migrations in dir of fsys. Every .sql file must be named
// NNNN_name.sql, and the versions must run 1, 2, 3… without a gap.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []Migration
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".sql" {
			continue
		}
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration file %q: name must be NNNN_name.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		sql, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", e.Name(), err)
		}
		ms = append(ms, Migration{Version: v, Name: m[2], SQL: string(sql)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migrations: expected version %d, found %04d_%s", i+1, m.Version, m.Name)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("migrations: none in %q", dir)
	}
	return ms, nil
}

// Pending returns the migrations of all that are newer than current, the
// database's version. It returns an error wrapping store.ErrSchemaTooNew when
// current is past the newest of all.
func Pending(current int, all []Migration) ([]Migration, error) {
	latest := Latest(all)
	if current > latest {
		return nil, fmt.Errorf("%w: database is at version %d, this weir knows up to %d; upgrade weir", store.ErrSchemaTooNew, current, latest)
	}
	return all[current:], nil
}

// Latest returns the newest version in all.
func Latest(all []Migration) int {
	if len(all) == 0 {
		return 0
	}
	return all[len(all)-1].Version
}
