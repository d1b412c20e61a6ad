package metrics

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/store"
)

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
	ch <- c.paused
	ch <- c.since
}

// Collect lists the pauses that hold now and sends their series.
func (c *pauseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	ps, err := c.store.ListPauses(ctx, c.clock.Now())
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.paused, fmt.Errorf("metrics: list pauses: %w", err))
		return
	}
	for _, p := range ps {
		l := []string{label(p.Queue), label(p.Kind), label(string(p.Cause))}
		ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, 1, l...)
		ch <- prometheus.MustNewConstMetric(c.since, prometheus.GaugeValue, float64(p.PausedAt.UnixMilli())/1000, l...)
	}
}
