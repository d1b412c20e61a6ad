package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/resilience/breaker"
)

// Values of weir_breaker_state. They are ordered by how much of the
// traffic the breaker refuses, so that an alert can say
// weir_breaker_state > 0 for "not closed"; they are not breaker.State's
// numbers, which are an implementation detail of that package.
const (
	BreakerClosed   = 0
	BreakerHalfOpen = 1
	BreakerOpen     = 2
)

// breakerCollector reads circuit breakers at scrape time. It is a checked
// collector with fixed descriptors; Describe sends an invalid descriptor
// when two breakers share a name (their series would collide), so that
// registering it fails with that error.
type breakerCollector struct {
	breakers []*breaker.Breaker
	dupErr   error

	state       *prometheus.Desc
	failures    *prometheus.Desc
	successes   *prometheus.Desc
	consecutive *prometheus.Desc
	rejected    *prometheus.Desc
}

var _ prometheus.Collector = (*breakerCollector)(nil)

// NewBreakerCollector returns a collector that reads each breaker's
// [breaker.Breaker.Snapshot] at scrape time and exports, labelled
// breaker=<the breaker's name>:
//
//	name                                 type   meaning
//	weir_breaker_state                   gauge  0 closed, 1 half-open, 2 open (BreakerClosed, BreakerHalfOpen, BreakerOpen)
//	weir_breaker_failures                gauge  failures counted in the breaker's current period (Counts.Failures)
//	weir_breaker_successes               gauge  successes counted in the breaker's current period (Counts.Successes)
//	weir_breaker_consecutive_failures    gauge  the current run of failures with no success between (Counts.ConsecutiveFailures)
//	weir_breaker_rejected                gauge  calls refused since the breaker opened or became half-open (Counts.Rejected)
//
// The counts are gauges, not counters: a breaker clears them when it
// changes state. Reading a snapshot moves an open breaker whose delay has
// passed to half-open, as [breaker.Breaker.Snapshot] documents.
//
// Nil breakers are left out. Breakers must have distinct names: if two
// share one, registering the collector fails with an error naming it.
func NewBreakerCollector(bs ...*breaker.Breaker) prometheus.Collector {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"breaker"}, nil)
	}
	c := &breakerCollector{
		state: desc("weir_breaker_state", "State of the circuit breaker: 0 closed, 1 half-open, 2 open."),
		failures: desc("weir_breaker_failures",
			"Failures the circuit breaker counts in its current period (cleared when its state changes)."),
		successes: desc("weir_breaker_successes",
			"Successes the circuit breaker counts in its current period (cleared when its state changes)."),
		consecutive: desc("weir_breaker_consecutive_failures",
			"The circuit breaker's current run of failures with no success between them."),
		rejected: desc("weir_breaker_rejected", "Calls the circuit breaker refused since it opened or became half-open."),
	}
	seen := make(map[string]bool)
	for _, b := range bs {
		if b == nil {
			continue
		}
		name := label(b.Name())
		if seen[name] && c.dupErr == nil {
			c.dupErr = fmt.Errorf("metrics: two circuit breakers are named %q", name)
		}
		seen[name] = true
		c.breakers = append(c.breakers, b)
	}
	return c
}

// Describe sends the collector's five descriptors, or an invalid one if
// two breakers share a name.
func (c *breakerCollector) Describe(ch chan<- *prometheus.Desc) {
	if c.dupErr != nil {
		ch <- prometheus.NewInvalidDesc(c.dupErr)
		return
	}
	describe(ch, c.state, c.failures, c.successes, c.consecutive, c.rejected)
}

// Collect sends the five gauges of every breaker.
func (c *breakerCollector) Collect(ch chan<- prometheus.Metric) {
	if c.dupErr != nil {
		ch <- prometheus.NewInvalidMetric(prometheus.NewInvalidDesc(c.dupErr), c.dupErr)
		return
	}
	for _, b := range c.breakers {
		s := b.Snapshot()
		name := label(s.Name)
		gauge(ch, c.state, breakerStateValue(s.State), name)
		gauge(ch, c.failures, float64(s.Counts.Failures), name)
		gauge(ch, c.successes, float64(s.Counts.Successes), name)
		gauge(ch, c.consecutive, float64(s.Counts.ConsecutiveFailures), name)
		gauge(ch, c.rejected, float64(s.Counts.Rejected), name)
	}
}

// breakerStateValue is the value of weir_breaker_state for s. A state this
// package does not know reads as open, the state that asks for attention.
func breakerStateValue(s breaker.State) float64 {
	switch s {
	case breaker.Closed:
		return BreakerClosed
	case breaker.HalfOpen:
		return BreakerHalfOpen
	default:
		return BreakerOpen
	}
}
