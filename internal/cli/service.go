package cli

import (
	"context"
	"flag"
	"fmt"
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
	"github.com/weirhq/weir/broker/rabbitmq"
	"github.com/weirhq/weir/extract"
	"github.com/weirhq/weir/internal/appdb"
	"github.com/weirhq/weir/metrics"
	"github.com/weirhq/weir/pipeline"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/search/fts"
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
	eventsTopic string               // set by weir run with a broker
	tracer      trace.TracerProvider // set by weir run with -otlp-endpoint
}

// declare adds the flags to fs.
func (f *serviceFlags) declare(fs *flag.FlagSet) {
	f.store.declare(fs)
	fs.StringVar(&f.llmURL, "llm-url", "", "base `URL` of an OpenAI-compatible API (…/v1) to extract with; empty: the built-in local extractor")
	fs.StringVar(&f.llmModel, "llm-model", "gpt-4o-mini", "the `model` the LLM extractor asks")
	fs.StringVar(&f.llmKey, "llm-api-key", "", "the LLM API's bearer `key` (prefer WEIR_LLM_API_KEY: a flag shows in ps)")
	fs.StringVar(&f.id, "id", "", "this process's worker `id`; keep it stable across restarts so a restart takes its jobs back at once (default hostname-pid)")
	fs.IntVar(&f.workers, "workers", pipeline.DefaultWorkers, "jobs run at once")
	fs.IntVar(&f.maxAttempts, "max-attempts", pipeline.DefaultMaxAttempts, "attempts per stage before a document fails to failed/")
	fs.DurationVar(&f.backoff, "backoff", 5*time.Second, "first wait before a stage's retry, doubling to 5m")
	fs.DurationVar(&f.watchEvery, "watch-every", pipeline.DefaultWatchEvery, "how often incoming/ is scanned")
	fs.StringVar(&f.reindexAt, "reindex-schedule", pipeline.DefaultReindexSchedule, "when reconciliation runs by itself, as a schedule (\"daily at 02:00\", \"0 2 * * *\"), or \"never\"")
}

// appDB opens weir's store and the service's tables; create makes a
// missing data directory (run, ingest), otherwise it must exist.
func (f storeFlags) appDB(ctx context.Context, create bool) (*appdb.DB, error) {
	driver, err := f.driver()
	if err != nil {
		return nil, err
	}
	if create {
		if err := os.MkdirAll(f.data, 0o755); err != nil {
			return nil, fmt.Errorf("make the data directory: %w", err)
		}
	} else if driver == "sqlite" {
		if err := f.checkData(); err != nil {
			return nil, err
		}
	}
	db, err := appdb.Open(ctx, appdb.Config{URL: f.url, Schema: f.schema, Path: f.sqlitePath()})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.where(driver), err)
	}
	return db, nil
}

// service is an opened service and what closes it.
type service struct {
	*pipeline.Service
	// breakers are the service's circuit breakers, for the admin API:
	// the LLM extractor's, with -llm-url.
	breakers []*breaker.Breaker
	close    func()
}

// open opens the database, the index and the extractor, and makes the
// service (migrating the database). create: see appDB.
// With reg, the job engine's metrics are registered there.
func (f *serviceFlags) open(ctx context.Context, create bool, logger *slog.Logger, reg prometheus.Registerer) (*service, error) {
	if f.maxAttempts < 1 || f.workers < 1 || f.backoff <= 0 || f.watchEvery <= 0 {
		return nil, usageError{"-max-attempts and -workers must be at least 1, -backoff and -watch-every positive"}
	}
	db, err := f.store.appDB(ctx, create)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(f.store.data, filepath.Dir(indexFile)), 0o755); err != nil {
		db.Close()
		return nil, err
	}
	idx, err := fts.Open(ctx, fts.Config{Path: filepath.Join(f.store.data, indexFile), Logger: logger})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open the search index: %w", err)
	}
	closeAll := func() {
		idx.Close()
		db.Close()
	}
	var ex pipeline.Extractor = extract.NewLocal()
	name := "local"
	var breakers []*breaker.Breaker
	if f.llmURL != "" {
		llm, err := extract.NewLLM(extract.LLMConfig{URL: f.llmURL, Model: f.llmModel, APIKey: f.llmKey, Logger: logger})
		if err != nil {
			closeAll()
			return nil, usageError{fmt.Sprintf("-llm-url: %v", err)}
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
	st := pipeline.Stage{MaxAttempts: f.maxAttempts}
	st.Backoff = pipeline.DefaultBackoff
	st.Backoff.Base = f.backoff
	svc, err := pipeline.New(ctx, pipeline.Config{DB: db, DataDir: f.store.data, Index: idx, Extractor: ex, ExtractorName: name,
		ID: f.id, Workers: f.workers, Parse: st, Extract: st, Save: st, IndexStage: st,
		WatchEvery: f.watchEvery, SweepEvery: f.sweepEvery, ReindexSchedule: f.reindexAt, Logger: logger, Metrics: m,
		EventsTopic: f.eventsTopic, TracerProvider: f.tracer})
	if err != nil {
		closeAll()
		return nil, err
	}
	return &service{Service: svc, breakers: breakers, close: closeAll}, nil
}

// openBroker opens the broker -broker names: "embedded" for a NATS
// server with JetStream in <data>/nats, a nats:// URL, or an amqp:// (or
// amqps://) URL for RabbitMQ.
func openBroker(ctx context.Context, spec, data string, logger *slog.Logger) (broker.Broker, error) {
	switch {
	case spec == "embedded":
		return nats.OpenEmbedded(ctx, nats.EmbeddedConfig{Dir: filepath.Join(data, "nats"), Broker: nats.Config{Logger: logger}})
	case strings.HasPrefix(spec, "nats://"):
		return nats.Open(ctx, nats.Config{URL: spec, Logger: logger})
	case strings.HasPrefix(spec, "amqp://"), strings.HasPrefix(spec, "amqps://"):
		return rabbitmq.Open(ctx, rabbitmq.Config{URL: spec, Logger: logger})
	}
	return nil, usageError{"-broker: want embedded, a nats:// URL or an amqp:// URL"}
}

// serviceTables makes the ingestion service's tables beside weir's, as
// weir run would (statements that can run again).
func (f storeFlags) serviceTables(ctx context.Context) error {
	db, err := f.appDB(ctx, true)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.SQL.ExecContext(ctx, pipeline.Schema[db.Driver])
	return err
}

// newTracerProvider exports spans over OTLP/HTTP to endpoint (a URL such
// as http://127.0.0.1:4318; the path /v1/traces is added), in batches,
// as the service "weir".
func newTracerProvider(ctx context.Context, endpoint string) (*sdktrace.TracerProvider, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError{fmt.Sprintf("-otlp-endpoint %q: want an http:// or https:// URL with a host", endpoint)}
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(strings.TrimRight(endpoint, "/") + "/v1/traces")}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("-otlp-endpoint: %w", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "weir"))
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
