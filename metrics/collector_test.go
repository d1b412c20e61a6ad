package metrics_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/teststore"
	"github.com/weirhq/weir/metrics"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

func TestStoreCollectorReportsCountsStuckAndFailed(t *testing.T) {
	ex := &fakeExecutor{counts: []store.JobCount{
		{Queue: "default", Kind: "extract", State: weirtype.StateAvailable, Count: 5, Stuck: 2},
		{Queue: "default", Kind: "extract", State: weirtype.StateRunning, Count: 3, Stuck: 1},
		{Queue: "default", Kind: "extract", State: weirtype.StateDead, Count: 4},
		{Queue: "bulk", Kind: "extract", State: weirtype.StateScheduled, Count: 7, Stuck: 3},
		{Queue: "bulk", Kind: "extract", State: weirtype.StateDead, Count: 1},
		{Queue: "default", Kind: "embed", State: weirtype.StateCompleted, Count: 9},
	}}
	_, reg := newMetrics(t, metrics.Options{
		Store:      &fakeStore{ex: ex},
		Clock:      clock.NewFake(t0),
		StuckAfter: 15 * time.Minute,
	})

	const want = `
# HELP retry_job_failed_documents Current count of failed documents (max retries): jobs of the collection (kind) in state dead.
# TYPE retry_job_failed_documents gauge
retry_job_failed_documents{collection="embed"} 0
retry_job_failed_documents{collection="extract"} 5
# HELP retry_job_stuck_documents Current count of stuck documents: jobs of the collection (kind) running, or due and waiting, for longer than the stuck threshold.
# TYPE retry_job_stuck_documents gauge
retry_job_stuck_documents{collection="embed"} 0
retry_job_stuck_documents{collection="extract"} 6
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"retry_job_stuck_documents", "retry_job_failed_documents"); err != nil {
		t.Error(err)
	}

	// weir_jobs has every state of each queue and kind the store reported,
	// zeros included.
	jobs := gather(t, reg, "weir_jobs")
	if n := 3 * len(weirtype.States()); len(jobs) != n {
		t.Errorf("weir_jobs has %d series, want %d: %v", len(jobs), n, jobs)
	}
	for k, v := range map[string]float64{
		"kind=extract,queue=default,state=available": 5,
		"kind=extract,queue=default,state=running":   3,
		"kind=extract,queue=default,state=dead":      4,
		"kind=extract,queue=default,state=scheduled": 0,
		"kind=extract,queue=bulk,state=scheduled":    7,
		"kind=extract,queue=bulk,state=dead":         1,
		"kind=extract,queue=bulk,state=available":    0,
		"kind=embed,queue=default,state=completed":   9,
		"kind=embed,queue=default,state=available":   0,
	} {
		if got, ok := jobs[k]; !ok || got.value != v {
			t.Errorf("weir_jobs{%s} = %v (present %v), want %v", k, got.value, ok, v)
		}
	}

	ex.mu.Lock()
	defer ex.mu.Unlock()
	if want := t0.Add(-15 * time.Minute); !ex.stuckBefore.Equal(want) {
		t.Errorf("CountJobs called with stuckBefore %v, want %v", ex.stuckBefore, want)
	}
	if !ex.hadDeadline {
		t.Error("CountJobs called without a deadline")
	}
}

func TestStoreCollectorDefaultStuckAfter(t *testing.T) {
	ex := &fakeExecutor{}
	_, reg := newMetrics(t, metrics.Options{Store: &fakeStore{ex: ex}, Clock: clock.NewFake(t0)})
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if want := t0.Add(-store.DefaultStuckAfter); !ex.stuckBefore.Equal(want) {
		t.Errorf("CountJobs called with stuckBefore %v, want %v", ex.stuckBefore, want)
	}
}

// A failing query must fail the scrape, not read as zero jobs.
func TestStoreErrorIsAScrapeError(t *testing.T) {
	storeErr := errors.New("database is locked")
	_, reg := newMetrics(t, metrics.Options{Store: &fakeStore{ex: &fakeExecutor{err: storeErr}}})
	families, err := reg.Gather()
	if err == nil {
		t.Fatal("Gather succeeded although CountJobs failed")
	}
	if !strings.Contains(err.Error(), "count jobs: database is locked") {
		t.Errorf("Gather error %q does not carry the store's error", err)
	}
	for _, f := range families {
		switch f.GetName() {
		case "weir_jobs", "retry_job_stuck_documents", "retry_job_failed_documents":
			t.Errorf("%s reported although the query failed", f.GetName())
		}
	}
	// The hook metrics are still gathered; the sweep's error counter does
	// not count the scrape failure.
	compareSeries(t, "retry_job_errors_total", gatherSeries(t, reg, "retry_job_errors_total", true),
		map[string]series{
			"error_type=timeout":   {value: 0},
			"error_type=cancelled": {value: 0},
			"error_type=store":     {value: 0},
		})
}

// A scrape waits for the count at most the scrape timeout; with no
// earlier counts to serve it fails, and the count goes on for the next.
func TestStoreQueryIsBoundedByScrapeTimeout(t *testing.T) {
	gate := make(chan struct{})
	ex := &fakeExecutor{block: true, gate: gate, counts: []store.JobCount{
		{Queue: "default", Kind: "extract", State: weirtype.StateAvailable, Count: 5},
	}}
	_, reg := newMetrics(t, metrics.Options{Store: &fakeStore{ex: ex}, ScrapeTimeout: 10 * time.Millisecond})
	_, err := reg.Gather()
	if err == nil || !strings.Contains(err.Error(), "count jobs: still counting after 10ms") {
		t.Fatalf("Gather error %v, want the count still running after the scrape timeout", err)
	}
	// The count in flight is the next scrape's: no second one starts.
	if _, err := reg.Gather(); err == nil {
		t.Fatal("second Gather succeeded while the count was still blocked")
	}
	if n := ex.callCount(); n != 1 {
		t.Errorf("CountJobs called %d times, want 1: the scrapes waited for the count in flight", n)
	}
	close(gate)
	waitFor(t, func() bool {
		jobs := gatherSeries(t, reg, "weir_jobs", true)
		return jobs["kind=extract,queue=default,state=available"].value == 5
	})
}

// A count that takes long is not run again at every scrape: the scrapes
// within twenty times its duration serve its counts. A fast one runs at
// every scrape.
func TestSlowCountsAreSpacedByTheirCost(t *testing.T) {
	before := []store.JobCount{{Queue: "default", Kind: "extract", State: weirtype.StateAvailable, Count: 5}}
	after := []store.JobCount{{Queue: "default", Kind: "extract", State: weirtype.StateAvailable, Count: 8}}
	const key = "kind=extract,queue=default,state=available"

	fast := &fakeExecutor{counts: before}
	_, reg := newMetrics(t, metrics.Options{Store: &fakeStore{ex: fast}})
	gatherSeries(t, reg, "weir_jobs", false)
	fast.set(after, false, nil)
	if got := gatherSeries(t, reg, "weir_jobs", false)[key].value; got != 8 || fast.callCount() != 2 {
		t.Errorf("fast count: second scrape read %v in %d counts, want 8 in 2", got, fast.callCount())
	}

	// A count held for 150 ms (more than the 100 ms from which counts are
	// spaced) is served for 20 × 150 ms = 3 s after it began.
	gate := make(chan struct{})
	slow := &fakeExecutor{counts: before, block: true, gate: gate}
	_, reg = newMetrics(t, metrics.Options{Store: &fakeStore{ex: slow}})
	began := time.Now()
	time.AfterFunc(150*time.Millisecond, func() { close(gate) })
	if got := gatherSeries(t, reg, "weir_jobs", false)[key].value; got != 5 {
		t.Fatalf("slow count: first scrape read %v, want 5", got)
	}
	slow.set(after, false, nil)
	got := gatherSeries(t, reg, "weir_jobs", false)[key].value
	if time.Since(began) < 2*time.Second { // else this machine stalled: the count may be due again
		if got != 5 || slow.callCount() != 1 {
			t.Errorf("slow count: a scrape right after read %v in %d counts, want the first count's 5 in 1", got, slow.callCount())
		}
	}
	waitFor(t, func() bool { return gatherSeries(t, reg, "weir_jobs", false)[key].value == 8 })
	if waited := time.Since(began); waited < 3*time.Second {
		t.Errorf("slow count ran again %v after it began, want at least 3s", waited)
	}
	if n := slow.callCount(); n != 2 {
		t.Errorf("CountJobs called %d times, want 2", n)
	}
}

// A count that outlasts its scrape leaves the scrape the earlier counts,
// and finishes for the next scrape.
func TestALongCountServesTheEarlierCounts(t *testing.T) {
	before := []store.JobCount{{Queue: "default", Kind: "extract", State: weirtype.StateAvailable, Count: 5}}
	after := []store.JobCount{{Queue: "default", Kind: "extract", State: weirtype.StateAvailable, Count: 8}}
	const key = "kind=extract,queue=default,state=available"
	ex := &fakeExecutor{counts: before}
	_, reg := newMetrics(t, metrics.Options{Store: &fakeStore{ex: ex}, ScrapeTimeout: 20 * time.Millisecond})
	if got := gatherSeries(t, reg, "weir_jobs", false)[key].value; got != 5 {
		t.Fatalf("first scrape read %v, want 5", got)
	}
	gate := make(chan struct{})
	ex.set(after, true, gate)
	held := time.Now()
	for range 3 {
		if got := gatherSeries(t, reg, "weir_jobs", false)[key].value; got != 5 {
			t.Fatalf("scrape during the long count read %v, want the earlier count's 5", got)
		}
	}
	// Held 150 ms, the count is one to space: the scrapes after it read
	// its counts without counting again.
	time.Sleep(150*time.Millisecond - time.Since(held))
	close(gate)
	waitFor(t, func() bool { return gatherSeries(t, reg, "weir_jobs", false)[key].value == 8 })
	if n := ex.callCount(); n != 2 {
		t.Errorf("CountJobs called %d times, want 2: the scrapes during the long count waited for it", n)
	}
}

func TestStoreCollectorRegisteredTwiceFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := &fakeStore{ex: &fakeExecutor{}}
	if _, err := metrics.New(reg, metrics.Options{Store: s}); err != nil {
		t.Fatal(err)
	}
	// A second registry holding the hook metrics cannot clash; so clash
	// on the store collector alone by taking its names first.
	reg2 := prometheus.NewRegistry()
	reg2.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "retry_job_stuck_documents", Help: "x"}))
	_, err := metrics.New(reg2, metrics.Options{Store: s})
	if err == nil || !strings.Contains(err.Error(), "store collector") {
		t.Fatalf("error %v, want one naming the store collector", err)
	}
}

// sqliteMetrics is New on a fresh SQLite store, telling the time of clk:
// the store's executor, to set what the collectors read, and the registry.
func sqliteMetrics(t *testing.T, clk clock.Clock) (store.Executor, *prometheus.Registry) {
	t.Helper()
	s := teststore.SQLite(t, filepath.Join(t.TempDir(), "weir.db"))
	_, reg := newMetrics(t, metrics.Options{Store: s, Clock: clk})
	return s.Executor(), reg
}

// weir_paused has a series for each pause that holds, read from the store
// at scrape time, and none once it ends.
func TestPauseCollectorReportsWhatIsPaused(t *testing.T) {
	ctx := context.Background()
	fc := clock.NewFake(t0)
	ex, reg := sqliteMetrics(t, fc)
	if _, err := ex.Pause(ctx, t0, store.PauseParams{Queue: "docs", By: "alice", KnownQueue: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.Pause(ctx, t0, store.PauseParams{Queue: "docs", Kind: "extract", Cause: weirtype.PauseRetryAfter,
		Until: t0.Add(time.Minute), KnownKind: true}); err != nil {
		t.Fatal(err)
	}
	const want = `
# HELP weir_paused 1 for each queue, or kind within a queue (kind empty: the whole queue), whose jobs are not claimed, by what holds it: operator, breaker or retry_after.
# TYPE weir_paused gauge
weir_paused{cause="operator",kind="",queue="docs"} 1
weir_paused{cause="retry_after",kind="extract",queue="docs"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "weir_paused"); err != nil {
		t.Error(err)
	}
	if got := gather(t, reg, "weir_paused_since_seconds"); len(got) != 2 {
		t.Errorf("weir_paused_since_seconds = %v, want two series", got)
	}
	// The Retry-After's hold ends; the operator's pause is resumed.
	fc.Advance(time.Minute)
	if _, err := ex.Resume(ctx, "docs", "", ""); err != nil {
		t.Fatal(err)
	}
	if got := gather(t, reg, "weir_paused"); len(got) != 0 {
		t.Errorf("weir_paused after the pauses ended = %v, want none", got)
	}
}

// The limits' gauges are read from the store at scrape time: running
// attempts always, the maximum and the window's starts where the limit
// has them.
func TestLimitCollectorReportsTheLimits(t *testing.T) {
	ctx := context.Background()
	ex, reg := sqliteMetrics(t, clock.NewFake(t0))
	if _, err := ex.SetLimit(ctx, t0, store.LimitParams{Key: "llm", Kinds: []string{"extract"}, MaxRunning: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.SetLimit(ctx, t0, store.LimitParams{Key: "smtp", Kinds: []string{"mail"}, Rate: 10, Per: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.Insert(ctx, t0, []store.InsertParams{{Kind: "extract"}, {Kind: "mail"}, {Kind: "mail"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.Claim(ctx, store.ClaimParams{Now: t0, Limit: 10, Owner: "w", LeaseFor: time.Minute}); err != nil {
		t.Fatal(err)
	}
	const want = `
# HELP weir_limit_max_running The most attempts of a limit's kinds that may run at once across every process.
# TYPE weir_limit_max_running gauge
weir_limit_max_running{key="llm"} 4
# HELP weir_limit_running Attempts of the kinds of a limit across processes (KindConfig.MaxRunning, Rate) running now, by the limit's key.
# TYPE weir_limit_running gauge
weir_limit_running{key="llm"} 1
weir_limit_running{key="smtp"} 2
# HELP weir_limit_window_starts Attempts of a limit's kinds started in the rate window last counted.
# TYPE weir_limit_window_starts gauge
weir_limit_window_starts{key="smtp"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "weir_limit_running", "weir_limit_max_running", "weir_limit_window_starts"); err != nil {
		t.Error(err)
	}
}
