package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/migration"
)

// DefaultSchema is the schema weir's tables live in when Config.Schema is
// empty.
const DefaultSchema = "public"

// maxIdentifierLen is PostgreSQL's NAMEDATALEN-1: a longer schema name would
// be silently truncated by the server, and weir would then name a schema
// that is not the one it created.
const maxIdentifierLen = 63

//go:embed migrations/*.sql
var migrationFS embed.FS

// Config configures Open.
type Config struct {
	// URL is the PostgreSQL connection string, a postgres:// URL (or any
	// form pgx accepts). Required. Errors never repeat its password.
	URL string
	// Schema is the schema weir's tables live in; Open creates it when it
	// is missing, and every connection's search_path is set to it.
	// Default "public".
	Schema string
	// MaxConns is the most connections the pool opens. Default (0): pgx's
	// default, the greater of 4 and the number of CPUs.
	MaxConns int32
	// Logger receives the store's logs (applied migrations). Default: none.
	Logger *slog.Logger
	// NoVacuum: weir never vacuums its job table itself (see
	// Store.VacuumJobs), even where the server's autovacuum is off. By
	// default the retention sweep vacuums it there, as autovacuum would.
	// (A store made with New: Store.DisableVacuum.)
	NoVacuum bool
}

// Store keeps weir's jobs in PostgreSQL.
type Store struct {
	pool       *pgxpool.Pool
	ownsPool   bool
	schema     string
	logger     *slog.Logger
	migrations []migration.Migration
	lockKey    int64
	outboxKey  int64  // see outboxLockKey
	channel    string // see notifyChannel
	sql        queries
	jobsSize   sizeClass
	noVacuum   atomic.Bool // see Config.NoVacuum
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at cfg.URL, checks that it answers and
// creates cfg.Schema if it is missing. It does not migrate: call Migrate.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.URL == "" {
		return nil, errors.New("postgres: config: URL is required")
	}
	if cfg.Schema == "" {
		cfg.Schema = DefaultSchema
	}
	if err := validSchema(cfg.Schema); err != nil {
		return nil, err
	}
	if cfg.MaxConns < 0 {
		return nil, fmt.Errorf("postgres: config: MaxConns %d is negative", cfg.MaxConns)
	}
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		// pgx's message may hold the URL (or a part url.Parse quoted);
		// keep only a redacted copy, and not the error itself, whose
		// fields hold the URL verbatim.
		return nil, &redactedError{msg: "postgres: parse URL: " + redact(err.Error(), cfg.URL)}
	}
	if cfg.MaxConns > 0 {
		pcfg.MaxConns = cfg.MaxConns
	}
	// Sent in the startup message: no extra round trip per connection. The
	// value is parsed like SET search_path, so the quoted identifier keeps
	// any schema name intact.
	pcfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{cfg.Schema}.Sanitize()
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, &redactedError{msg: "postgres: open pool: " + redact(err.Error(), cfg.URL), cause: err}
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, &redactedError{msg: "postgres: connect: " + redact(err.Error(), cfg.URL), cause: err}
	}
	s, err := newStore(pool, cfg.Schema, cfg.Logger)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownsPool = true
	s.noVacuum.Store(cfg.NoVacuum)
	if err := s.ensureSchema(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// New returns a Store on a pool the caller owns and keeps: Close leaves
// the pool open. weir's tables live in schema (default "public"), which
// Migrate creates if it is missing. Every query names the schema, so the
// pool's search_path does not matter to weir.
func New(pool *pgxpool.Pool, schema string) (*Store, error) {
	if pool == nil {
		return nil, errors.New("postgres: pool is nil")
	}
	if schema == "" {
		schema = DefaultSchema
	}
	if err := validSchema(schema); err != nil {
		return nil, err
	}
	return newStore(pool, schema, nil)
}

func newStore(pool *pgxpool.Pool, schema string, logger *slog.Logger) (*Store, error) {
	ms, err := migration.Load(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Store{
		pool:       pool,
		schema:     schema,
		logger:     logger,
		migrations: ms,
		lockKey:    advisoryKey(schema),
		outboxKey:  outboxLockKey(schema),
		channel:    notifyChannel(schema),
		sql:        newQueries(pgx.Identifier{schema}.Sanitize(), notifyChannel(schema)),
	}, nil
}

func validSchema(schema string) error {
	switch {
	case len(schema) > maxIdentifierLen:
		return fmt.Errorf("postgres: config: schema name %q is longer than %d bytes", schema, maxIdentifierLen)
	case strings.ContainsRune(schema, 0):
		return fmt.Errorf("postgres: config: schema name %q contains a NUL byte", schema)
	}
	return nil
}

// advisoryKey is the key of the advisory lock that serialises schema
// creation and migration of one schema across processes. It is derived
// from the schema's name alone, so that every weir, of any version, takes
// the same lock for the same schema.
func advisoryKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("weir/migrate/"))
	h.Write([]byte(schema))
	return int64(h.Sum64())
}

// Schema returns the schema weir's tables live in.
func (s *Store) Schema() string { return s.schema }

// Pool returns the store's connection pool, for the caller's own queries
// and transactions (see Tx).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// InTx runs fn in a transaction of its own, as RunTx does, for callers
// that need only the Executor (store.Transactor).
func (s *Store) InTx(ctx context.Context, fn func(ex store.Executor) error) error {
	return s.RunTx(ctx, func(_ pgx.Tx, ex store.Executor) error { return fn(ex) })
}

// Features declares what PostgreSQL supports: many writers at once,
// LISTEN/NOTIFY (see Listen), and several outbox relays at once.
func (s *Store) Features() store.Features {
	return store.Features{Name: "postgres", ConcurrentWriters: true, Notify: true, ConcurrentRelays: true}
}

// Close closes the pool if Open made it; a pool given to New stays open.
// It is safe to call more than once.
func (s *Store) Close() error {
	if s.ownsPool {
		s.pool.Close()
	}
	return nil
}

// ensureSchema creates the schema if it is missing. The existence check
// comes first so that a role without CREATE on the database can use a
// schema made for it; the advisory lock keeps two processes that start at
// once from both trying to create it.
func (s *Store) ensureSchema(ctx context.Context) error {
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		return s.ensureSchemaTx(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("postgres: create schema %q: %w", s.schema, err)
	}
	return nil
}

func (s *Store) ensureSchemaTx(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", s.lockKey); err != nil {
		return err
	}
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", s.schema).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err := tx.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{s.schema}.Sanitize())
	return err
}

// Migrate applies the migrations the schema lacks, each in a transaction
// of its own, and returns how many it applied. Each transaction first takes
// the schema's advisory lock (pg_advisory_xact_lock), then reads the
// version, so that processes that start at once apply each migration once:
// the others wait, then find it applied. A schema migrated by a newer weir
// is refused with an error wrapping store.ErrSchemaTooNew, and left as it
// is.
func (s *Store) Migrate(ctx context.Context) (int, error) {
	applied := 0
	for {
		done, err := s.migrateOne(ctx)
		if err != nil {
			return applied, err
		}
		if done {
			return applied, nil
		}
		applied++
	}
}

// migrateOne applies the next pending migration, or reports that none is
// pending.
func (s *Store) migrateOne(ctx context.Context) (done bool, err error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return false, fmt.Errorf("postgres: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	if err := s.ensureSchemaTx(ctx, tx); err != nil {
		return false, fmt.Errorf("postgres: migrate: create schema %q: %w", s.schema, err)
	}
	current, err := s.version(ctx, tx)
	if err != nil {
		return false, fmt.Errorf("postgres: migrate: %w", err)
	}
	pending, err := migration.Pending(current, s.migrations)
	if err != nil {
		return false, fmt.Errorf("postgres: migrate schema %q: %w", s.schema, err)
	}
	if len(pending) == 0 {
		return true, nil
	}
	m := pending[0]
	ident := pgx.Identifier{s.schema}.Sanitize()
	if current == 0 {
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+ident+`.weir_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return false, fmt.Errorf("postgres: migrate: create weir_migrations: %w", err)
		}
	}
	// The migration files name no schema; SET LOCAL ends with the
	// transaction.
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+ident); err != nil {
		return false, fmt.Errorf("postgres: migrate: %w", err)
	}
	if _, err := tx.Exec(ctx, m.SQL); err != nil {
		return false, fmt.Errorf("postgres: migration %04d_%s: %w", m.Version, m.Name, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+ident+`.weir_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
		return false, fmt.Errorf("postgres: migration %04d_%s: record: %w", m.Version, m.Name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("postgres: migration %04d_%s: commit: %w", m.Version, m.Name, err)
	}
	s.logger.Info("applied migration", "schema", s.schema, "version", m.Version, "name", m.Name)
	return false, nil
}

// SchemaVersion returns the schema's migration version (0 before the
// first Migrate) and the newest this weir knows.
func (s *Store) SchemaVersion(ctx context.Context) (current, latest int, err error) {
	current, err = s.version(ctx, s.pool)
	if err != nil {
		return 0, 0, fmt.Errorf("postgres: schema version: %w", err)
	}
	return current, migration.Latest(s.migrations), nil
}

type queryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// version reads the newest applied migration; 0 when weir_migrations does
// not exist yet.
func (s *Store) version(ctx context.Context, q queryRower) (int, error) {
	table := pgx.Identifier{s.schema, "weir_migrations"}.Sanitize()
	var exists bool
	if err := q.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists); err != nil {
		return 0, err
	}
	if !exists {
		return 0, nil
	}
	var v int
	err := q.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+table).Scan(&v)
	return v, err
}
