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
type storeCollector struct {
	store      store.Sweep
	clock      clock.Clock
	stuckAfter time.Duration
	timeout    time.Duration

	jobs   *prometheus.Desc
	stuck  *prometheus.Desc
	failed *prometheus.Desc
}

var _ prometheus.Collector = (*storeCollector)(nil)

func newStoreCollector(s store.Sweep, c clock.Clock, stuckAfter, timeout time.Duration) *storeCollector {
	return &storeCollector{
		store:      s,
		clock:      c,
		stuckAfter: stuckAfter,
		timeout:    timeout,
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
	ch <- c.jobs
	ch <- c.stuck
	ch <- c.failed
}

type groupKey struct {
	queue, kind string
	state       weirtype.State
}

type pairKey struct{ queue, kind string }

type kindTotals struct{ stuck, dead int }

// Collect queries the store's job counts, bounded by the scrape timeout,
// and sends weir_jobs for every state of each queue and kind the store
// reports (zeros included, so that a drained queue reads 0 rather than
// vanishing), and retry_job_stuck_documents and retry_job_failed_documents
// for each kind.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	counts, err := c.store.CountJobs(ctx, c.clock.Now().Add(-c.stuckAfter))
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

	// Label values are valid UTF-8 and their number fixed, so
	// MustNewConstMetric cannot panic here.
	for g, n := range groups {
		ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(n), g.queue, g.kind, string(g.state))
	}
	for kind, t := range kinds {
		ch <- prometheus.MustNewConstMetric(c.stuck, prometheus.GaugeValue, float64(t.stuck), kind)
		ch <- prometheus.MustNewConstMetric(c.failed, prometheus.GaugeValue, float64(t.dead), kind)
	}
}
