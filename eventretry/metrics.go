package eventretry

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the event retry's Prometheus collectors:
//
//	event_retry_success_total{service,attempt}  counter    events handled, by the attempt that succeeded
//	event_retry_latency_seconds{service}         histogram  from the first attempt to success or dead letter
//	event_retry_dlq_total{service,reason}        counter    events sent to the dead-letter function, by reason
//	event_retry_attempt_count{service}           histogram  attempts per event, successful or not
//
// Its methods are safe on a nil *Metrics (they do nothing) and for
// concurrent use.
type Metrics struct {
	success  *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	dlq      *prometheus.CounterVec
	attempts *prometheus.HistogramVec
}

// NewMetrics makes the collectors and registers them on reg (never the
// global registry unless the caller passes it).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, fmt.Errorf("eventretry: NewMetrics: the registerer is nil")
	}
	m := &Metrics{
		success: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "event_retry_success_total",
			Help: "Events handled successfully, by the attempt that succeeded.",
		}, []string{"service", "attempt"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "event_retry_latency_seconds",
			Help:    "Time from an event's first attempt to its success or dead letter.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 12), // 1 ms to about 70 min
		}, []string{"service"}),
		dlq: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "event_retry_dlq_total",
			Help: "Events sent to the dead-letter store, by reason.",
		}, []string{"service", "reason"}),
		attempts: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "event_retry_attempt_count",
			Help:    "Attempts per event, successful or not.",
			Buckets: []float64{1, 2, 3, 4, 5, 6, 8, 10, 15, 20},
		}, []string{"service"}),
	}
	for name, c := range map[string]prometheus.Collector{
		"event_retry_success_total": m.success, "event_retry_latency_seconds": m.latency,
		"event_retry_dlq_total": m.dlq, "event_retry_attempt_count": m.attempts,
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("eventretry: register %s: %w", name, err)
		}
	}
	return m, nil
}

func (m *Metrics) observeSuccess(service string, attempt int, d time.Duration) {
	if m == nil {
		return
	}
	m.success.WithLabelValues(service, strconv.Itoa(attempt)).Inc()
	m.latency.WithLabelValues(service).Observe(d.Seconds())
	m.attempts.WithLabelValues(service).Observe(float64(attempt))
}

func (m *Metrics) observeDeadLetter(service, reason string, attempts int, d time.Duration) {
	if m == nil {
		return
	}
	m.dlq.WithLabelValues(service, reason).Inc()
	m.latency.WithLabelValues(service).Observe(d.Seconds())
	m.attempts.WithLabelValues(service).Observe(float64(attempts))
}
