package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/nats"
	"github.com/weirhq/weir/broker/nats/natsembed"
	"github.com/weirhq/weir/broker/rabbitmq"
	"github.com/weirhq/weir/ingest"
	"github.com/weirhq/weir/ingest/blob"
	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/internal/redact"
	"github.com/weirhq/weir/schedule"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/appdb"
)

// serviceFlags are the flags of the commands that run or query the
// ingestion service: the store flags, and the pipeline's settings.
type serviceFlags struct {
	store       storeFlags
	llmURL      string
	llmModel    string
	llmKey      string
	id          string
	workers     int
	maxAttempts int
	backoff     time.Duration
	watchEvery  time.Duration
	sweepEvery  time.Duration // set by the command, not a flag
	reindexAt   string
	maxFileSize byteSize
	// index is -index: fts, postgres, a postgres:// URL, or empty for
	// the store's default.
	index string
	// timeouts bound one attempt of each stage: parse, extract, save,
	// index.
	timeouts [4]time.Duration
	// blobURLs are -incoming-url, -processed-url and -failed-url, in the
	// order of blobFlags.
	blobURLs [3]string
}

// blobFlags are the flags of the containers of incoming/, processed/ and
// failed/, with the ingest.Config fields they set.
var blobFlags = [3]struct{ name, folder, setting string }{
	{"incoming-url", "incoming", "Config.IncomingURL"},
	{"processed-url", "processed", "Config.ProcessedURL"},
	{"failed-url", "failed", "Config.FailedURL"},
}

// declare adds the flags to fs.
func (f *serviceFlags) declare(fs *flag.FlagSet) {
	f.store.declare(fs)
	fs.StringVar(&f.llmURL, "llm-url", "", "base `URL` of an OpenAI-compatible API (…/v1) to extract with; empty: the built-in local extractor")
	fs.StringVar(&f.llmModel, "llm-model", "gpt-4o-mini", "the `model` the LLM extractor asks")
	fs.StringVar(&f.llmKey, "llm-api-key", "", "the LLM API's bearer `key` (prefer WEIR_LLM_API_KEY: a flag shows in ps)")
	fs.StringVar(&f.id, "id", "", "this process's worker `id`; keep it stable across restarts so a restart takes its jobs back at once (default: hostname-HASH-SLOT, stable for the data directory on this host)")
	fs.IntVar(&f.workers, "workers", pipeline.DefaultWorkers, "jobs run at once")
	fs.IntVar(&f.maxAttempts, "max-attempts", pipeline.DefaultMaxAttempts, "attempts per stage before a document fails to failed/")
	fs.DurationVar(&f.backoff, "backoff", 5*time.Second, "first wait before a stage's retry, doubling to 5m")
	fs.DurationVar(&f.watchEvery, "watch-every", pipeline.DefaultWatchEvery, "how often incoming/ is scanned")
	f.maxFileSize = byteSize(pipeline.DefaultMaxFileSize)
	fs.Var(&f.maxFileSize, "max-file-size", "the largest file weir reads, a `size` in bytes or with a unit (32MiB, 500KB); a larger one fails at once, unread")
	for i, st := range stageTimeouts {
		f.timeouts[i] = st.def
		fs.DurationVar(&f.timeouts[i], st.name+"-timeout", st.def, "how long one attempt of the "+st.name+" stage may take before it fails")
	}
	fs.StringVar(&f.reindexAt, "reindex-schedule", pipeline.DefaultReindexSchedule, "when reconciliation runs by itself, as a schedule (\"daily at 02:00\", \"0 2 * * *\"), or \"never\"")
	for i, b := range blobFlags {
		fs.StringVar(&f.blobURLs[i], b.name, "", "`URL` of the container (or folder of one, ?prefix=) that holds "+b.folder+"/: file://, azblob://, s3:// or gs://; default the folder in -data")
	}
	fs.StringVar(&f.index, "index", "", "the search `index`: fts (a SQLite file in -data), postgres (tables beside the store's, shared by every process on it), or a postgres:// URL of a database of its own; default fts with the SQLite store, postgres with a PostgreSQL one")
}

// indexChoice splits -index into the service's Index and IndexURL.
func (f *serviceFlags) indexChoice() (index, indexURL string) {
	if strings.Contains(f.index, "://") {
		return "", f.index
	}
	return f.index, ""
}

// openMode says what opening the service may make.
type openMode int

const (
	// openCreate may make the data directory, the schema and the tables
	// (weir run, weir ingest).
	openCreate openMode = iota
	// openExisting needs a store that exists, migrated, and may write to it
	// and to the data directory (weir reindex).
	openExisting
	// openReadOnly needs a store that exists, migrated, with the service's
	// tables, and makes nothing: no directory, no schema, no table, no
	// index file (weir search, weir status).
	openReadOnly
)

// stageTimeouts are the stages whose attempts the -STAGE-timeout flags
// bound, with their defaults, in the order of serviceFlags.timeouts.
var stageTimeouts = [4]struct {
	name string
	def  time.Duration
}{
	{"parse", pipeline.DefaultParseTimeout},
	{"extract", pipeline.DefaultExtractTimeout},
	{"save", pipeline.DefaultSaveTimeout},
	{"index", pipeline.DefaultIndexTimeout},
}

// appDB opens weir's store and the service's tables. With openCreate it
// makes a missing data directory; otherwise the store must exist, at this
// weir's schema version, and with openReadOnly hold the service's tables
// too.
func (f storeFlags) appDB(ctx context.Context, mode openMode) (*appdb.DB, error) {
	driver, err := f.driver()
	if err != nil {
		return nil, err
	}
	if mode == openCreate {
		if driver == "sqlite" {
			if err := os.MkdirAll(f.data, 0o755); err != nil {
				return nil, fmt.Errorf("make the data directory: %w", err)
			}
		}
	} else if err := f.checkExists(ctx, driver); err != nil {
		return nil, err
	}
	where := f.where(driver)
	db, err := appdb.Open(ctx, appdb.Config{URL: f.url, Schema: f.schema, Path: f.sqlitePath()})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if mode != openCreate {
		err = f.checkVersion(ctx, db.Store, where, driver)
	}
	if err == nil && mode == openReadOnly {
		err = checkServiceTables(ctx, db, where)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// checkServiceTables returns an error unless db holds the tables of the
// ingestion service at this weir's version, which weir migrate makes.
func checkServiceTables(ctx context.Context, db *appdb.DB, where string) error {
	cur, latest, err := pipeline.SchemaVersion(ctx, db)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", where, err)
	case cur == 0:
		return fmt.Errorf("%s has no table %s of the ingestion service: run weir migrate", where, pipeline.MigrationsTable)
	case cur < latest:
		return fmt.Errorf("%s holds the ingestion service's tables at version %d and this weir needs %d: run weir migrate", where, cur, latest)
	case cur > latest:
		return fmt.Errorf("%s holds the ingestion service's tables at version %d, newer than this weir's %d (upgrade weir): %w", where, cur, latest, store.ErrSchemaTooNew)
	}
	return nil
}

// service is an opened ingestion service, and what closes it.
type service struct {
	*ingest.Service
	// db is the store the command opened and checked for the service,
	// closed after it; nil when the service opened its own.
	db *appdb.DB
}

// close stops the service, if it runs, and closes it and its store.
func (s *service) close() {
	_ = s.Stop(context.Background())
	if s.db != nil {
		s.db.Close()
	}
}

// check returns a usage error naming the first flag whose value is out of
// range: it runs before anything is opened.
func (f *serviceFlags) check() error {
	switch {
	case f.workers < 1:
		return flagError("workers", "%d: want at least 1", f.workers)
	case f.maxAttempts < 1:
		return flagError("max-attempts", "%d: want at least 1", f.maxAttempts)
	case f.backoff <= 0:
		return flagError("backoff", "%v: want a positive duration such as 5s", f.backoff)
	case f.watchEvery <= 0:
		return flagError("watch-every", "%v: want a positive duration such as 1s", f.watchEvery)
	case strings.ContainsFunc(f.id, unsafeRune):
		return flagError("id", "%q: want a name without control characters", f.id)
	case f.maxFileSize < 1:
		return flagError("max-file-size", "%d: want a positive size such as 32MiB", f.maxFileSize)
	}
	for i, st := range stageTimeouts {
		if f.timeouts[i] <= 0 {
			return flagError(st.name+"-timeout", "%v: want a positive duration such as %v", f.timeouts[i], st.def)
		}
	}
	if f.reindexAt != pipeline.NoSchedule {
		if _, err := schedule.Parse(f.reindexAt); err != nil {
			return flagError("reindex-schedule", "%q: %v (or %q)", f.reindexAt, err, pipeline.NoSchedule)
		}
	}
	for i, b := range blobFlags {
		if f.blobURLs[i] == "" {
			continue
		}
		if err := blob.CheckURL(f.blobURLs[i]); err != nil {
			return flagError(b.name, "%v", err)
		}
	}
	if f.llmURL != "" && !ingest.HTTPURL(f.llmURL) {
		return flagError("llm-url", "%q: want an http:// or https:// URL with a host (…/v1)", redact.URL(f.llmURL))
	}
	driver, err := f.store.driver()
	if err != nil {
		return err
	}
	index, indexURL := f.indexChoice()
	if index != "" && index != ingest.IndexFTS && index != ingest.IndexPostgres {
		return flagError("index", "%q: want %s, %s or a postgres:// URL", index, ingest.IndexFTS, ingest.IndexPostgres)
	}
	if _, err := ingest.CheckIndex(index, indexURL, driver == "postgres"); err != nil {
		return flagError("index", "%q with %s: %v", redact.URL(f.index), storeKind(driver), err)
	}
	return nil
}

// storeKind says which store a driver is, for messages.
func storeKind(driver string) string {
	if driver == "postgres" {
		return "a PostgreSQL store (-store)"
	}
	return "the SQLite store (no -store)"
}

// config maps the flags onto the service's config. The logger is the
// service's and the LLM extractor's.
func (f *serviceFlags) config(logger *slog.Logger) ingest.Config {
	var stages [4]pipeline.Stage
	for i := range stages {
		stages[i] = pipeline.Stage{MaxAttempts: f.maxAttempts, Backoff: pipeline.DefaultBackoff, Timeout: f.timeouts[i]}
		stages[i].Backoff.Base = f.backoff
	}
	index, indexURL := f.indexChoice()
	return ingest.Config{DataDir: f.store.data, StoreURL: f.store.url, Schema: f.store.schema, Logger: logger, Index: index, IndexURL: indexURL,
		IncomingURL: f.blobURLs[0], ProcessedURL: f.blobURLs[1], FailedURL: f.blobURLs[2],
		LLM: extract.LLMConfig{URL: f.llmURL, Model: f.llmModel, APIKey: f.llmKey},
		Pipeline: pipeline.Config{ID: f.id, Workers: f.workers,
			Parse: stages[0], Extract: stages[1], Save: stages[2], IndexStage: stages[3],
			MaxFileSize: int64(f.maxFileSize), WatchEvery: f.watchEvery, SweepEvery: f.sweepEvery, ReindexSchedule: f.reindexAt}}
}

// open checks the flags and opens the service cfg, mapped from them,
// configures: mode says what it may make (see openMode). With openCreate
// the service opens its store itself; otherwise the store must exist, at
// this weir's version, and for openReadOnly hold the service's tables.
func (f *serviceFlags) open(ctx context.Context, mode openMode, cfg ingest.Config) (*service, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	svc := &service{}
	if mode != openCreate {
		db, err := f.store.appDB(ctx, mode)
		if err != nil {
			return nil, err
		}
		svc.db = db
		cfg.DB, cfg.StoreURL, cfg.Schema, cfg.ReadOnly = db, "", "", mode == openReadOnly
	}
	s, err := ingest.New(ctx, cfg)
	if err != nil {
		if svc.db != nil {
			svc.db.Close()
		}
		if bad := (*ingest.SearchDatabaseError)(nil); errors.As(err, &bad) {
			return nil, flagError("index", "%s: the search database does not answer: %v", bad.URL, bad.Err)
		}
		var bad *blob.SettingError
		if errors.As(err, &bad) {
			for _, b := range blobFlags {
				if b.setting == bad.Setting {
					return nil, flagError(b.name, "%v", bad.Err)
				}
			}
		}
		return nil, err
	}
	svc.Service = s
	return svc, nil
}

// openBroker opens the broker -broker names: "embedded" for a NATS
// server with JetStream in <data>/nats, a nats:// URL, or an amqp:// (or
// amqps://) URL for RabbitMQ. A server that is unreachable at start is
// connected to in the background: the outbox holds the events meanwhile.
func openBroker(ctx context.Context, spec, data string, logger *slog.Logger) (broker.Broker, error) {
	switch {
	case spec == "embedded":
		return natsembed.Open(ctx, natsembed.Config{Dir: filepath.Join(data, "nats"), Broker: nats.Config{Logger: logger}})
	case strings.HasPrefix(spec, "nats://"):
		return nats.Open(ctx, nats.Config{URL: spec, Logger: logger, RetryFirstConnect: true})
	case strings.HasPrefix(spec, "amqp://"), strings.HasPrefix(spec, "amqps://"):
		return rabbitmq.Open(ctx, rabbitmq.Config{URL: spec, Logger: logger, RetryFirstConnect: true})
	}
	return nil, usageError{"-broker: want embedded, a nats:// URL or an amqp:// URL"}
}

// serviceTables makes the ingestion service's tables beside weir's, as
// weir run would (statements that can run again).
func (f storeFlags) serviceTables(ctx context.Context) error {
	db, err := f.appDB(ctx, openCreate)
	if err != nil {
		return err
	}
	defer db.Close()
	return pipeline.Migrate(ctx, db)
}

// folder is where the service's folder of blobFlags[i] (incoming/,
// processed/, failed/) is, and sub below it, for messages: its container's
// URL, or the data directory's folder.
func (f *serviceFlags) folder(i int, sub ...string) string {
	if f.blobURLs[i] == "" {
		return printable(filepath.Join(append([]string{f.store.data, blobFlags[i].folder}, sub...)...))
	}
	return printable(strings.Join(append([]string{blob.Display(f.blobURLs[i])}, sub...), "/"))
}
