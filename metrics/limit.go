package metrics

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/store"
)

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
	ch <- c.running
	ch <- c.max
	ch <- c.starts
}

// Collect lists the limits and sends their series.
func (c *limitCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	ls, err := c.store.ListLimits(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.running, fmt.Errorf("metrics: list limits: %w", err))
		return
	}
	for _, l := range ls {
		key := label(l.Key)
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(l.Running), key)
		if l.MaxRunning > 0 {
			ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(l.MaxRunning), key)
		}
		if l.Rate > 0 {
			ch <- prometheus.MustNewConstMetric(c.starts, prometheus.GaugeValue, float64(l.WindowStarts), key)
		}
	}
}
