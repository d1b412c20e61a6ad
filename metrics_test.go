package weir_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/metrics"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/weirtype"
)

// A client with Metrics counts what it inserts, completes, fails and
// dead-letters, by kind, and the store collector reports the depth by
// state at scrape time.
func TestClientMetrics(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		reg := prometheus.NewPedanticRegistry()
		var m *metrics.Metrics
		e := newEnvOn(t, open, weir.WorkFunc(func(_ context.Context, j *weir.Job[task]) error {
			if j.Args.Name == "poison" {
				return retry.Permanent(errors.New("cannot parse"))
			}
			return nil
		}), weir.KindConfig{}, func(c *weir.Config) {
			var err error
			m, err = metrics.New(reg, metrics.Options{Store: c.Store})
			if err != nil {
				t.Fatal(err)
			}
			c.Metrics = m
		}).start()
		good := e.insert(task{Name: "ok"}, &weir.InsertOpts{IdempotencyKey: "k1"})
		e.insert(task{Name: "ok"}, &weir.InsertOpts{IdempotencyKey: "k1"})
		bad := e.insert(task{Name: "poison"}, nil)
		e.waitState(good.ID, weirtype.StateCompleted, 1)
		e.waitState(bad.ID, weirtype.StateDead, 1)

		want := map[string]float64{
			`weir_jobs_enqueued_total{kind="task",outcome="inserted",queue="default"}`:                 2,
			`weir_jobs_completed_total{kind="task",queue="default"}`:                                   1,
			`weir_jobs_failed_total{kind="task",queue="default"}`:                                      1,
			`weir_jobs_dead_lettered_total{kind="task",queue="default",reason="non_retryable"}`:        1,
			`weir_jobs{kind="task",queue="default",state="completed"}`:                                 1,
			`weir_jobs{kind="task",queue="default",state="dead"}`:                                      1,
			`retry_job_failed_documents{collection="task"}`:                                            1,
			`weir_job_attempt_duration_seconds_count{kind="task",outcome="completed",queue="default"}`: 1,
		}
		waitFor(t, func() bool {
			got := gather(t, reg)
			for k, v := range want {
				if got[k] != v {
					return false
				}
			}
			return true
		})
		got := gather(t, reg)
		// A duplicate insert is counted under its outcome.
		if dup := got[`weir_jobs_enqueued_total{kind="task",outcome="duplicate_pending",queue="default"}`] +
			got[`weir_jobs_enqueued_total{kind="task",outcome="duplicate_running",queue="default"}`] +
			got[`weir_jobs_enqueued_total{kind="task",outcome="duplicate_completed",queue="default"}`]; dup != 1 {
			t.Fatalf("duplicate inserts counted %v, want 1: %v", dup, got)
		}
		if _, err := e.c.SweepStuck(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := gather(t, reg)[`retry_job_runs_total{status="success"}`]; got != 1 {
			t.Fatalf("retry_job_runs_total{status=success} = %v, want 1", got)
		}
	})
}

// gather flattens what reg gathers into name{label="value",...} → value,
// labels in name order; a histogram gives its _count.
func gather(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			name := mf.GetName()
			var v float64
			switch {
			case m.Counter != nil:
				v = m.Counter.GetValue()
			case m.Gauge != nil:
				v = m.Gauge.GetValue()
			case m.Histogram != nil:
				name += "_count"
				v = float64(m.Histogram.GetSampleCount())
			}
			key := name
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			out[key] = v
		}
	}
	return out
}
