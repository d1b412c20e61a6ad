package pipeline

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/metrics"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/schedule"
	"github.com/weirhq/weir/store/appdb"
)

// Stage is the retry policy of one stage.
type Stage struct {
	// MaxAttempts is how many attempts a document gets at the stage
	// before it is dead-lettered. Default 3.
	MaxAttempts int
	// Backoff spaces the attempts. Default: exponential from 5 s, doubling
	// to 5 min, ±20% jitter.
	Backoff backoff.Backoff
	// Timeout bounds one attempt: its context ends then, and an attempt
	// that has not returned is abandoned as failed (a parse that runs out
	// of time fails for good, as poison: it would again). Default per
	// stage: DefaultParseTimeout, DefaultExtractTimeout,
	// DefaultSaveTimeout, DefaultIndexTimeout.
	Timeout time.Duration
}

// Defaults of Config.
const (
	DefaultMaxAttempts = 3
	// The stages' time limits: parse and extract are bounded by the file
	// size limit, save and index are a few statements; an LLM extractor
	// may wait on its endpoint.
	DefaultParseTimeout   = time.Minute
	DefaultExtractTimeout = 2 * time.Minute
	DefaultSaveTimeout    = 30 * time.Second
	DefaultIndexTimeout   = time.Minute
	// DefaultMaxFileSize is the largest file the service reads: 32 MiB.
	DefaultMaxFileSize int64 = 32 << 20

	DefaultWatchEvery      = time.Second
	DefaultSweepEvery      = 5 * time.Second
	DefaultWorkers         = 4
	DefaultReindexSchedule = "daily at 02:00"
	DefaultReindexBatch    = 100
)

// NoSchedule as Config.ReindexSchedule turns the periodic reconciliation
// off (a process that only ingests, say).
const NoSchedule = "never"

// DefaultBackoff is a stage's default backoff.
var DefaultBackoff = backoff.Exponential(5*time.Second, 2, 5*time.Minute)

// Config configures a Service.
type Config struct {
	// DB is the database: weir's store and the service's tables. Required;
	// New migrates it.
	DB *appdb.DB
	// DataDir holds incoming/, processed/ and failed/ (unless Blobs is
	// set) and the worker slots. Required.
	DataDir string
	// Blobs, when set, are the containers that hold incoming/, processed/
	// and failed/ instead of DataDir: all three are required. Default
	// none: the data directory's folders.
	Blobs *Blobs
	// Index is the search index. Required.
	Index Index
	// Extractor extracts each document. Required.
	Extractor Extractor
	// ExtractorName is what the extractor is, for status ("local",
	// "llm"). Default "local".
	ExtractorName string
	// ID is this process's worker id: a process restarted with the id of
	// a run that died takes back at once the jobs that run left running,
	// instead of waiting for their leases (a minute) to expire. Keep it
	// stable across restarts, and unique among the processes sharing the
	// store. Default: "{hostname}-{hash}-{slot}", stable for a data
	// directory on one host: hash is 8 hex digits of SHA-256 of the data
	// directory's absolute path, slot the lowest number free among the
	// processes running on that directory, held by a file lock in
	// DataDir/workers/ until Stop (see Service.ID).
	ID string
	// Workers is how many jobs run at once. Default 4.
	Workers int
	// Parse, Extract, Save and Index are the stages' policies; zero fields
	// take Stage's defaults.
	Parse, Extract, Save, IndexStage Stage
	// WatchEvery is how often incoming/ is scanned. Default 1 s.
	WatchEvery time.Duration
	// SweepEvery is how often dead-lettered documents are written to
	// failed/ and files left in incoming/ are moved. Default 5 s.
	SweepEvery time.Duration
	// ReindexSchedule is when reconciliation runs by itself (see
	// schedule.Parse), or NoSchedule. Default "daily at 02:00".
	ReindexSchedule string
	// ReindexBatch is the batch size of reconciliation. Default 100.
	ReindexBatch int
	// EventsTopic, when set, is the broker topic of the service's events:
	// each saved or failed document adds an Event to the outbox in its
	// transaction, for a relay to publish. Default none: no events.
	EventsTopic string
	// MaxFileSize is the size of the largest file the service reads, in
	// bytes: a larger file fails at once, as poison, with its size and
	// the limit as its reason, without being read into memory (it is
	// read a block at a time for its ETag). Default 32 MiB
	// (DefaultMaxFileSize).
	MaxFileSize int64
	// PollEvery is the job engine's poll interval. Default 200 ms.
	PollEvery time.Duration
	// Clock and Logger. Defaults clock.Real and slog.Default().
	Clock  clock.Clock
	Logger *slog.Logger
	// Metrics, when set, receives the job engine's metrics.
	Metrics *metrics.Metrics
	// TracerProvider, when set, makes a span of each stage's attempt.
	TracerProvider trace.TracerProvider
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.DB == nil:
		return c, errors.New("pipeline: Config.DB is required")
	case c.DataDir == "":
		return c, errors.New("pipeline: Config.DataDir is required")
	case c.Index == nil:
		return c, errors.New("pipeline: Config.Index is required")
	case c.Extractor == nil:
		return c, errors.New("pipeline: Config.Extractor is required")
	case c.Blobs != nil && (c.Blobs.Incoming == nil || c.Blobs.Processed == nil || c.Blobs.Failed == nil):
		return c, errors.New("pipeline: Config.Blobs: Incoming, Processed and Failed are all required")
	case c.Workers < 0, c.WatchEvery < 0, c.SweepEvery < 0, c.ReindexBatch < 0, c.PollEvery < 0, c.MaxFileSize < 0:
		return c, errors.New("pipeline: Config: Workers, WatchEvery, SweepEvery, ReindexBatch, PollEvery and MaxFileSize must not be negative")
	}
	if c.ExtractorName == "" {
		c.ExtractorName = "local"
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Workers, DefaultWorkers)
	def(&c.ReindexBatch, DefaultReindexBatch)
	defd(&c.WatchEvery, DefaultWatchEvery)
	defd(&c.SweepEvery, DefaultSweepEvery)
	defd(&c.PollEvery, 200*time.Millisecond)
	if c.MaxFileSize == 0 {
		c.MaxFileSize = DefaultMaxFileSize
	}
	if c.ReindexSchedule == "" {
		c.ReindexSchedule = DefaultReindexSchedule
	}
	if c.ReindexSchedule == NoSchedule {
		// No periodic reconciliation.
	} else if _, err := schedule.Parse(c.ReindexSchedule); err != nil {
		return c, fmt.Errorf("pipeline: Config.ReindexSchedule: %w", err)
	}
	for _, st := range []struct {
		*Stage
		timeout time.Duration
	}{{&c.Parse, DefaultParseTimeout}, {&c.Extract, DefaultExtractTimeout}, {&c.Save, DefaultSaveTimeout}, {&c.IndexStage, DefaultIndexTimeout}} {
		if st.MaxAttempts < 0 || st.Timeout < 0 {
			return c, errors.New("pipeline: a stage's MaxAttempts and Timeout must not be negative")
		}
		def(&st.MaxAttempts, DefaultMaxAttempts)
		defd(&st.Timeout, st.timeout)
		if st.Backoff == (backoff.Backoff{}) {
			st.Backoff = DefaultBackoff
		}
		if err := st.Backoff.Validate(); err != nil {
			return c, fmt.Errorf("pipeline: a stage's backoff: %w", err)
		}
	}
	if c.Clock == nil {
		c.Clock = clock.Real
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
