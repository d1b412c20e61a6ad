package ingest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/ingest/search"
	"github.com/weirhq/weir/ingest/search/fts"
	"github.com/weirhq/weir/ingest/search/pgsearch"
	"github.com/weirhq/weir/internal/redact"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/store/appdb"
	"github.com/weirhq/weir/store/postgres"
)

// storePostgres reports whether c's store is PostgreSQL.
func (c Config) storePostgres() bool {
	if c.DB != nil {
		return c.DB.Driver == appdb.Postgres
	}
	return c.StoreURL != ""
}

// checkIndex returns an error naming Config.Index when Index and
// IndexURL are refused, and fills Index's default (see Config.Index).
func (c *Config) checkIndex() error {
	index, err := CheckIndex(c.Index, c.IndexURL, c.storePostgres())
	if err != nil {
		return fmt.Errorf("ingest: Config.Index %q, IndexURL %q: %w", c.Index, redact.URL(c.IndexURL), err)
	}
	c.Index = index
	return nil
}

// CheckIndex returns the search index (IndexFTS or IndexPostgres) that
// index (IndexFTS, IndexPostgres or empty for the store's default) and
// indexURL (a PostgreSQL URL of the index's own database, or empty)
// choose beside a store, PostgreSQL or not, or an error that says why
// the combination is refused (see Config.Index), which names neither
// setting: the caller does.
func CheckIndex(index, indexURL string, storePostgres bool) (string, error) {
	if indexURL != "" {
		if u, err := url.Parse(indexURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
			return "", fmt.Errorf("the index URL %q is not a postgres:// or postgresql:// URL with a host", redact.URL(indexURL))
		}
		if index == IndexFTS {
			return "", errors.New("a PostgreSQL URL for the index, and the fts index: choose one")
		}
		index = IndexPostgres
	}
	switch index {
	case "":
		if storePostgres {
			return IndexPostgres, nil
		}
		return IndexFTS, nil
	case IndexFTS:
		if storePostgres {
			return "", errors.New("the fts index is a SQLite file in the data directory, and a PostgreSQL store is shared by several processes: " +
				"each process's file would hold only the documents it indexed, and processes sharing one data directory would write one SQLite file at once " +
				"(use the postgres index, the default with a PostgreSQL store)")
		}
	case IndexPostgres:
		if !storePostgres {
			return "", errors.New("the postgres index is shared by every process that names it, and the SQLite store belongs to one data directory: " +
				"reconciliation removes from the index every document its own store lacks, so an index shared beyond its store loses documents " +
				"(use the fts index with the SQLite store, or a PostgreSQL store)")
		}
	default:
		return "", fmt.Errorf("unknown index %q: want %q or %q", index, IndexFTS, IndexPostgres)
	}
	return index, nil
}

// openIndex opens the search index Config.Index chooses, behind its
// breaker (Config.IndexBreaker), which joins the service's breakers; for
// a read-only service whose index was never made, an index that says so.
func (s *Service) openIndex(ctx context.Context) (pipeline.Index, error) {
	var (
		ix  search.Index
		err error
	)
	if s.cfg.Index == IndexPostgres {
		ix, err = s.openPGIndex(ctx)
	} else {
		ix, err = s.openFTS(ctx)
	}
	if err != nil || s.cfg.ReadOnly {
		return ix, err
	}
	br := s.cfg.IndexBreaker
	if br == nil {
		if br, err = breaker.New(breaker.Config{Name: IndexBreakerName, Classify: classifyIndex}); err != nil {
			return nil, fmt.Errorf("ingest: the search index's breaker: %w", err)
		}
	}
	s.breakers = append(s.breakers, br)
	return guardedIndex{ix: ix, br: br}, nil
}

// openFTS opens the SQLite FTS5 file in the data directory.
func (s *Service) openFTS(ctx context.Context) (search.Index, error) {
	path := filepath.Join(s.cfg.DataDir, IndexFile)
	if s.cfg.ReadOnly {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return noIndex{where: path}, nil
		}
	} else if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	ix, err := fts.Open(ctx, fts.Config{Path: path, Logger: s.cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("ingest: open the search index: %w", err)
	}
	s.closers = append(s.closers, func() { ix.Close() })
	return ix, nil
}

// openPGIndex opens the index in PostgreSQL: in the store's database and
// schema, or in Config.IndexURL's database (in the schema Config.Schema
// names, or the store's).
func (s *Service) openPGIndex(ctx context.Context) (search.Index, error) {
	schema := s.cfg.Schema
	if ps, ok := s.db.Store.(*postgres.Store); ok {
		schema = ps.Schema()
	}
	var pool *pgxpool.Pool
	where := "the store's database"
	if s.cfg.IndexURL == "" {
		ps, ok := s.db.Store.(*postgres.Store)
		if !ok {
			return nil, errors.New("ingest: Config.Index is postgres, and the store is not PostgreSQL")
		}
		pool = ps.Pool()
	} else {
		where = "Config.IndexURL " + redact.URL(s.cfg.IndexURL)
		var err error
		if pool, err = pgxpool.New(ctx, s.cfg.IndexURL); err != nil {
			return nil, fmt.Errorf("ingest: %s: %w", where, redact.Error(err))
		}
		s.closers = append(s.closers, pool.Close)
		if err := pool.Ping(ctx); err != nil {
			return nil, fmt.Errorf("ingest: Config.IndexURL: %w", &SearchDatabaseError{URL: redact.URL(s.cfg.IndexURL), Err: redact.Error(err)})
		}
	}
	ix, err := pgsearch.Open(ctx, pgsearch.Config{Pool: pool, Schema: schema, MustExist: s.cfg.ReadOnly, Logger: s.cfg.Logger})
	if s.cfg.ReadOnly && errors.Is(err, pgsearch.ErrNoIndex) {
		return noIndex{where: fmt.Sprintf("schema %q of %s", schema, where)}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ingest: open the search index in %s: %w", where, redact.Error(err))
	}
	s.closers = append(s.closers, func() { ix.Close() })
	return ix, nil
}

// SearchDatabaseError is New's error for a search database of its own
// (Config.IndexURL) that does not answer.
type SearchDatabaseError struct {
	// URL is Config.IndexURL, without its password.
	URL string
	Err error
}

func (e *SearchDatabaseError) Error() string {
	return "the search database at " + e.URL + " does not answer: " + e.Err.Error()
}

func (e *SearchDatabaseError) Unwrap() error { return e.Err }

// classifyIndex is the index breaker's classifier: the breaker's default,
// but that the caller's mistakes (a bad query or document, an id not
// found) say nothing of the index's health.
func classifyIndex(ctx context.Context, err error) breaker.Outcome {
	if errors.Is(err, search.ErrInvalid) || errors.Is(err, search.ErrNotFound) {
		return breaker.Ignored
	}
	return breaker.DefaultClassify(ctx, err)
}

// guardedIndex passes each call to the index through its breaker: once
// the index fails again and again (its database gone), calls fail at once
// with a *breaker.OpenError until a probe finds it back. The pipeline's
// index jobs wait while it is open, without spending attempts.
type guardedIndex struct {
	ix search.Index
	br *breaker.Breaker
}

var _ pipeline.Index = guardedIndex{}

func (g guardedIndex) Put(ctx context.Context, docs ...search.Doc) error {
	return g.br.Do(ctx, func(ctx context.Context) error { return g.ix.Put(ctx, docs...) })
}

func (g guardedIndex) Delete(ctx context.Context, ids ...string) (n int, err error) {
	err = g.br.Do(ctx, func(ctx context.Context) error {
		n, err = g.ix.Delete(ctx, ids...)
		return err
	})
	return n, err
}

func (g guardedIndex) Get(ctx context.Context, id string) (d search.Doc, err error) {
	err = g.br.Do(ctx, func(ctx context.Context) error {
		d, err = g.ix.Get(ctx, id)
		return err
	})
	return d, err
}

func (g guardedIndex) Search(ctx context.Context, query string, limit int) (hits []search.Hit, err error) {
	err = g.br.Do(ctx, func(ctx context.Context) error {
		hits, err = g.ix.Search(ctx, query, limit)
		return err
	})
	return hits, err
}

func (g guardedIndex) Entries(ctx context.Context, after string, limit int) (es []search.Entry, err error) {
	err = g.br.Do(ctx, func(ctx context.Context) error {
		es, err = g.ix.Entries(ctx, after, limit)
		return err
	})
	return es, err
}

func (g guardedIndex) Count(ctx context.Context) (n int, err error) {
	err = g.br.Do(ctx, func(ctx context.Context) error {
		n, err = g.ix.Count(ctx)
		return err
	})
	return n, err
}

func (g guardedIndex) Close() error { return g.ix.Close() }

// Breaker is the index's breaker, which the status shows.
func (g guardedIndex) Breaker() *breaker.Breaker { return g.br }

// Rebuilt reports whether the index was made empty at Open, recreated
// for a new layout or new in a store that may already hold documents
// (one whose index was a file until now): the pipeline reindexes
// everything then.
func (g guardedIndex) Rebuilt() bool {
	r, ok := g.ix.(interface{ Rebuilt() bool })
	c, cok := g.ix.(interface{ Created() bool })
	return (ok && r.Rebuilt()) || (cok && c.Created())
}
