package breaker

import (
	"fmt"
	"math"
	"time"
)

// Defaults of the trip strategies, from weir's resilience spec.
const (
	// DefaultFailures is the failure count of the default strategy,
	// CountInWindow(DefaultFailures, DefaultWindow).
	DefaultFailures = 5
	// DefaultWindow is the rolling window of the default strategy, and the
	// window weir uses with FailureRate.
	DefaultWindow = 30 * time.Second
	// DefaultRate is the failure rate that FailureRateConfig trips above.
	DefaultRate = 0.5
	// DefaultMinCalls is the number of calls FailureRateConfig needs in
	// its window before the rate counts.
	DefaultMinCalls = 10
)

// MaxFailures bounds the failure count of CountInWindow and Consecutive.
// CountInWindow keeps one timestamp per failure it counts.
const MaxFailures = 1 << 20

// rateBuckets is how many buckets a FailureRate window is split into.
const rateBuckets = 10

// Strategy decides when a closed breaker opens. Build one with
// [CountInWindow], [FailureRate] or [Consecutive]; the set is closed
// because the breaker's fast path is built around each of them. A
// Strategy is a plain value: one can configure many breakers, each of
// which keeps its own counts.
type Strategy interface {
	// String describes the strategy, as in "5 failures in 30s".
	String() string

	validate() error
	newTracker() tracker
}

var (
	_ Strategy = countInWindow{}
	_ Strategy = failureRate{}
	_ Strategy = consecutive{}

	_ tracker = (*countTracker)(nil)
	_ tracker = (*rateTracker)(nil)
	_ tracker = consecutiveTracker{}
)

// tracker is the per-breaker state of a Strategy. The breaker calls it with
// its lock held. Times are nanoseconds on the breaker's clock.
type tracker interface {
	// recordsSuccesses reports whether success must be called. When it is
	// false, a success in the closed state costs one atomic load.
	recordsSuccesses() bool
	// success records a success at now and reports whether to open.
	success(now int64) bool
	// failure records a failure at now, the consecutive'th in a row, and
	// reports whether to open.
	failure(now int64, consecutive uint32) bool
	// counts returns the successes and failures the strategy counts at
	// now.
	counts(now int64, consecutive uint32) (successes, failures uint64)
	// reset forgets every outcome; now is the time of the reset.
	reset(now int64)
}

// CountInWindow opens the breaker when failures failures happen within a
// rolling window: the failures'th failure opens it if the failures-1
// failures before it all happened less than window earlier. The count is
// exact (the strategy keeps the time of the last failures failures) and
// successes do not reset it. The default strategy is
// CountInWindow(5, 30*time.Second).
//
// failures must be in [1, MaxFailures] and window positive; [New] reports
// a bad value.
func CountInWindow(failures int, window time.Duration) Strategy {
	return countInWindow{failures: failures, window: window}
}

// FailureRate opens the breaker when, within a rolling window, at least
// minCalls calls have had an outcome and failures/calls is greater than
// rate. Both successes and failures are checked, since a success can be
// the call that reaches minCalls. The weir default window is 30 s
// ([DefaultWindow]).
//
// The window is kept as 10 buckets of window/10 each (3 s for a 30 s
// window), so an outcome counts for more than window-window/10 and at
// most window after it happened.
//
// rate must be in [0, 1), minCalls at least 1 and window at least 10 ns;
// [New] reports a bad value.
func FailureRate(rate float64, minCalls int, window time.Duration) Strategy {
	return failureRate{rate: rate, minCalls: minCalls, window: window}
}

// Consecutive opens the breaker when failures failures happen in a row,
// with no success between them. Ignored outcomes neither count nor break
// the run.
//
// failures must be in [1, MaxFailures]; [New] reports a bad value.
func Consecutive(failures int) Strategy {
	return consecutive{failures: failures}
}

// ---- CountInWindow ----

type countInWindow struct {
	failures int
	window   time.Duration
}

func (s countInWindow) String() string {
	return fmt.Sprintf("%d failures in %v", s.failures, s.window)
}

func (s countInWindow) validate() error {
	switch {
	case s.failures < 1 || s.failures > MaxFailures:
		return fmt.Errorf("CountInWindow failures is %d, must be in [1, %d]", s.failures, MaxFailures)
	case s.window <= 0:
		return fmt.Errorf("CountInWindow window is %v, must be positive", s.window)
	}
	return nil
}

func (s countInWindow) newTracker() tracker {
	return &countTracker{times: make([]int64, s.failures), window: int64(s.window)}
}

// countTracker keeps the times of the last len(times) failures in a ring.
type countTracker struct {
	times  []int64
	next   int // the slot the next failure goes into: the oldest once full
	filled int
	window int64
}

func (t *countTracker) recordsSuccesses() bool { return false }
func (t *countTracker) success(int64) bool     { return false }

func (t *countTracker) failure(now int64, _ uint32) bool {
	t.times[t.next] = now
	t.next++
	if t.next == len(t.times) {
		t.next = 0
	}
	if t.filled < len(t.times) {
		t.filled++
	}
	return t.filled == len(t.times) && now-t.times[t.next] < t.window
}

func (t *countTracker) counts(now int64, _ uint32) (uint64, uint64) {
	var n uint64
	for _, at := range t.times[:t.filled] {
		if now-at < t.window {
			n++
		}
	}
	return 0, n
}

func (t *countTracker) reset(int64) {
	t.next, t.filled = 0, 0
}

// ---- FailureRate ----

type failureRate struct {
	rate     float64
	minCalls int
	window   time.Duration
}

func (s failureRate) String() string {
	return fmt.Sprintf("failure rate above %v of at least %d calls in %v", s.rate, s.minCalls, s.window)
}

func (s failureRate) validate() error {
	switch {
	case math.IsNaN(s.rate) || s.rate < 0 || s.rate >= 1:
		return fmt.Errorf("FailureRate rate is %v, must be in [0, 1)", s.rate)
	case s.minCalls < 1:
		return fmt.Errorf("FailureRate minCalls is %d, must be at least 1", s.minCalls)
	case s.window < rateBuckets:
		return fmt.Errorf("FailureRate window is %v, must be at least %v", s.window, time.Duration(rateBuckets))
	}
	return nil
}

func (s failureRate) newTracker() tracker {
	return &rateTracker{
		rate:     s.rate,
		minCalls: uint64(s.minCalls),
		width:    int64(s.window) / rateBuckets,
	}
}

type bucket struct{ successes, failures uint64 }

// rateTracker counts outcomes in rateBuckets buckets of width ns. Bucket i
// (absolute) holds the outcomes of [i×width, (i+1)×width) and lives in
// buckets[i mod rateBuckets]; head is the newest bucket.
type rateTracker struct {
	rate     float64
	minCalls uint64
	width    int64

	buckets             [rateBuckets]bucket
	head                int64
	successes, failures uint64 // totals over the live buckets
}

func (t *rateTracker) recordsSuccesses() bool { return true }

func (t *rateTracker) success(now int64) bool {
	b := t.advance(now)
	b.successes++
	t.successes++
	return t.tripped()
}

func (t *rateTracker) failure(now int64, _ uint32) bool {
	b := t.advance(now)
	b.failures++
	t.failures++
	return t.tripped()
}

func (t *rateTracker) tripped() bool {
	calls := t.successes + t.failures
	return calls >= t.minCalls && float64(t.failures)/float64(calls) > t.rate
}

func (t *rateTracker) counts(now int64, _ uint32) (uint64, uint64) {
	t.advance(now)
	return t.successes, t.failures
}

func (t *rateTracker) reset(now int64) {
	t.buckets = [rateBuckets]bucket{}
	t.successes, t.failures = 0, 0
	t.head = floorDiv(now, t.width)
}

// advance drops the buckets that have left the window at now and returns
// the bucket for now. A time before head (the clock went back) counts in
// head.
func (t *rateTracker) advance(now int64) *bucket {
	idx := floorDiv(now, t.width)
	if idx > t.head {
		if idx-t.head >= rateBuckets {
			t.buckets = [rateBuckets]bucket{}
			t.successes, t.failures = 0, 0
		} else {
			for i := t.head + 1; i <= idx; i++ {
				b := &t.buckets[floorMod(i, rateBuckets)]
				t.successes -= b.successes
				t.failures -= b.failures
				*b = bucket{}
			}
		}
		t.head = idx
	}
	return &t.buckets[floorMod(t.head, rateBuckets)]
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// ---- Consecutive ----

type consecutive struct{ failures int }

func (s consecutive) String() string {
	return fmt.Sprintf("%d consecutive failures", s.failures)
}

func (s consecutive) validate() error {
	if s.failures < 1 || s.failures > MaxFailures {
		return fmt.Errorf("Consecutive failures is %d, must be in [1, %d]", s.failures, MaxFailures)
	}
	return nil
}

func (s consecutive) newTracker() tracker {
	return consecutiveTracker{failures: uint32(s.failures)}
}

// consecutiveTracker needs no state of its own: the run of failures is kept
// in the breaker's state word.
type consecutiveTracker struct{ failures uint32 }

func (consecutiveTracker) recordsSuccesses() bool { return false }
func (consecutiveTracker) success(int64) bool     { return false }

func (t consecutiveTracker) failure(_ int64, consecutive uint32) bool {
	return consecutive >= t.failures
}

func (consecutiveTracker) counts(_ int64, consecutive uint32) (uint64, uint64) {
	return 0, uint64(consecutive)
}

func (consecutiveTracker) reset(int64) {}
