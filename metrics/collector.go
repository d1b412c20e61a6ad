package metrics

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// storeCollector reads job counts from the store at scrape time. It is a
// checked collector: its three descriptors are fixed (only label values
// vary), so the registry can refuse a second collector of the same names.
//
// On a query error it sends one invalid metric carrying the error, so that
// the registry's Gather, and so the scrape, fails visibly instead of
// reporting zeros. The error is not also counted in
// retry_job_errors_total: that counter is the stuck sweep's, and an alert
// on sweep errors should not fire because monitoring could not read the
// store; a failed scrape is already visible as such (up == 0 with the
// default promhttp handler, or the gauges absent with ContinueOnError).
//
// The counts come from a jobCounter: a count that takes long (a table
// that keeps many finished jobs) is run again only after twenty times its
// duration, the scrapes between serving its counts, and one that outlasts
// the scrape goes on for the next.
type storeCollector struct {
	counter *jobCounter
	timeout time.Duration

	jobs   *prometheus.Desc
	stuck  *prometheus.Desc
	failed *prometheus.Desc
}

var _ prometheus.Collector = (*storeCollector)(nil)

func newStoreCollector(s store.Sweep, c clock.Clock, stuckAfter, timeout time.Duration) *storeCollector {
	count := func(ctx context.Context) ([]store.JobCount, error) {
		return s.CountJobs(ctx, c.Now().Add(-stuckAfter))
	}
	return &storeCollector{
		counter: newJobCounter(count, timeout),
		timeout: timeout,
		jobs: prometheus.NewDesc("weir_jobs",
			"Jobs by queue, kind and state, read from the store at scrape time (queue depth).",
			[]string{"queue", "kind", "state"}, nil),
		stuck: prometheus.NewDesc("retry_job_stuck_documents",
			"Current count of stuck documents: jobs of the collection (kind) running, or due and waiting, for longer than the stuck threshold.",
			[]string{"collection"}, nil),
		failed: prometheus.NewDesc("retry_job_failed_documents",
			"Current count of failed documents (max retries): jobs of the collection (kind) in state dead.",
			[]string{"collection"}, nil),
	}
}

// Describe sends the collector's three descriptors.
func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, c.jobs, c.stuck, c.failed)
}

type groupKey struct {
	queue, kind string
	state       weirtype.State
}

type pairKey struct{ queue, kind string }

type kindTotals struct{ stuck, dead int }

// Collect reads the store's job counts (waiting for a count at most the
// scrape timeout; see jobCounter) and sends weir_jobs for every state of
// each queue and kind the store reports (zeros included, so that a
// drained queue reads 0 rather than vanishing), and
// retry_job_stuck_documents and retry_job_failed_documents for each kind.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	counts, err := c.counter.get(c.timeout)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.jobs, fmt.Errorf("metrics: count jobs: %w", err))
		return
	}

	groups := make(map[groupKey]int)
	kinds := make(map[string]*kindTotals)
	for _, jc := range counts {
		kind := label(jc.Kind)
		groups[groupKey{label(jc.Queue), kind, weirtype.State(label(string(jc.State)))}] += jc.Count
		k := kinds[kind]
		if k == nil {
			k = &kindTotals{}
			kinds[kind] = k
		}
		k.stuck += jc.Stuck
		if jc.State == weirtype.StateDead {
			k.dead += jc.Count
		}
	}
	pairs := make(map[pairKey]bool)
	for g := range groups {
		pairs[pairKey{g.queue, g.kind}] = true
	}
	for p := range pairs {
		for _, s := range weirtype.States() {
			g := groupKey{p.queue, p.kind, s}
			if _, ok := groups[g]; !ok {
				groups[g] = 0
			}
		}
	}

	for g, n := range groups {
		gauge(ch, c.jobs, float64(n), g.queue, g.kind, string(g.state))
	}
	for kind, t := range kinds {
		gauge(ch, c.stuck, float64(t.stuck), kind)
		gauge(ch, c.failed, float64(t.dead), kind)
	}
}

// pauseCollector reads the pauses from the store at scrape time:
// weir_paused is 1 for each queue, or kind within a queue, that a pause
// holds, by cause, and weir_paused_since_seconds is when that pause began
// (Unix time). A queue or kind not paused has no series. A read error
// fails the scrape, as the job counts' does.
type pauseCollector struct {
	store   store.Pauses
	clock   clock.Clock
	timeout time.Duration

	paused *prometheus.Desc
	since  *prometheus.Desc
}

var _ prometheus.Collector = (*pauseCollector)(nil)

func newPauseCollector(s store.Pauses, c clock.Clock, timeout time.Duration) *pauseCollector {
	labels := []string{"queue", "kind", "cause"}
	return &pauseCollector{
		store: s, clock: c, timeout: timeout,
		paused: prometheus.NewDesc("weir_paused",
			"1 for each queue, or kind within a queue (kind empty: the whole queue), whose jobs are not claimed, by what holds it: operator, breaker or retry_after.",
			labels, nil),
		since: prometheus.NewDesc("weir_paused_since_seconds",
			"When the pause of a queue or kind began, as Unix time.",
			labels, nil),
	}
}

// Describe sends the collector's two descriptors.
func (c *pauseCollector) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, c.paused, c.since)
}

// Collect lists the pauses that hold now and sends their series.
func (c *pauseCollector) Collect(ch chan<- prometheus.Metric) {
	ps, ok := readAtScrape(ch, c.paused, c.timeout, "list pauses", func(ctx context.Context) ([]*weirtype.Pause, error) {
		return c.store.ListPauses(ctx, c.clock.Now())
	})
	if !ok {
		return
	}
	for _, p := range ps {
		l := []string{label(p.Queue), label(p.Kind), label(string(p.Cause))}
		gauge(ch, c.paused, 1, l...)
		gauge(ch, c.since, float64(p.PausedAt.UnixMilli())/1000, l...)
	}
}

// limitCollector reads the limits across processes from the store at
// scrape time: weir_limit_running is how many attempts of a limit's kinds
// run, weir_limit_max_running its MaxRunning (no series without one), and
// weir_limit_window_starts the starts counted in its rate's window (no
// series without a rate). A read error fails the scrape, as the job
// counts' does.
type limitCollector struct {
	store   store.Limits
	timeout time.Duration

	running, max, starts *prometheus.Desc
}

var _ prometheus.Collector = (*limitCollector)(nil)

func newLimitCollector(s store.Limits, timeout time.Duration) *limitCollector {
	labels := []string{"key"}
	return &limitCollector{
		store: s, timeout: timeout,
		running: prometheus.NewDesc("weir_limit_running",
			"Attempts of the kinds of a limit across processes (KindConfig.MaxRunning, Rate) running now, by the limit's key.",
			labels, nil),
		max: prometheus.NewDesc("weir_limit_max_running",
			"The most attempts of a limit's kinds that may run at once across every process.",
			labels, nil),
		starts: prometheus.NewDesc("weir_limit_window_starts",
			"Attempts of a limit's kinds started in the rate window last counted.",
			labels, nil),
	}
}

// Describe sends the collector's descriptors.
func (c *limitCollector) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, c.running, c.max, c.starts)
}

// Collect lists the limits and sends their series.
func (c *limitCollector) Collect(ch chan<- prometheus.Metric) {
	ls, ok := readAtScrape(ch, c.running, c.timeout, "list limits", c.store.ListLimits)
	if !ok {
		return
	}
	for _, l := range ls {
		key := label(l.Key)
		gauge(ch, c.running, float64(l.Running), key)
		if l.MaxRunning > 0 {
			gauge(ch, c.max, float64(l.MaxRunning), key)
		}
		if l.Rate > 0 {
			gauge(ch, c.starts, float64(l.WindowStarts), key)
		}
	}
}

// readAtScrape calls read with a context bounded by the scrape timeout. On
// an error it sends one invalid metric of desc carrying the error, named by
// what, so that the scrape fails visibly instead of reporting nothing, and
// reports false.
func readAtScrape[T any](ch chan<- prometheus.Metric, desc *prometheus.Desc, timeout time.Duration, what string,
	read func(context.Context) (T, error)) (T, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	v, err := read(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(desc, fmt.Errorf("metrics: %s: %w", what, err))
		return v, false
	}
	return v, true
}

// describe sends descs, a collector's fixed descriptors.
func describe(ch chan<- *prometheus.Desc, descs ...*prometheus.Desc) {
	for _, d := range descs {
		ch <- d
	}
}

// gauge sends one gauge of desc. The collectors' label values are valid
// UTF-8 (see label) and their number fixed, so MustNewConstMetric cannot
// panic here.
func gauge(ch chan<- prometheus.Metric, desc *prometheus.Desc, v float64, labelValues ...string) {
	ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labelValues...)
}
