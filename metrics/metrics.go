package metrics

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// defaultScrapeTimeout bounds the scrape-time query when
// Options.ScrapeTimeout is zero.
const defaultScrapeTimeout = 5 * time.Second

// Options configures [New]. The zero value works: it registers the hook
// metrics and no scrape-time collector.
type Options struct {
	// Store, when set, adds the collectors that read job counts and
	// pauses at scrape time (weir_jobs, retry_job_stuck_documents,
	// retry_job_failed_documents, weir_paused, weir_paused_since_seconds).
	// Nil: no such collector.
	Store store.Store
	// StuckAfter is how long a job may go before it counts as stuck: a
	// running job whose attempt started, or a waiting job that was due,
	// longer ago than this (one threshold for every kind; per-kind
	// thresholds apply to the sweep, not the gauge). Default
	// store.DefaultStuckAfter (10 minutes); negative is an error.
	StuckAfter time.Duration
	// Clock tells the time used for the stuck threshold. Default
	// clock.Real.
	Clock clock.Clock
	// ScrapeTimeout bounds how long a scrape waits for the store's job
	// count and its other scrape-time queries. A job count that takes
	// longer goes on for the next scrape, this one serving the counts
	// before it (see the package documentation, Counts). Default 5
	// seconds; negative is an error.
	ScrapeTimeout time.Duration
}

// Outcome is how one attempt of a job ended, as [Metrics.AttemptDone]
// records it: weirtype's, so that the engine reports it without importing
// this package. The strings are stable: they are metric label values.
type Outcome = weirtype.AttemptOutcome

// The outcomes of an attempt.
const (
	// Completed: the handler succeeded and the job completed.
	Completed = weirtype.AttemptCompleted
	// Failed: the handler failed; the job is retried or abandoned.
	Failed = weirtype.AttemptFailed
	// Snoozed: the handler asked to run the job again later.
	Snoozed = weirtype.AttemptSnoozed
	// Late: the handler succeeded after the job's deadline had abandoned
	// it; a late result was stored.
	Late = weirtype.AttemptLate
	// LeaseLost: the worker lost the job's lease before it finished, so
	// its result was not recorded.
	LeaseLost = weirtype.AttemptLeaseLost
)

// Error types of retry_job_errors_total.
const (
	errorTimeout   = "timeout"
	errorCancelled = "cancelled"
	errorStore     = "store"
)

// attemptBuckets are the bounds, in seconds, of the attempt and sweep
// duration histograms: 5 ms to 10 minutes.
var attemptBuckets = []float64{
	0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1, 2.5, 5, 10, 30, 60, 120, 300, 600,
}

// Metrics holds weir's Prometheus collectors. The engine calls its hooks
// (it is a weir.Metrics, which Config.Metrics takes); every hook is cheap,
// safe for concurrent use, and a no-op on a nil *Metrics.
type Metrics struct {
	enqueued        *prometheus.CounterVec
	attemptDuration *prometheus.HistogramVec
	completed       *prometheus.CounterVec
	failed          *prometheus.CounterVec
	late            *prometheus.CounterVec
	deadLettered    *prometheus.CounterVec
	rescued         prometheus.Counter
	deleted         *prometheus.CounterVec

	requeued           *prometheus.CounterVec
	skippedBackoff     *prometheus.CounterVec
	maxRetriesExceeded *prometheus.CounterVec
	runs               *prometheus.CounterVec
	sweepDuration      prometheus.Histogram
	sweepErrors        *prometheus.CounterVec
}

// New makes weir's collectors and registers them on reg, which must not be
// nil (weir never uses the global default registry). With opts.Store set it
// also registers the scrape-time collector of job counts. If a
// registration fails (a collector registered twice, or a name another
// collector holds), New unregisters what it registered and returns an error
// naming the collector, wrapping the registry's error (errors.As finds a
// prometheus.AlreadyRegisteredError).
func New(reg prometheus.Registerer, opts Options) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("metrics: registerer is nil")
	}
	if opts.StuckAfter < 0 {
		return nil, fmt.Errorf("metrics: stuck-after %v is negative", opts.StuckAfter)
	}
	if opts.ScrapeTimeout < 0 {
		return nil, fmt.Errorf("metrics: scrape timeout %v is negative", opts.ScrapeTimeout)
	}
	if opts.StuckAfter == 0 {
		opts.StuckAfter = store.DefaultStuckAfter
	}
	if opts.ScrapeTimeout == 0 {
		opts.ScrapeTimeout = defaultScrapeTimeout
	}
	opts.Clock = clock.Or(opts.Clock)

	kindQueue := []string{"kind", "queue"}
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m := &Metrics{
		enqueued: counterVec("weir_jobs_enqueued_total",
			"Inserts of jobs, by what the insert did (inserted, reclaimed, or a duplicate outcome).", "kind", "queue", "outcome"),
		attemptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "weir_job_attempt_duration_seconds",
			Help:    "Duration of job attempts, from the handler's start to its end, by outcome.",
			Buckets: attemptBuckets,
		}, []string{"kind", "queue", "outcome"}),
		completed: counterVec("weir_jobs_completed_total",
			"Attempts that succeeded and completed their job.", kindQueue...),
		failed: counterVec("weir_jobs_failed_total",
			"Attempts that failed (the job is retried or abandoned).", kindQueue...),
		late: counterVec("weir_jobs_late_total",
			"Attempts that succeeded after their job's deadline had abandoned it.", kindQueue...),
		deadLettered: counterVec("weir_jobs_dead_lettered_total",
			"Jobs abandoned to the dead-letter store, by reason.", "kind", "queue", "reason"),
		rescued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_jobs_rescued_total",
			Help: "Running jobs whose lease expired and that were taken back.",
		}),
		deleted: counterVec("weir_jobs_deleted_total",
			"Completed and cancelled jobs deleted by the retention sweep past their retention.", "kind"),
		requeued: counterVec("retry_job_documents_requeued_total",
			"Total documents requeued for retry.", "collection"),
		skippedBackoff: counterVec("retry_job_documents_skipped_backoff_total",
			"Documents skipped due to backoff delay.", "collection"),
		maxRetriesExceeded: counterVec("retry_job_documents_max_retries_exceeded_total",
			"Documents exceeding max retry attempts.", "collection"),
		runs: counterVec("retry_job_runs_total",
			"Retry job executions (status: success/failure).", "status"),
		sweepDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "retry_job_duration_seconds",
			Help:    "Time taken to complete retry job.",
			Buckets: attemptBuckets,
		}),
		sweepErrors: counterVec("retry_job_errors_total",
			"Errors encountered during retry job, by type (timeout, cancelled, store).", "error_type"),
	}
	// Series with a small fixed set of label values start at zero, so
	// that rate() and alerts see them before the first event.
	for _, s := range []string{"success", "failure"} {
		m.runs.WithLabelValues(s)
	}
	for _, t := range []string{errorTimeout, errorCancelled, errorStore} {
		m.sweepErrors.WithLabelValues(t)
	}

	collectors := []namedCollector{
		{"weir_jobs_enqueued_total", m.enqueued},
		{"weir_job_attempt_duration_seconds", m.attemptDuration},
		{"weir_jobs_completed_total", m.completed},
		{"weir_jobs_failed_total", m.failed},
		{"weir_jobs_late_total", m.late},
		{"weir_jobs_dead_lettered_total", m.deadLettered},
		{"weir_jobs_rescued_total", m.rescued},
		{"weir_jobs_deleted_total", m.deleted},
		{"retry_job_documents_requeued_total", m.requeued},
		{"retry_job_documents_skipped_backoff_total", m.skippedBackoff},
		{"retry_job_documents_max_retries_exceeded_total", m.maxRetriesExceeded},
		{"retry_job_runs_total", m.runs},
		{"retry_job_duration_seconds", m.sweepDuration},
		{"retry_job_errors_total", m.sweepErrors},
	}
	if opts.Store != nil {
		collectors = append(collectors, namedCollector{
			"store collector (weir_jobs, retry_job_stuck_documents, retry_job_failed_documents)",
			newStoreCollector(opts.Store.Executor(), opts.Clock, opts.StuckAfter, opts.ScrapeTimeout),
		}, namedCollector{
			"pause collector (weir_paused, weir_paused_since_seconds)",
			newPauseCollector(opts.Store.Executor(), opts.Clock, opts.ScrapeTimeout),
		}, namedCollector{
			"limit collector (weir_limit_running, weir_limit_max_running, weir_limit_window_starts)",
			newLimitCollector(opts.Store.Executor(), opts.ScrapeTimeout),
		})
	}
	for i, c := range collectors {
		if err := reg.Register(c.c); err != nil {
			for _, done := range collectors[:i] {
				reg.Unregister(done.c)
			}
			return nil, fmt.Errorf("metrics: register %s: %w", c.name, err)
		}
	}
	return m, nil
}

// namedCollector is a collector New registers, with the name its
// registration error gives.
type namedCollector struct {
	name string
	c    prometheus.Collector
}

// Enqueued records one insert of a job of kind into queue, and what it did:
// weir_jobs_enqueued_total{kind,queue,outcome}.
func (m *Metrics) Enqueued(kind, queue string, outcome weirtype.InsertOutcome) {
	if m == nil {
		return
	}
	m.enqueued.WithLabelValues(label(kind), label(queue), label(string(outcome))).Inc()
}

// AttemptDone records one attempt of a job of kind in queue that ended with
// outcome after d: weir_job_attempt_duration_seconds{kind,queue,outcome},
// and weir_jobs_completed_total, weir_jobs_failed_total or
// weir_jobs_late_total{kind,queue} for the outcomes Completed, Failed and
// Late. A negative d is recorded as zero.
func (m *Metrics) AttemptDone(kind, queue string, outcome Outcome, d time.Duration) {
	if m == nil {
		return
	}
	kind, queue = label(kind), label(queue)
	m.attemptDuration.WithLabelValues(kind, queue, label(string(outcome))).Observe(max(d, 0).Seconds())
	switch outcome {
	case Completed:
		m.completed.WithLabelValues(kind, queue).Inc()
	case Failed:
		m.failed.WithLabelValues(kind, queue).Inc()
	case Late:
		m.late.WithLabelValues(kind, queue).Inc()
	}
}

// DeadLettered records one job of kind in queue abandoned to the
// dead-letter store for reason: weir_jobs_dead_lettered_total{kind,queue,reason}.
func (m *Metrics) DeadLettered(kind, queue string, reason weirtype.AbandonReason) {
	if m == nil {
		return
	}
	m.deadLettered.WithLabelValues(label(kind), label(queue), label(string(reason))).Inc()
}

// Rescued records n running jobs whose lease expired and that were taken
// back: weir_jobs_rescued_total. An n of zero or less records nothing.
func (m *Metrics) Rescued(n int) {
	if m == nil || n <= 0 {
		return
	}
	m.rescued.Add(float64(n))
}

// JobsDeleted records n completed or cancelled jobs of kind deleted by the
// retention sweep: weir_jobs_deleted_total{kind}. An n of zero or less
// records nothing.
func (m *Metrics) JobsDeleted(kind string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.deleted.WithLabelValues(label(kind)).Add(float64(n))
}

// Swept records what one stuck sweep did with the jobs of kind (the spec's
// collection): retry_job_documents_requeued_total,
// retry_job_documents_skipped_backoff_total and
// retry_job_documents_max_retries_exceeded_total{collection}. Zeros are
// added too, so that the series exist from the first sweep; negative
// counts are recorded as zero.
func (m *Metrics) Swept(kind string, requeued, skippedBackoff, maxRetriesExceeded int) {
	if m == nil {
		return
	}
	kind = label(kind)
	m.requeued.WithLabelValues(kind).Add(float64(max(requeued, 0)))
	m.skippedBackoff.WithLabelValues(kind).Add(float64(max(skippedBackoff, 0)))
	m.maxRetriesExceeded.WithLabelValues(kind).Add(float64(max(maxRetriesExceeded, 0)))
}

// SweepRun records one run of the stuck sweep that took d and ended with
// err: retry_job_runs_total{status} (success when err is nil, failure
// otherwise), retry_job_duration_seconds, and on error
// retry_job_errors_total{error_type}, where error_type is "timeout" for an
// error wrapping context.DeadlineExceeded, "cancelled" for one wrapping
// context.Canceled, and "store" for any other.
func (m *Metrics) SweepRun(d time.Duration, err error) {
	if m == nil {
		return
	}
	m.sweepDuration.Observe(max(d, 0).Seconds())
	if err == nil {
		m.runs.WithLabelValues("success").Inc()
		return
	}
	m.runs.WithLabelValues("failure").Inc()
	m.sweepErrors.WithLabelValues(errorType(err)).Inc()
}

// label returns s made valid UTF-8, as Prometheus requires of label values
// (WithLabelValues panics otherwise): a hook must not panic on a kind or
// queue that is not valid UTF-8.
func label(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// errorType classifies a sweep's error for retry_job_errors_total.
func errorType(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return errorTimeout
	case errors.Is(err, context.Canceled):
		return errorCancelled
	default:
		return errorStore
	}
}
