package pgsearch

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weirhq/weir/ingest/search"
)

// SchemaVersion is the version of the index's layout: its tables, its
// text search configuration and the searchable form of the text (fold).
// Bump it when any of them changes; Open then recreates the tables of an
// older version empty, and the service reindexes.
const SchemaVersion = 1

// DefaultSchema is the schema of the index's tables when Config.Schema is
// empty.
const DefaultSchema = "public"

// maxIdentifierLen is PostgreSQL's NAMEDATALEN-1: a longer schema name
// would be truncated by the server.
const maxIdentifierLen = 63

var (
	// ErrNoIndex: with Config.MustExist, the schema holds no index of
	// this SchemaVersion.
	ErrNoIndex = errors.New("pgsearch: no search index")
	// ErrSchemaTooNew: the index's tables were made by a newer weir (a
	// higher SchemaVersion). Open leaves them as they are.
	ErrSchemaTooNew = errors.New("pgsearch: the search index's schema is newer than this weir's")
	// ErrClosed: the Index was closed.
	ErrClosed = errors.New("pgsearch: index is closed")
)

// Config configures an Index.
type Config struct {
	// Pool is the connection pool the index runs on, for example the
	// store's (postgres.Store.Pool). Required. The caller keeps it:
	// Close leaves it open. Every statement names the schema, so the
	// pool's search_path does not matter.
	Pool *pgxpool.Pool
	// Schema is the schema of the index's tables (weir_search_docs,
	// weir_search_meta) and text search configuration (weir_search).
	// Open creates it when it is missing. Default "public".
	Schema string
	// MustExist makes Open create nothing, for a caller that only reads:
	// a schema without the index's tables, or with tables of another
	// SchemaVersion, is an error wrapping ErrNoIndex. Default false.
	MustExist bool
	// Logger receives the index's logs (tables recreated). Default: none.
	Logger *slog.Logger
}

// withDefaults returns c with its defaults filled in, or an error naming
// the bad field.
func (c Config) withDefaults() (Config, error) {
	if c.Pool == nil {
		return c, errors.New("pgsearch: Config.Pool is nil: give the store's connection pool")
	}
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	switch {
	case len(c.Schema) > maxIdentifierLen:
		return c, fmt.Errorf("pgsearch: Config.Schema %q is longer than %d bytes", c.Schema, maxIdentifierLen)
	case strings.ContainsRune(c.Schema, 0):
		return c, fmt.Errorf("pgsearch: Config.Schema %q contains a NUL byte", c.Schema)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Index is a full-text index in PostgreSQL tables. It is safe for
// concurrent use.
type Index struct {
	pool    *pgxpool.Pool
	schema  string
	sql     queries
	created bool
	rebuilt bool
	closed  atomic.Bool
}

var _ search.Index = (*Index)(nil)

// Open makes an Index on cfg.Pool, in cfg.Schema. It creates the schema,
// the tables and the text search configuration when they are missing;
// recreates them empty when they are of an older SchemaVersion, or
// incomplete, and Rebuilt then reports it (the caller must reindex
// everything); and refuses tables of a newer SchemaVersion with
// ErrSchemaTooNew, leaving them as they are. It does so in one
// transaction that holds an advisory lock of the schema's, so that
// processes starting at once make the tables once. With cfg.MustExist it
// makes nothing.
func Open(ctx context.Context, cfg Config) (*Index, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ix := &Index{pool: cfg.Pool, schema: cfg.Schema, sql: newQueries(cfg.Schema)}
	var reason string
	err = pgx.BeginTxFunc(ctx, cfg.Pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var err error
		reason, err = ix.prepareSchema(ctx, tx, cfg.MustExist)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgsearch: open the index in schema %q: %w", cfg.Schema, err)
	}
	switch {
	case ix.rebuilt:
		cfg.Logger.Warn("search index recreated empty: reindex everything", "schema", cfg.Schema, "reason", reason)
	case ix.created:
		cfg.Logger.Info("search index created", "schema", cfg.Schema)
	default:
		cfg.Logger.Debug("search index opened", "schema", cfg.Schema)
	}
	return ix, nil
}

// lockKey is the key of the advisory lock that serialises making one
// schema's index across processes: derived from the schema's name alone,
// so that every weir takes the same lock for the same schema.
func lockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("weir/search/"))
	h.Write([]byte(schema))
	return int64(h.Sum64())
}

// prepareSchema finds what the schema holds and, unless mustExist, makes
// it an index of this SchemaVersion. It returns why it recreated the
// tables, if it did.
func (ix *Index) prepareSchema(ctx context.Context, tx pgx.Tx, mustExist bool) (reason string, err error) {
	if !mustExist {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey(ix.schema)); err != nil {
			return "", err
		}
	}
	var schemaExists, metaExists, docsExists, configExists bool
	err = tx.QueryRow(ctx, `SELECT
		EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1),
		to_regclass($2) IS NOT NULL,
		to_regclass($3) IS NOT NULL,
		EXISTS (SELECT 1 FROM pg_ts_config c JOIN pg_namespace n ON n.oid = c.cfgnamespace
			WHERE n.nspname = $1 AND c.cfgname = 'weir_search')`,
		ix.schema, ix.sql.meta, ix.sql.docs).Scan(&schemaExists, &metaExists, &docsExists, &configExists)
	if err != nil {
		return "", err
	}
	version := 0
	if metaExists {
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+ix.sql.meta).Scan(&version); err != nil {
			return "", err
		}
	}
	switch {
	case version > SchemaVersion:
		return "", fmt.Errorf("%w: its tables are at version %d, this weir's at %d (upgrade weir)", ErrSchemaTooNew, version, SchemaVersion)
	case version == SchemaVersion && docsExists && configExists:
		return "", nil
	case mustExist && !schemaExists:
		return "", fmt.Errorf("%w: schema %q does not exist", ErrNoIndex, ix.schema)
	case mustExist && !metaExists && !docsExists:
		return "", fmt.Errorf("%w in schema %q", ErrNoIndex, ix.schema)
	case mustExist:
		return "", fmt.Errorf("%w of version %d in schema %q (it is at version %d, or incomplete): open it for writing to recreate it", ErrNoIndex, SchemaVersion, ix.schema, version)
	}

	if !schemaExists {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{ix.schema}.Sanitize()); err != nil {
			return "", fmt.Errorf("create schema: %w", err)
		}
	}
	if metaExists || docsExists || configExists {
		reason = fmt.Sprintf("the index's tables are at version %d, this weir's at %d", version, SchemaVersion)
		if version == SchemaVersion {
			reason = "the index lacks some of its tables or its text search configuration"
		}
		if _, err := tx.Exec(ctx, ix.sql.drop); err != nil {
			return "", fmt.Errorf("drop the tables of version %d: %w", version, err)
		}
		ix.rebuilt = true
	} else {
		ix.created = true
	}
	if _, err := tx.Exec(ctx, ix.sql.create); err != nil {
		return "", fmt.Errorf("create the tables: %w", err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+ix.sql.meta+" (version) VALUES ($1)", SchemaVersion); err != nil {
		return "", fmt.Errorf("record the schema version: %w", err)
	}
	return reason, nil
}

// Rebuilt reports whether Open found the index's tables of an older
// SchemaVersion, or incomplete, and recreated them empty: the caller
// must reindex everything. Of several processes opening one schema at
// once, one at most sees it.
func (ix *Index) Rebuilt() bool { return ix.rebuilt }

// Created reports whether Open made the index's tables, in a schema
// without them: a new index is empty, and a store that already holds
// documents (one that kept its index elsewhere until now) must reindex
// them.
func (ix *Index) Created() bool { return ix.created }

// SchemaVersion returns the version of the index's layout, which is
// always the package's SchemaVersion once Open has returned.
func (ix *Index) SchemaVersion() int { return SchemaVersion }

// Schema returns the schema of the index's tables.
func (ix *Index) Schema() string { return ix.schema }

// Close marks the index closed: other calls fail with ErrClosed after it.
// The pool stays open: it is the caller's. It is safe to call more than
// once.
func (ix *Index) Close() error {
	ix.closed.Store(true)
	return nil
}

func (ix *Index) checkOpen() error {
	if ix.closed.Load() {
		return ErrClosed
	}
	return nil
}
