package metrics_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/teststore"
	"github.com/weirhq/weir/metrics"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// ListPauses of the job-count tests' fake store: nothing is paused.
func (f *fakeExecutor) ListPauses(context.Context, time.Time) ([]*weirtype.Pause, error) {
	return nil, nil
}

// weir_paused has a series for each pause that holds, read from the store
// at scrape time, and none once it ends.
func TestPauseCollectorReportsWhatIsPaused(t *testing.T) {
	ctx := context.Background()
	s := teststore.SQLite(t, filepath.Join(t.TempDir(), "weir.db"))
	fc := clock.NewFake(t0)
	_, reg := newMetrics(t, metrics.Options{Store: s, Clock: fc})
	ex := s.Executor()
	if _, err := ex.Pause(ctx, t0, store.PauseParams{Queue: "docs", By: "alice"}); err != nil {
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
