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

// ListLimits of the job-count tests' fake store: there is none.
func (f *fakeExecutor) ListLimits(context.Context) ([]*weirtype.Limit, error) { return nil, nil }

// The limits' gauges are read from the store at scrape time: running
// attempts always, the maximum and the window's starts where the limit
// has them.
func TestLimitCollectorReportsTheLimits(t *testing.T) {
	ctx := context.Background()
	s := teststore.SQLite(t, filepath.Join(t.TempDir(), "weir.db"))
	_, reg := newMetrics(t, metrics.Options{Store: s, Clock: clock.NewFake(t0)})
	ex := s.Executor()
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
