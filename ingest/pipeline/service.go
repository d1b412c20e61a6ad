package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/ingest/parse"
	"github.com/weirhq/weir/ingest/search"
)

// Index is what the service needs of its search index.
type Index interface {
	search.Index
}

// Extractor extracts a document.
type Extractor interface {
	Extract(ctx context.Context, in extract.Input) (extract.Result, error)
}

// The data directory's folders.
const (
	IncomingDir  = "incoming"
	ProcessedDir = "processed"
	FailedDir    = "failed"
)

// Service is the ingestion service: the job engine running the stages,
// the scan of incoming/, the sweeps, and the queries.
type Service struct {
	cfg    Config
	db     dbHandle
	client *weir.Client
	log    *slog.Logger
	// root is the data directory: every read and write of the service's
	// files goes through it, and cannot leave it.
	root *os.Root
	// blobs, when set, hold incoming/, processed/ and failed/ instead of
	// root (Config.Blobs).
	blobs *Blobs
	// slot holds the lock of the default worker id's slot, until Stop;
	// nil when Config.ID was given.
	slotMu sync.Mutex
	slot   *os.File
	// parseFile, when set, parses files instead of the parse package
	// (tests set it).
	parseFile func(name string, data []byte) ([]parse.Doc, error)
	// beforeOpen, when set, is called by the scan between its check of a
	// file and the file's opening; tests use it to change the file then.
	beforeOpen func(rel string)

	mu      sync.Mutex // guards started and cancel; held by Start and Stop
	started bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	// seenMu guards seen. It is not mu: Stop holds mu while it waits for
	// the scan, which needs seen.
	seenMu  sync.Mutex
	seen    map[string]seenFile // incoming/ paths scanned, by path
	reindex sync.Mutex          // one reconciliation at a time in this process
}

// New checks cfg, migrates the database, and makes the data directory's
// folders.
func New(ctx context.Context, cfg Config) (*Service, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	dirs := []string{IncomingDir, ProcessedDir, FailedDir}
	if cfg.Blobs != nil {
		dirs = []string{"."}
	}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(cfg.DataDir, d), 0o755); err != nil {
			return nil, fmt.Errorf("pipeline: %w", err)
		}
	}
	if err := Migrate(ctx, cfg.DB); err != nil {
		return nil, fmt.Errorf("pipeline: migrate: %w", err)
	}
	root, err := os.OpenRoot(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	s := &Service{cfg: cfg, db: dbHandle{cfg.DB}, log: cfg.Logger, seen: map[string]seenFile{}, root: root, blobs: cfg.Blobs}
	if cfg.ID == "" {
		id, lock, err := workerSlot(cfg.DataDir)
		if err != nil {
			host, _ := os.Hostname()
			id = fmt.Sprintf("%s-%d", host, os.Getpid())
			cfg.Logger.Warn("no worker slot in the data directory; the worker id is this process's, which a restart does not keep", "id", id, "err", err)
		}
		s.cfg.ID, s.slot = id, lock
	}
	fail := func(err error) (*Service, error) {
		s.releaseSlot()
		root.Close()
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	ws := weir.NewWorkers()
	extractKind := s.kindConfig(cfg.Extract)
	if b := extractBreaker(cfg.Extractor); b != nil {
		extractKind.Breaker = b
	}
	stages := []error{
		weir.AddWorker(ws, weir.WorkFunc(s.parse), s.kindConfig(cfg.Parse)),
		weir.AddWorker(ws, weir.WorkFunc(s.extract), extractKind),
		weir.AddWorker(ws, weir.WorkFunc(s.save), s.kindConfig(cfg.Save)),
		weir.AddWorker(ws, weir.WorkFunc(s.index), s.kindConfig(cfg.IndexStage)),
		weir.AddWorker(ws, weir.WorkFunc(s.reindexJob), weir.KindConfig{MaxAttempts: 3, Timeout: 6 * time.Hour}),
	}
	if err := errors.Join(stages...); err != nil {
		return fail(err)
	}
	var periodic []weir.PeriodicJob
	if cfg.ReindexSchedule != NoSchedule {
		periodic = []weir.PeriodicJob{{Name: "pipeline.reindex", Schedule: cfg.ReindexSchedule, Args: reindexArgs{Trigger: TriggerSchedule}}}
	}
	s.client, err = weir.NewClient(weir.Config{Store: cfg.DB.Store, Workers: ws, ID: s.cfg.ID,
		Queues:    map[string]weir.QueueConfig{weir.DefaultQueue: {MaxWorkers: cfg.Workers}},
		PollEvery: cfg.PollEvery, Clock: cfg.Clock, Logger: cfg.Logger, Metrics: cfg.Metrics, TracerProvider: cfg.TracerProvider,
		Periodic: periodic,
	})
	if err != nil {
		return fail(err)
	}
	return s, nil
}

// ID is the service's worker id: Config.ID, or the default one New made
// (see Config.ID).
func (s *Service) ID() string { return s.cfg.ID }

// releaseSlot gives up the default worker id's slot.
func (s *Service) releaseSlot() {
	s.slotMu.Lock()
	defer s.slotMu.Unlock()
	if s.slot != nil {
		s.slot.Close()
		s.slot = nil
	}
}

// kindConfig is a stage's policy as the engine takes it.
func (s *Service) kindConfig(st Stage) weir.KindConfig {
	return weir.KindConfig{MaxAttempts: st.MaxAttempts, Backoff: st.Backoff, Timeout: st.Timeout}
}

// Client is the job engine's client, to insert jobs or read them.
func (s *Service) Client() *weir.Client { return s.client }

// Start runs the job engine, the scan of incoming/ every WatchEvery and the
// sweeps every SweepEvery, until Stop. If the index was rebuilt empty (a
// new schema version), it starts a reindex.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("pipeline: already started")
	}
	if err := s.client.Start(ctx); err != nil {
		return err
	}
	s.started = true
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	if r, ok := s.cfg.Index.(interface{ Rebuilt() bool }); ok && r.Rebuilt() {
		s.log.Warn("the search index was recreated for a new schema version; reindexing every document")
		if _, err := s.StartReindex(ctx, TriggerSchemaVersion); err != nil {
			s.log.Error("start the reindex after a schema change", "err", err)
		}
	}
	s.every(loopCtx, s.cfg.WatchEvery, "scan incoming", func(ctx context.Context) error {
		_, err := s.Scan(ctx)
		return err
	})
	s.every(loopCtx, s.cfg.SweepEvery, "sweep", s.Sweep)
	return nil
}

// every runs fn now and then every d until ctx ends, logging its errors.
func (s *Service) every(ctx context.Context, d time.Duration, what string, fn func(context.Context) error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				s.log.Error(what, "err", err)
			}
			if !clock.Sleep(s.cfg.Clock, d, ctx.Done()) {
				return
			}
		}
	}()
}

// Stop stops the scans and the job engine, waiting for running jobs up to
// ctx, then gives up the default worker id's slot (another process may
// take it then). It is safe to call twice.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		s.releaseSlot()
		return nil
	}
	s.started = false
	s.cancel()
	s.wg.Wait()
	err := s.client.Stop(ctx)
	s.releaseSlot()
	return err
}
