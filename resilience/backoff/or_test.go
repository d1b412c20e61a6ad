package backoff_test

import (
	"testing"
	"time"

	"github.com/weirhq/weir/resilience/backoff"
)

// Or fills a literal's zero fields from a component's own defaults, leaves
// a constructed Backoff as given, and turns the zero Backoff into them.
func TestOrTakesZeroFieldsFromTheDefault(t *testing.T) {
	def := backoff.Exponential(250*time.Millisecond, 2, time.Minute).WithJitter(backoff.JitterFull)
	if got := (backoff.Backoff{}).Or(def); got != def {
		t.Fatalf("zero.Or(def) = %+v, want def", got)
	}
	if got := backoff.Constant(0).Or(def); got != backoff.Constant(0) {
		t.Fatalf("backoff.Constant(0).Or(def) = %+v, want backoff.Constant(0) unchanged", got)
	}
	got := backoff.Backoff{Base: 100 * time.Millisecond, Jitter: backoff.JitterNone}.Or(def).Normalized()
	if got.Base != 100*time.Millisecond || got.Factor != 2 || got.Cap != time.Minute || got.Jitter != backoff.JitterNone || got.Step != got.Base {
		t.Fatalf("partial.Or(def) = %+v, want base 100ms and jitter none kept, factor 2 and cap 1m from def", got)
	}
	if d := (backoff.Backoff{Cap: 5 * time.Second}).Or(def).Delay(1, 0, 0.999); d > 250*time.Millisecond {
		t.Fatalf("first delay %v, want at most def's 250ms base under full jitter", d)
	}
}
