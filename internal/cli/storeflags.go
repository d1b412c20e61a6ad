package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/internal/redact"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/appdb"
	"github.com/weirhq/weir/store/postgres"
)

// Defaults of the store flags.
const (
	defaultDataDir = "./weir-data"
	sqliteFileName = "weir.db" // in the data directory
)

// storeFlags are the flags that choose the store, shared by every command
// that opens one: -store, -schema and -data. A command declares them on its
// FlagSet, is marked env: true in the command table (so that WEIR_STORE,
// WEIR_SCHEMA and WEIR_DATA set them when the command line does not), and
// opens the store when it runs:
//
//	func setupStatus(fs *flag.FlagSet) runFunc {
//		var sf storeFlags
//		sf.declare(fs)
//		return func(s streams, args []string) error {
//			o, err := sf.open(context.Background()) // a store that must exist
//			if err != nil {
//				return err
//			}
//			defer o.close()
//			jobs, err := o.store.Executor().ListJobs(…)
//			…
//		}
//	}
//
// open is for the commands that read or change an existing store: it
// refuses a missing data directory (it never makes one), a missing SQLite
// file and a store not migrated to this weir's schema, each with a message
// that says what to do. openOrCreate is for the commands that may start a
// store (migrate; run and ingest, which migrate first): it makes the data
// directory and leaves the schema to the caller's Migrate.
type storeFlags struct {
	url    string // -store: empty for SQLite in data, or a postgres:// URL
	schema string // -schema: the PostgreSQL schema
	data   string // -data: the directory of the SQLite file
}

// declare adds -store, -schema and -data to fs. Their defaults are f's
// current values, or the package defaults for those empty: a subcommand
// declares them again with the values its command parsed as defaults.
func (f *storeFlags) declare(fs *flag.FlagSet) {
	if f.schema == "" {
		f.schema = postgres.DefaultSchema
	}
	if f.data == "" {
		f.data = defaultDataDir
	}
	fs.StringVar(&f.url, "store", f.url,
		"the store `URL`: empty for the embedded SQLite file <data>/"+sqliteFileName+", or a postgres:// (postgresql://) URL for PostgreSQL")
	fs.StringVar(&f.schema, "schema", f.schema, "the PostgreSQL `schema` of weir's tables")
	fs.StringVar(&f.data, "data", f.data, "the data `directory`, which holds the SQLite file "+sqliteFileName)
}

// opened is a store a command opened, with the function that closes it
// and a description of where it is for messages ("SQLite file
// weir-data/weir.db"), which never holds a password.
type opened struct {
	store appdb.Store
	close func() error
	where string
}

// driver names the driver -store chooses: "sqlite" or "postgres". Any
// other value is a usage error that names the problem and never repeats
// a URL's password.
func (f storeFlags) driver() (string, error) {
	switch {
	case f.data == "":
		return "", usageError{"-data is empty: want the data directory"}
	case f.schema == "":
		return "", usageError{"-schema is empty: want a PostgreSQL schema name"}
	case len(f.schema) > 63 || strings.ContainsFunc(f.schema, unsafeRune):
		return "", flagError("schema", "%q: want a PostgreSQL name of at most 63 bytes without control characters", f.schema)
	}
	if f.url == "" {
		return "sqlite", nil
	}
	u, err := url.Parse(f.url)
	switch {
	case err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql"):
		return "postgres", nil
	case err == nil && u.Scheme != "":
		return "", usageError{fmt.Sprintf("-store: unsupported scheme %q: want a postgres:// or postgresql:// URL, or no -store for the SQLite file in -data", u.Scheme)}
	default:
		return "", usageError{"-store: not a URL: want a postgres:// or postgresql:// URL, or no -store for the SQLite file in -data (set -data to the directory that holds " + sqliteFileName + ")"}
	}
}

// sqlitePath is the SQLite file in the data directory.
func (f storeFlags) sqlitePath() string { return filepath.Join(f.data, sqliteFileName) }

// where describes the store for messages.
func (f storeFlags) where(driver string) string {
	if driver == "sqlite" {
		return "SQLite file " + f.sqlitePath()
	}
	loc := "PostgreSQL"
	if u, err := url.Parse(f.url); err == nil {
		u.User = nil // no user name or password in messages
		u.RawQuery = ""
		loc = u.String()
	}
	return fmt.Sprintf("PostgreSQL schema %q at %s", f.schema, loc)
}

// noData is the error of a store that is not there.
func (f storeFlags) noData(driver string) error {
	if driver == "sqlite" {
		return fmt.Errorf("no weir data at %s (run weir run or weir migrate, or set -data / WEIR_DATA)", f.data)
	}
	return fmt.Errorf("no weir data in %s (run weir run or weir migrate, or set -schema / WEIR_SCHEMA)", f.where(driver))
}

// open opens the existing store the flags name, migrated to this weir's
// schema. It creates nothing: a missing data directory or SQLite file, a
// missing PostgreSQL schema and a schema without weir's tables are errors
// that say to run weir migrate.
func (f storeFlags) open(ctx context.Context) (opened, error) {
	driver, err := f.driver()
	if err != nil {
		return opened{}, err
	}
	if err := f.checkExists(ctx, driver); err != nil {
		return opened{}, err
	}
	o, err := f.connect(ctx, driver)
	if err != nil {
		return opened{}, err
	}
	if err := f.checkVersion(ctx, o.store, o.where, driver); err != nil {
		_ = o.close()
		return opened{}, err
	}
	return o, nil
}

// checkExists returns an error, and creates nothing, unless the store the
// flags name is there: the data directory and its SQLite file, or the
// PostgreSQL schema with weir's tables in it. It is checked before the
// store is opened, since opening makes a missing SQLite file or
// PostgreSQL schema.
func (f storeFlags) checkExists(ctx context.Context, driver string) error {
	if driver == "sqlite" {
		return f.checkData()
	}
	return f.checkPostgres(ctx)
}

// checkPostgres returns an error unless the schema exists and holds weir's
// tables. It connects on its own: the store's Open would make a missing
// schema.
func (f storeFlags) checkPostgres(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, f.url)
	if err != nil {
		return fmt.Errorf("connect to %s: %s", f.where("postgres"), redact.String(err.Error()))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var schema, tables bool
	err = conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1), to_regclass($2) IS NOT NULL`,
		f.schema, pgx.Identifier{f.schema, "weir_migrations"}.Sanitize()).Scan(&schema, &tables)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %s", f.where("postgres"), redact.String(err.Error()))
	case !schema:
		return fmt.Errorf("no weir data in %s: the schema does not exist (run weir run or weir migrate to make it, or set -schema / WEIR_SCHEMA)", f.where("postgres"))
	case !tables:
		return fmt.Errorf("no weir data in %s: the schema has no weir tables (run weir migrate to make them, or set -schema / WEIR_SCHEMA)", f.where("postgres"))
	}
	return nil
}

// checkVersion returns an error unless st is at this weir's schema
// version.
func (f storeFlags) checkVersion(ctx context.Context, st store.Store, where, driver string) error {
	cur, latest, err := st.SchemaVersion(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", where, err)
	case cur == 0:
		return f.noData(driver)
	case cur < latest:
		return fmt.Errorf("%s is at schema version %d and this weir needs %d: run weir migrate", where, cur, latest)
	case cur > latest:
		return fmt.Errorf("%s is at schema version %d, newer than this weir's %d (upgrade weir): %w", where, cur, latest, store.ErrSchemaTooNew)
	}
	return nil
}

// openOrCreate opens the store the flags name, making the data directory
// (for SQLite) when it is missing; the schema is the caller's to migrate.
func (f storeFlags) openOrCreate(ctx context.Context) (opened, error) {
	driver, err := f.driver()
	if err != nil {
		return opened{}, err
	}
	if driver == "sqlite" {
		if err := os.MkdirAll(f.data, 0o755); err != nil {
			return opened{}, fmt.Errorf("make the data directory: %w", err)
		}
	}
	return f.connect(ctx, driver)
}

// checkData returns the error of a data directory or SQLite file that is
// missing, or of a data directory that is not a directory.
func (f storeFlags) checkData() error {
	fi, err := os.Stat(f.data)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return f.noData("sqlite")
	case err != nil:
		return fmt.Errorf("-data: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("-data %s is not a directory", f.data)
	}
	if _, err := os.Stat(f.sqlitePath()); errors.Is(err, fs.ErrNotExist) {
		return f.noData("sqlite")
	}
	return nil
}

func (f storeFlags) connect(ctx context.Context, driver string) (opened, error) {
	where := f.where(driver)
	db, err := appdb.Open(ctx, appdb.Config{URL: f.url, Schema: f.schema, Path: f.sqlitePath()})
	if err != nil {
		return opened{}, fmt.Errorf("open %s: %w", where, err)
	}
	return opened{store: db.Store, close: db.Close, where: where}, nil
}

// setupMigrate declares the flags of "weir migrate".
func setupMigrate(fs *flag.FlagSet) runFunc {
	var sf storeFlags
	sf.declare(fs)
	return func(s streams, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		ctx, stop := commandContext()
		defer stop()
		o, err := sf.openOrCreate(ctx)
		if err != nil {
			return err
		}
		defer o.close()
		before, latest, err := o.store.SchemaVersion(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", o.where, err)
		}
		n, err := o.store.Migrate(ctx)
		if err != nil {
			if n > 0 {
				fmt.Fprintf(s.stdout, "%s: applied %s before the failure\n", printable(o.where), versions(before, before+n))
			}
			return fmt.Errorf("%s: %w", o.where, err)
		}
		if err := sf.serviceTables(ctx); err != nil {
			return fmt.Errorf("%s: the ingestion service's tables: %w", o.where, err)
		}
		if n == 0 {
			_, err = fmt.Fprintf(s.stdout, "%s: up to date at schema version %d\n", printable(o.where), before)
			return err
		}
		_, err = fmt.Fprintf(s.stdout, "%s: applied %s; now at schema version %d of %d\n", printable(o.where), versions(before, before+n), before+n, latest)
		return err
	}
}

// versions names the migrations after from up to to.
func versions(from, to int) string {
	if to == from+1 {
		return fmt.Sprintf("migration %d", to)
	}
	return fmt.Sprintf("migrations %d to %d", from+1, to)
}

// oneLine is s on one line, at most n runes, for a table cell: its runs
// of white space made one space, and what else could break the line or
// drive the terminal escaped (printable).
func oneLine(s string, n int) string {
	s = printable(strings.Join(strings.Fields(s), " "))
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
