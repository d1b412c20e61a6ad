package ingest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/internal/redact"
	"github.com/weirhq/weir/metrics"
	"github.com/weirhq/weir/outbox"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/store/appdb"
)

// Service is the ingestion service put together: the store and the
// service's tables, the search index, the extractor, the pipeline, the
// outbox relay to a broker, and the HTTP handler (the read API, the admin
// API, the console, /metrics, /healthz and /readyz).
type Service struct {
	cfg      Config
	db       *appdb.DB
	pipe     *pipeline.Service
	breakers []*breaker.Breaker
	relay    *outbox.Relay // nil without a broker
	handler  http.Handler
	ln       net.Listener // nil without Listen
	srv      *http.Server
	probe    *writeProbe // nil when read-only
	closers  []func()    // what New opened, closed in reverse by Stop

	mu       sync.Mutex // guards the fields below; held by Start and Stop
	started  bool
	stopped  bool
	cancel   context.CancelFunc // ends the relay
	relayErr chan error
	served   chan error // the server's end, once Start served
}

// New opens what cfg names and puts the service together: it makes the
// data directory, migrates the store (weir's tables, then the service's:
// pipeline.Migrate) and opens the index, unless cfg.ReadOnly; it listens
// on cfg.Listen, if set. Nothing runs until Start. A service New returned
// is closed by Stop, whether started or not.
func New(ctx context.Context, cfg Config) (*Service, error) {
	cfg, err := cfg.check()
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, breakers: cfg.Breakers}
	if err := s.open(ctx); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// open does New's work, recording in s.closers what it opened.
func (s *Service) open(ctx context.Context) error {
	cfg := s.cfg
	if err := s.openDB(ctx); err != nil {
		return err
	}
	pc := cfg.Pipeline
	pc.DB, pc.DataDir, pc.Logger = s.db, cfg.DataDir, cfg.Logger
	if cfg.ReadOnly {
		// pipeline.New makes the data directory's folders, which a read-only
		// service must not: it gets a scratch directory, which the queries
		// never read.
		scratch, err := os.MkdirTemp("", "weir-read-")
		if err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
		s.closers = append(s.closers, func() { os.RemoveAll(scratch) })
		pc.DataDir = scratch
	}
	var err error
	if pc.Index, err = s.openIndex(ctx); err != nil {
		return err
	}
	if !cfg.ReadOnly && pc.Blobs == nil {
		if pc.Blobs, err = s.openBlobs(ctx); err != nil {
			return err
		}
	}
	if pc.Extractor, pc.ExtractorName, err = s.extractor(); err != nil {
		return err
	}
	reg := cfg.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if pc.Metrics, err = metrics.New(reg, metrics.Options{Store: s.db.Store}); err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	if err := reg.Register(metrics.NewBreakerCollector(s.breakers...)); err != nil {
		return fmt.Errorf("ingest: register the breaker metrics: %w", err)
	}
	if pc.TracerProvider, err = s.tracerProvider(ctx); err != nil {
		return err
	}
	if s.pipe, err = pipeline.New(ctx, pc); err != nil {
		return err
	}
	// Stop gives back the worker id's slot of a pipeline never started,
	// and does nothing to one stopped already.
	s.closers = append(s.closers, func() { _ = s.pipe.Stop(context.Background()) })
	if !cfg.ReadOnly {
		s.probe = newWriteProbe(cfg.DataDir, s.db, pc.Clock)
	}
	if cfg.Broker != nil {
		if err := s.openRelay(ctx, pc); err != nil {
			return err
		}
	}
	if s.handler, err = newHandler(s, cfg.AdminToken, cfg.ReadToken, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})); err != nil {
		return err
	}
	if cfg.Listen != "" {
		if s.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fmt.Errorf("ingest: listen: %w", err)
		}
		s.closers = append(s.closers, func() { s.ln.Close() })
		// No WriteTimeout: the export of the dead letters streams.
		s.srv = &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	}
	return nil
}

// openDB opens the store the config names, making the data directory for
// a SQLite file, or takes Config.DB; a read-only service's store must
// exist, and hold the service's tables.
func (s *Service) openDB(ctx context.Context) error {
	cfg := s.cfg
	s.db = cfg.DB
	if s.db == nil {
		path := filepath.Join(cfg.DataDir, SQLiteFile)
		if cfg.StoreURL == "" {
			if cfg.ReadOnly {
				if _, err := os.Stat(path); err != nil {
					return fmt.Errorf("ingest: a read-only service's store: %w", err)
				}
			} else if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
				return fmt.Errorf("ingest: make the data directory: %w", err)
			}
		}
		db, err := appdb.Open(ctx, appdb.Config{URL: cfg.StoreURL, Schema: cfg.Schema, Path: path})
		if err != nil {
			return fmt.Errorf("ingest: open the store: %w", err)
		}
		s.db = db
		s.closers = append(s.closers, func() { db.Close() })
	}
	if !cfg.ReadOnly {
		return nil
	}
	cur, latest, err := pipeline.SchemaVersion(ctx, s.db)
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	if cur != latest {
		return fmt.Errorf("%w (version %d, this release's %d)", ErrNotMigrated, cur, latest)
	}
	return nil
}

// extractor makes the configured extractor, and adds the LLM's breaker
// to the service's.
func (s *Service) extractor() (pipeline.Extractor, string, error) {
	cfg := s.cfg
	if cfg.LLM.URL == "" {
		if cfg.Extractor == nil {
			return extract.NewLocal(), "local", nil
		}
		return cfg.Extractor, cfg.ExtractorName, nil
	}
	lc := cfg.LLM
	if lc.Logger == nil {
		lc.Logger = cfg.Logger
	}
	llm, err := extract.NewLLM(lc)
	if err != nil {
		return nil, "", fmt.Errorf("ingest: the LLM extractor: %s", redact.String(err.Error(), lc.APIKey))
	}
	s.breakers = append(s.breakers, llm.Breaker())
	name := cfg.ExtractorName
	if name == "" {
		name = "llm"
	}
	return llm, name, nil
}

// tracerProvider is Config.TracerProvider, or one that exports to
// Config.OTLPEndpoint.
func (s *Service) tracerProvider(ctx context.Context) (trace.TracerProvider, error) {
	if s.cfg.OTLPEndpoint == "" {
		return s.cfg.TracerProvider, nil
	}
	tp, err := newOTLPTracer(ctx, s.cfg.OTLPEndpoint)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			s.cfg.Logger.Warn("flush the last spans", "err", err)
		}
	})
	return tp, nil
}

// openRelay declares the events' topic on the broker and makes the
// outbox relay that delivers them.
func (s *Service) openRelay(ctx context.Context, pc pipeline.Config) error {
	topic := s.cfg.Pipeline.EventsTopic
	// A broker that is down at start is not an error: events wait in the
	// outbox, and the relay declares the topic and delivers them once the
	// broker is back.
	if err := s.cfg.Broker.Declare(ctx, topic); err != nil && !errors.Is(err, broker.ErrNotConnected) {
		return fmt.Errorf("ingest: declare the events topic %s: %w", topic, err)
	}
	relay, err := outbox.New(outbox.Config{Store: s.db.Store, Broker: s.cfg.Broker, ID: s.pipe.ID(), Topics: []string{topic},
		Logger: s.cfg.Logger, TracerProvider: pc.TracerProvider})
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	s.relay = relay
	return nil
}

// Start runs the pipeline (the scans of incoming/, the stages, the sweeps
// and the scheduled reindex), the outbox relay, and the HTTP server, until
// Stop. It refuses a read-only service, and a second call.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.cfg.ReadOnly:
		return errors.New("ingest: a read-only service cannot start")
	case s.started || s.stopped:
		return errors.New("ingest: already started")
	}
	if err := s.pipe.Start(ctx); err != nil {
		return err
	}
	s.started = true
	relayCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	s.relayErr = make(chan error, 1)
	if s.relay != nil {
		go func() { s.relayErr <- s.relay.Run(relayCtx) }()
	} else {
		s.relayErr <- nil
	}
	s.served = make(chan error, 1)
	if s.srv != nil {
		go func() { s.served <- s.srv.Serve(s.ln) }()
	}
	return nil
}

// Wait blocks until ctx ends, or the HTTP server fails: it returns the
// server's error then, nil otherwise. Stop the service after.
func (s *Service) Wait(ctx context.Context) error {
	s.mu.Lock()
	served := s.served
	s.mu.Unlock()
	select {
	case <-ctx.Done():
		return nil
	case err := <-served: // nil channel before Start: ctx alone
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// Stop stops the HTTP server, the pipeline (waiting for the running jobs
// up to ctx) and the relay, then closes what New opened, and sends the
// last spans to the OTLP collector. It is safe to call twice, and closes
// a service never started.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	var err error
	if s.started {
		s.cfg.Logger.Info("stopping")
		if s.srv != nil {
			_ = s.srv.Shutdown(ctx)
		}
		err = s.pipe.Stop(ctx)
		s.cancel()
		if rerr := <-s.relayErr; rerr != nil && !errors.Is(rerr, context.Canceled) {
			s.cfg.Logger.Error("the outbox relay", "err", rerr)
		}
	}
	s.close()
	return err
}

// close closes what New opened, the last first.
func (s *Service) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// Run runs the service cfg configures until ctx ends, or its HTTP server
// fails, then stops it, giving its running jobs up to 30 s.
func Run(ctx context.Context, cfg Config) error {
	s, err := New(ctx, cfg)
	if err != nil {
		return err
	}
	if err := s.Start(ctx); err != nil {
		_ = s.Stop(context.WithoutCancel(ctx))
		return err
	}
	waitErr := s.Wait(ctx)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return errors.Join(waitErr, s.Stop(sctx))
}

// Pipeline is the service's pipeline: to ingest files, follow their
// progress, search, read documents, reindex.
func (s *Service) Pipeline() *pipeline.Service { return s.pipe }

// DB is the service's store and tables.
func (s *Service) DB() *appdb.DB { return s.db }

// Breakers are the service's circuit breakers: Config.Breakers, and the
// LLM extractor's.
func (s *Service) Breakers() []*breaker.Breaker { return s.breakers }

// Handler serves the HTTP API, the admin API under /api/admin/, the
// console under /ui/, /metrics, /healthz and /readyz, as a server on
// Config.Listen does.
func (s *Service) Handler() http.Handler { return s.handler }

// Addr is the address the HTTP server listens on (Config.Listen, with the
// port it took for port 0), or nil without Listen.
func (s *Service) Addr() net.Addr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Ready reports whether the service can work: its database and index
// answer, and, unless read-only, the data directory and the database
// accept writes (probed at most every few seconds).
func (s *Service) Ready(ctx context.Context) error {
	if err := s.pipe.Ready(ctx); err != nil {
		return err
	}
	if s.probe != nil {
		return s.probe.check(ctx)
	}
	return nil
}

// newOTLPTracer exports spans over OTLP/HTTP to endpoint (the path
// /v1/traces is added), in batches, as the service "weir".
func newOTLPTracer(ctx context.Context, endpoint string) (*sdktrace.TracerProvider, error) {
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(strings.TrimRight(endpoint, "/")+"/v1/traces"))
	if err != nil {
		return nil, fmt.Errorf("ingest: OTLP endpoint %s: %s", redact.URL(endpoint), redact.String(err.Error()))
	}
	res := resource.NewSchemaless(attribute.String("service.name", "weir"))
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
