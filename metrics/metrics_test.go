package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/metrics"
	"github.com/weirhq/weir/weirtype"
)

func newMetrics(t testing.TB, opts metrics.Options) (*metrics.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.New(reg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, reg
}

// series is one gathered sample: a counter's or gauge's value, or a
// histogram's sample count and sum.
type series struct {
	value float64
	count uint64
	sum   float64
}

// gather returns the samples of the metric name, keyed by their labels
// written as k=v pairs joined by commas in the registry's order (sorted by
// name), "" for none.
func gather(t *testing.T, reg prometheus.Gatherer, name string) map[string]series {
	t.Helper()
	return gatherSeries(t, reg, name, false)
}

// gatherSeries is gather; with partial, it takes what Gather returned
// despite an error (the registry still returns what it could collect).
func gatherSeries(t *testing.T, reg prometheus.Gatherer, name string, partial bool) map[string]series {
	t.Helper()
	families, err := reg.Gather()
	if err != nil && !partial {
		t.Fatalf("Gather: %v", err)
	}
	out := make(map[string]series)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			var s series
			switch {
			case m.Counter != nil:
				s.value = m.GetCounter().GetValue()
			case m.Gauge != nil:
				s.value = m.GetGauge().GetValue()
			case m.Histogram != nil:
				s.count = m.GetHistogram().GetSampleCount()
				s.sum = m.GetHistogram().GetSampleSum()
			}
			out[strings.Join(ls, ",")] = s
		}
	}
	return out
}

func wantSeries(t *testing.T, reg prometheus.Gatherer, name string, want map[string]series) {
	t.Helper()
	compareSeries(t, name, gather(t, reg, name), want)
}

func compareSeries(t *testing.T, name string, got, want map[string]series) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: got series %v, want %v", name, got, want)
		return
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s{%s} = %+v (present %v), want %+v", name, k, g, ok, w)
		}
	}
}

func TestEnqueued(t *testing.T) {
	m, reg := newMetrics(t, metrics.Options{})
	m.Enqueued("extract", "default", weirtype.Inserted)
	m.Enqueued("extract", "default", weirtype.Inserted)
	m.Enqueued("extract", "bulk", weirtype.DuplicatePending)
	m.Enqueued("embed", "default", weirtype.Reclaimed)
	wantSeries(t, reg, "weir_jobs_enqueued_total", map[string]series{
		"kind=extract,outcome=inserted,queue=default":       {value: 2},
		"kind=extract,outcome=duplicate_pending,queue=bulk": {value: 1},
		"kind=embed,outcome=reclaimed,queue=default":        {value: 1},
	})
}

func TestAttemptDone(t *testing.T) {
	m, reg := newMetrics(t, metrics.Options{})
	m.AttemptDone("extract", "default", metrics.Completed, 250*time.Millisecond)
	m.AttemptDone("extract", "default", metrics.Completed, 750*time.Millisecond)
	m.AttemptDone("extract", "default", metrics.Failed, 2*time.Second)
	m.AttemptDone("extract", "default", metrics.Late, 3*time.Second)
	m.AttemptDone("extract", "default", metrics.Snoozed, time.Second)
	m.AttemptDone("embed", "gpu", metrics.LeaseLost, 4*time.Second)
	m.AttemptDone("embed", "gpu", metrics.Completed, -time.Second) // clock went back

	wantSeries(t, reg, "weir_job_attempt_duration_seconds", map[string]series{
		"kind=extract,outcome=completed,queue=default": {count: 2, sum: 1},
		"kind=extract,outcome=failed,queue=default":    {count: 1, sum: 2},
		"kind=extract,outcome=late,queue=default":      {count: 1, sum: 3},
		"kind=extract,outcome=snoozed,queue=default":   {count: 1, sum: 1},
		"kind=embed,outcome=lease_lost,queue=gpu":      {count: 1, sum: 4},
		"kind=embed,outcome=completed,queue=gpu":       {count: 1, sum: 0},
	})
	wantSeries(t, reg, "weir_jobs_completed_total", map[string]series{
		"kind=extract,queue=default": {value: 2},
		"kind=embed,queue=gpu":       {value: 1},
	})
	wantSeries(t, reg, "weir_jobs_failed_total", map[string]series{
		"kind=extract,queue=default": {value: 1},
	})
	wantSeries(t, reg, "weir_jobs_late_total", map[string]series{
		"kind=extract,queue=default": {value: 1},
	})
}

func TestAttemptDurationBuckets(t *testing.T) {
	m, reg := newMetrics(t, metrics.Options{})
	m.AttemptDone("extract", "default", metrics.Completed, time.Millisecond)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "weir_job_attempt_duration_seconds" {
			continue
		}
		b := f.GetMetric()[0].GetHistogram().GetBucket()
		if lo, hi := b[0].GetUpperBound(), b[len(b)-1].GetUpperBound(); lo != 0.005 || hi != 600 {
			t.Errorf("buckets from %v to %v, want 0.005 to 600", lo, hi)
		}
		return
	}
	t.Fatal("weir_job_attempt_duration_seconds not gathered")
}

func TestDeadLettered(t *testing.T) {
	m, reg := newMetrics(t, metrics.Options{})
	m.DeadLettered("extract", "default", weirtype.AbandonMaxAttempts)
	m.DeadLettered("extract", "default", weirtype.AbandonPermanent)
	m.DeadLettered("extract", "default", weirtype.AbandonPermanent)
	wantSeries(t, reg, "weir_jobs_dead_lettered_total", map[string]series{
		"kind=extract,queue=default,reason=max_attempts_exceeded": {value: 1},
		"kind=extract,queue=default,reason=non_retryable":         {value: 2},
	})
}

func TestRescued(t *testing.T) {
	m, reg := newMetrics(t, metrics.Options{})
	m.Rescued(3)
	m.Rescued(0)
	m.Rescued(-2) // ignored: a counter only goes up
	m.Rescued(1)
	wantSeries(t, reg, "weir_jobs_rescued_total", map[string]series{"": {value: 4}})
}

func TestSwept(t *testing.T) {
	m, reg := newMetrics(t, metrics.Options{})
	m.Swept("extract", 2, 1, 0)
	m.Swept("extract", 1, 0, 3)
	m.Swept("embed", 0, 0, 0)
	m.Swept("embed", -1, 0, 0) // ignored
	for name, extract := range map[string]float64{
		"retry_job_documents_requeued_total":             3,
		"retry_job_documents_skipped_backoff_total":      1,
		"retry_job_documents_max_retries_exceeded_total": 3,
	} {
		wantSeries(t, reg, name, map[string]series{
			"collection=extract": {value: extract},
			"collection=embed":   {value: 0},
		})
	}
}

func TestSweepRun(t *testing.T) {
	m, reg := newMetrics(t, metrics.Options{})
	// Before any run the fixed series read zero.
	wantSweepRuns(t, reg, 0, 0, 0, 0, 0)

	m.SweepRun(time.Second, nil)
	m.SweepRun(2*time.Second, nil)
	m.SweepRun(time.Second, fmt.Errorf("list stuck: %w", context.DeadlineExceeded))
	m.SweepRun(time.Second, fmt.Errorf("list stuck: %w", context.Canceled))
	m.SweepRun(time.Second, errors.New("database is locked"))
	m.SweepRun(time.Second, errors.New("disk I/O error"))

	wantSweepRuns(t, reg, 2, 4, 1, 1, 2)
	wantSeries(t, reg, "retry_job_duration_seconds", map[string]series{"": {count: 6, sum: 7}})
}

// wantSweepRuns checks retry_job_runs_total by status and
// retry_job_errors_total by error type.
func wantSweepRuns(t *testing.T, reg *prometheus.Registry, success, failure, timeout, cancelled, storeErrs float64) {
	t.Helper()
	wantSeries(t, reg, "retry_job_runs_total", map[string]series{
		"status=success": {value: success},
		"status=failure": {value: failure},
	})
	wantSeries(t, reg, "retry_job_errors_total", map[string]series{
		"error_type=timeout":   {value: timeout},
		"error_type=cancelled": {value: cancelled},
		"error_type=store":     {value: storeErrs},
	})
}

// A kind or queue that is not valid UTF-8 would make the Prometheus
// client panic; the hooks must record it instead.
func TestHooksDoNotPanicOnInvalidUTF8(t *testing.T) {
	m, reg := newMetrics(t, metrics.Options{})
	bad := "ex\xfftract"
	m.Enqueued(bad, bad, weirtype.Inserted)
	m.AttemptDone(bad, bad, metrics.Completed, time.Second)
	m.DeadLettered(bad, bad, weirtype.AbandonTTL)
	m.Swept(bad, 1, 0, 0)
	wantSeries(t, reg, "retry_job_documents_requeued_total", map[string]series{
		"collection=ex\uFFFDtract": {value: 1},
	})
}

func TestNilMetricsHooksAreNoOps(t *testing.T) {
	var m *metrics.Metrics
	m.Enqueued("extract", "default", weirtype.Inserted)
	m.AttemptDone("extract", "default", metrics.Completed, time.Second)
	m.AttemptDone("extract", "default", metrics.Failed, time.Second)
	m.AttemptDone("extract", "default", metrics.Late, time.Second)
	m.DeadLettered("extract", "default", weirtype.AbandonMaxAttempts)
	m.Rescued(2)
	m.Swept("extract", 1, 2, 3)
	m.SweepRun(time.Second, nil)
	m.SweepRun(time.Second, errors.New("boom"))
}

func TestNewTwiceOnOneRegistryFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := metrics.New(reg, metrics.Options{}); err != nil {
		t.Fatalf("first New: %v", err)
	}
	_, err := metrics.New(reg, metrics.Options{})
	if err == nil {
		t.Fatal("second New on the same registry succeeded")
	}
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Errorf("error %v does not wrap prometheus.AlreadyRegisteredError", err)
	}
	if !strings.Contains(err.Error(), "metrics: register weir_jobs_enqueued_total") {
		t.Errorf("error %q does not name the collector", err)
	}
}

// A failed New leaves the registry as it found it, so that the caller can
// remove the clash and try again. (The clash has the same descriptor as
// weir's: a registry remembers a name's label names and help for its
// lifetime, even after Unregister.)
func TestNewUnregistersOnFailure(t *testing.T) {
	reg := prometheus.NewRegistry()
	clash := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "retry_job_runs_total",
		Help: "Retry job executions (status: success/failure).",
	}, []string{"status"})
	reg.MustRegister(clash)
	_, err := metrics.New(reg, metrics.Options{})
	if err == nil || !strings.Contains(err.Error(), "register retry_job_runs_total") {
		t.Fatalf("New with a clashing collector: error %v, want one naming retry_job_runs_total", err)
	}
	reg.Unregister(clash)
	if _, err := metrics.New(reg, metrics.Options{}); err != nil {
		t.Fatalf("New after the clash was removed: %v", err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for name, tc := range map[string]struct {
		reg  prometheus.Registerer
		opts metrics.Options
		want string
	}{
		"nil registerer":          {nil, metrics.Options{}, "registerer is nil"},
		"negative stuck-after":    {prometheus.NewRegistry(), metrics.Options{StuckAfter: -time.Minute}, "stuck-after"},
		"negative scrape timeout": {prometheus.NewRegistry(), metrics.Options{ScrapeTimeout: -time.Second}, "scrape timeout"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := metrics.New(tc.reg, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestHooksAreSafeForConcurrentUse(t *testing.T) {
	m, reg := newMetrics(t, metrics.Options{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				m.Enqueued("extract", "default", weirtype.Inserted)
				m.AttemptDone("extract", "default", metrics.Completed, time.Millisecond)
				m.Rescued(1)
				m.Swept("extract", 1, 0, 0)
				m.SweepRun(time.Millisecond, nil)
			}
		})
	}
	wg.Wait()
	wantSeries(t, reg, "weir_jobs_rescued_total", map[string]series{"": {value: 800}})
	wantSeries(t, reg, "weir_jobs_completed_total", map[string]series{"kind=extract,queue=default": {value: 800}})
}

func BenchmarkAttemptDone(b *testing.B) {
	m, _ := newMetrics(b, metrics.Options{})
	b.ReportAllocs()
	for b.Loop() {
		m.AttemptDone("extract", "default", metrics.Completed, 120*time.Millisecond)
	}
}

func BenchmarkEnqueued(b *testing.B) {
	m, _ := newMetrics(b, metrics.Options{})
	b.ReportAllocs()
	for b.Loop() {
		m.Enqueued("extract", "default", weirtype.Inserted)
	}
}
