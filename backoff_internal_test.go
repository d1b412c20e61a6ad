package weir

import (
	"testing"
	"time"
)

// The waits between tries of a failed write, and of a failed listen, come
// from resilience/backoff: doubling from 500 ms to their caps, never
// above them.
func TestWriteAndListenRetriesDoubleToTheirCaps(t *testing.T) {
	for _, hb := range []time.Duration{20 * time.Second, 300 * time.Millisecond} {
		c := &Client{cfg: Config{HeartbeatEvery: hb}}
		for n, want := range map[int]time.Duration{1: 500 * time.Millisecond, 2: time.Second, 3: 2 * time.Second, 5: 8 * time.Second, 6: 16 * time.Second, 7: hb, 1000: hb} {
			want = min(want, hb)
			if got := c.writeBackoff(n); got != want {
				t.Errorf("HeartbeatEvery %v: write backoff after %d failures = %v, want %v", hb, n, got, want)
			}
		}
	}
	for n, want := range map[int]time.Duration{1: 500 * time.Millisecond, 2: time.Second, 6: 16 * time.Second, 7: 30 * time.Second, 1 << 20: 30 * time.Second} {
		if got := listenBackoff(n); got != want {
			t.Errorf("listen backoff after %d failures = %v, want %v", n, got, want)
		}
	}
}
