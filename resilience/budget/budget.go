package budget

import (
	"fmt"
	"math"
	"sync/atomic"
)

// Defaults.
const (
	DefaultRatio      = 0.2
	DefaultMinRetries = 3
)

// Config configures a Budget. The zero value uses the defaults.
type Config struct {
	// Ratio is the share of calls in flight that may be retries in flight,
	// in (0, 1]. Default 0.2.
	Ratio float64
	// MinRetries is the number of retries in flight always allowed,
	// however few calls are in flight. Default 3; set it negative for no
	// floor.
	MinRetries int
}

// Budget counts calls and retries in flight. It is safe for concurrent use.
type Budget struct {
	ratio    float64
	min      int64
	calls    atomic.Int64
	retries  atomic.Int64
	refused  atomic.Uint64
	admitted atomic.Uint64
}

// New returns a Budget, or an error naming the bad field.
func New(cfg Config) (*Budget, error) {
	if cfg.Ratio == 0 {
		cfg.Ratio = DefaultRatio
	}
	if cfg.MinRetries == 0 {
		cfg.MinRetries = DefaultMinRetries
	}
	if cfg.MinRetries < 0 {
		cfg.MinRetries = 0
	}
	if !(cfg.Ratio > 0 && cfg.Ratio <= 1) || math.IsNaN(cfg.Ratio) {
		return nil, fmt.Errorf("budget: ratio %v must be in (0, 1]", cfg.Ratio)
	}
	return &Budget{ratio: cfg.Ratio, min: int64(cfg.MinRetries)}, nil
}

// Begin records a call in flight. Every Begin must be matched by one End.
func (b *Budget) Begin() { b.calls.Add(1) }

// End records the end of a call begun with Begin.
func (b *Budget) End() { b.calls.Add(-1) }

// TryRetry reserves a retry if the budget allows one and reports whether it
// did. A reserved retry must be released with RetryDone once its attempt has
// run.
func (b *Budget) TryRetry() bool {
	for {
		r := b.retries.Load()
		if r >= b.limit() {
			b.refused.Add(1)
			return false
		}
		if b.retries.CompareAndSwap(r, r+1) {
			b.admitted.Add(1)
			return true
		}
	}
}

// RetryDone releases a retry reserved by TryRetry.
func (b *Budget) RetryDone() { b.retries.Add(-1) }

func (b *Budget) limit() int64 {
	l := int64(b.ratio * float64(b.calls.Load()))
	return max(l, b.min)
}

// Snapshot is a read-only view of a Budget.
type Snapshot struct {
	// Calls and Retries are in flight now; Limit is the retries in flight
	// the budget allows now.
	Calls, Retries, Limit int64
	// Admitted and Refused count TryRetry answers since the budget was made.
	Admitted, Refused uint64
}

// Snapshot returns the budget's counters. They are read one by one, so under
// load they may be a moment apart.
func (b *Budget) Snapshot() Snapshot {
	return Snapshot{
		Calls:    b.calls.Load(),
		Retries:  b.retries.Load(),
		Limit:    b.limit(),
		Admitted: b.admitted.Load(),
		Refused:  b.refused.Load(),
	}
}
