package budget_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/weirhq/weir/resilience/budget"
)

func TestLimitIsShareOfCallsWithFloor(t *testing.T) {
	tests := []struct {
		ratio     float64
		min       int
		calls     int
		wantLimit int64
	}{
		{0.2, 3, 0, 3},
		{0.2, 3, 10, 3},
		{0.2, 3, 15, 3},
		{0.2, 3, 20, 4},
		{0.2, 3, 100, 20},
		{0.5, -1, 1, 0},
		{0.5, -1, 2, 1},
		{1, -1, 7, 7},
	}
	for _, tt := range tests {
		b, err := budget.New(budget.Config{Ratio: tt.ratio, MinRetries: tt.min})
		if err != nil {
			t.Fatal(err)
		}
		for range tt.calls {
			b.Begin()
		}
		granted := int64(0)
		for b.TryRetry() {
			granted++
		}
		if granted != tt.wantLimit {
			t.Errorf("ratio %v floor %d with %d calls: granted %d retries, want %d", tt.ratio, tt.min, tt.calls, granted, tt.wantLimit)
		}
		s := b.Snapshot()
		if s.Limit != tt.wantLimit || s.Retries != granted || s.Refused != 1 {
			t.Errorf("snapshot %+v", s)
		}
	}
}

func TestRetryDoneFreesASlot(t *testing.T) {
	b, _ := budget.New(budget.Config{MinRetries: 1})
	if !b.TryRetry() {
		t.Fatal("first retry refused")
	}
	if b.TryRetry() {
		t.Fatal("second retry granted past the floor of 1")
	}
	b.RetryDone()
	if !b.TryRetry() {
		t.Fatal("retry refused after the slot was freed")
	}
}

func TestConfigValidation(t *testing.T) {
	for _, r := range []float64{-0.1, 1.5} {
		if _, err := budget.New(budget.Config{Ratio: r}); err == nil {
			t.Errorf("ratio %v accepted", r)
		}
	}
}

// However many goroutines compete, retries in flight never pass the limit.
func TestPropertyConcurrentRetriesStayWithinLimit(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ratio := rapid.Float64Range(0.05, 1).Draw(rt, "ratio")
		floor := rapid.IntRange(1, 5).Draw(rt, "floor")
		calls := rapid.IntRange(1, 64).Draw(rt, "calls")
		b, err := budget.New(budget.Config{Ratio: ratio, MinRetries: floor})
		if err != nil {
			rt.Fatal(err)
		}
		for range calls {
			b.Begin()
		}
		limit := max(int64(ratio*float64(calls)), int64(floor))
		var inFlight, peak atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for range 50 {
					if !b.TryRetry() {
						continue
					}
					n := inFlight.Add(1)
					for {
						p := peak.Load()
						if n <= p || peak.CompareAndSwap(p, n) {
							break
						}
					}
					inFlight.Add(-1)
					b.RetryDone()
				}
			})
		}
		wg.Wait()
		if peak.Load() > limit {
			rt.Fatalf("peak %d retries in flight, limit %d", peak.Load(), limit)
		}
		if s := b.Snapshot(); s.Retries != 0 {
			rt.Fatalf("%d retries left in flight", s.Retries)
		}
	})
}
