package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/nats"
	"github.com/weirhq/weir/broker/nats/natsembed"
	"github.com/weirhq/weir/broker/rabbitmq"
	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/ingest/search"
	"github.com/weirhq/weir/ingest/search/fts"
	"github.com/weirhq/weir/internal/redact"
	"github.com/weirhq/weir/metrics"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/schedule"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/appdb"
)

// indexFile is the search index's file in the data directory.
const indexFile = "index/search.db"

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
	// timeouts bound one attempt of each stage: parse, extract, save,
	// index.
	timeouts    [4]time.Duration
	eventsTopic string               // set by weir run with a broker
	tracer      trace.TracerProvider // set by weir run with -otlp-endpoint
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

// service is an opened service and what closes it.
type service struct {
	*pipeline.Service
	// breakers are the service's circuit breakers, for the admin API:
	// the LLM extractor's, with -llm-url.
	breakers []*breaker.Breaker
	close    func()
	// probe, when set, makes Ready check that writes succeed (weir run).
	probe *writeProbe
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
	if f.llmURL != "" {
		u, err := url.Parse(f.llmURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return flagError("llm-url", "%q: want an http:// or https:// URL with a host (…/v1)", redact.URL(f.llmURL))
		}
	}
	if _, err := f.store.driver(); err != nil {
		return err
	}
	return nil
}

// open opens the database, the index and the extractor, and makes the
// service. mode says what it may make: see openMode. With reg, the job
// engine's metrics are registered there.
func (f *serviceFlags) open(ctx context.Context, mode openMode, logger *slog.Logger, reg prometheus.Registerer) (*service, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	indexPath := filepath.Join(f.store.data, indexFile)
	db, err := f.store.appDB(ctx, mode)
	if err != nil {
		return nil, err
	}
	var cleanup []func()
	closeAll := func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}
	cleanup = append(cleanup, func() { db.Close() })
	dataDir := f.store.data
	var idx pipeline.Index
	if mode == openReadOnly {
		// pipeline.New makes the data directory's folders, which a command
		// that only reads must not: it gets a scratch directory, which
		// the queries never read.
		if dataDir, err = os.MkdirTemp("", "weir-read-"); err != nil {
			closeAll()
			return nil, err
		}
		cleanup = append(cleanup, func() { os.RemoveAll(dataDir) })
		if _, err := os.Stat(indexPath); errors.Is(err, fs.ErrNotExist) {
			idx = noIndex{path: indexPath}
		}
	}
	if idx == nil {
		if err := os.MkdirAll(filepath.Dir(indexPath), 0o755); err != nil {
			closeAll()
			return nil, err
		}
		fidx, err := fts.Open(ctx, fts.Config{Path: indexPath, Logger: logger})
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("open the search index: %w", err)
		}
		cleanup = append(cleanup, func() { fidx.Close() })
		idx = fidx
	}
	var ex pipeline.Extractor = extract.NewLocal()
	name := "local"
	var breakers []*breaker.Breaker
	if f.llmURL != "" {
		llm, err := extract.NewLLM(extract.LLMConfig{URL: f.llmURL, Model: f.llmModel, APIKey: f.llmKey, Logger: logger})
		if err != nil {
			closeAll()
			return nil, usageError{fmt.Sprintf("-llm-url: %s", redact.String(err.Error(), f.llmKey))}
		}
		ex, name = llm, "llm"
		breakers = append(breakers, llm.Breaker())
	}
	var m *metrics.Metrics
	if reg != nil {
		if m, err = metrics.New(reg, metrics.Options{Store: db.Store}); err != nil {
			closeAll()
			return nil, err
		}
	}
	var stages [4]pipeline.Stage
	for i := range stages {
		stages[i] = pipeline.Stage{MaxAttempts: f.maxAttempts, Backoff: pipeline.DefaultBackoff, Timeout: f.timeouts[i]}
		stages[i].Backoff.Base = f.backoff
	}
	svc, err := pipeline.New(ctx, pipeline.Config{DB: db, DataDir: dataDir, Index: idx, Extractor: ex, ExtractorName: name,
		ID: f.id, Workers: f.workers, Parse: stages[0], Extract: stages[1], Save: stages[2], IndexStage: stages[3],
		MaxFileSize: int64(f.maxFileSize),
		WatchEvery:  f.watchEvery, SweepEvery: f.sweepEvery, ReindexSchedule: f.reindexAt, Logger: logger, Metrics: m,
		EventsTopic: f.eventsTopic, TracerProvider: f.tracer})
	if err != nil {
		closeAll()
		return nil, err
	}
	// Stop gives back the worker id's slot of a service never started, and
	// does nothing to one stopped already.
	cleanup = append(cleanup, func() { _ = svc.Stop(context.WithoutCancel(ctx)) })
	return &service{Service: svc, breakers: breakers, close: closeAll}, nil
}

// noIndex stands for a search index that was never made (a data
// directory weir migrate made, that no weir run has used): it holds
// nothing, and a search in it says so. A command that only reads does not
// make the file.
type noIndex struct{ path string }

var _ pipeline.Index = noIndex{}

func (n noIndex) err() error {
	return fmt.Errorf("no search index at %s: weir run, weir ingest or weir reindex makes it", n.path)
}

func (n noIndex) Put(context.Context, ...search.Doc) error        { return n.err() }
func (n noIndex) Delete(context.Context, ...string) (int, error)  { return 0, n.err() }
func (n noIndex) Get(context.Context, string) (search.Doc, error) { return search.Doc{}, n.err() }
func (n noIndex) Count(context.Context) (int, error)              { return 0, nil }
func (n noIndex) Close() error                                    { return nil }
func (n noIndex) Search(context.Context, string, int) ([]search.Hit, error) {
	return nil, n.err()
}
func (n noIndex) Entries(context.Context, string, int) ([]search.Entry, error) {
	return nil, nil
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

// newTracerProvider exports spans over OTLP/HTTP to endpoint (a URL such
// as http://127.0.0.1:4318; the path /v1/traces is added), in batches,
// as the service "weir".
func newTracerProvider(ctx context.Context, endpoint string) (*sdktrace.TracerProvider, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, flagError("otlp-endpoint", "%q: want an http:// or https:// URL with a host", redact.URL(endpoint))
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(strings.TrimRight(endpoint, "/") + "/v1/traces")}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("-otlp-endpoint %s: %s", redact.URL(endpoint), redact.String(err.Error()))
	}
	res := resource.NewSchemaless(attribute.String("service.name", "weir"))
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
