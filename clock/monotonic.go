package clock

import (
	"time"
	_ "unsafe" // for go:linkname
)

// Monotonic is an optional capability of a Clock: a cheap reading of a
// monotonic clock, for measuring how long something took on a hot path.
// Readings are only meaningful relative to each other.
type Monotonic interface {
	Monotonic() time.Duration
}

// MonotonicOf returns a function that reads c's monotonic time: its
// Monotonic method when it has one, else Now measured from the moment
// MonotonicOf was called. A nil c is Real.
func MonotonicOf(c Clock) func() time.Duration {
	c = Or(c)
	if m, ok := c.(Monotonic); ok {
		return m.Monotonic
	}
	epoch := c.Now()
	return func() time.Duration { return c.Now().Sub(epoch) }
}

// Monotonic reads the runtime's monotonic clock, the one time.Now reads
// for its monotonic part, without the wall-clock read that costs as much
// again. A successful call through a retry policy pays for one reading.
func (realClock) Monotonic() time.Duration { return time.Duration(nanotime()) }

//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Monotonic returns the fake time as a duration since the clock's start, so
// that differences between readings follow Advance and Set exactly.
func (f *Fake) Monotonic() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now.Sub(f.start)
}
