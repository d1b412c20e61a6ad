package clock

import "time"

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

// Monotonic reads the monotonic clock, without the wall-clock reading that
// time.Now adds at as much cost again: time.Since of a fixed time reads the
// monotonic clock alone. It follows testing/synctest's fake time inside a
// bubble, as time.Now does.
func (realClock) Monotonic() time.Duration { return time.Since(monoEpoch) }

// monoEpoch is the origin of realClock.Monotonic readings. It is set once,
// when the program starts, and never changes.
var monoEpoch = time.Now()

// Monotonic returns the fake time as a duration since the clock's start, so
// that differences between readings follow Advance and Set exactly.
func (f *Fake) Monotonic() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now.Sub(f.start)
}
