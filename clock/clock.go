package clock

import "time"

// Clock tells the time and makes timers.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that sends the time on its channel once d
	// has passed. A d of zero or less fires at once.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a [Clock].
type Timer interface {
	// C is the channel on which the timer sends when it fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether the call
	// stopped the timer, false when it had already fired or been stopped.
	Stop() bool
}

// Real is the wall clock.
var Real Clock = realClock{}

// Or returns c, or Real when c is nil. Config structs use it so that their
// zero value works.
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

// Sleep waits d on c and reports true, or returns false as soon as done
// is closed, stopping the timer. Loops that run until a stop signal wait
// between rounds with it: `if !clock.Sleep(c, d, stop) { return }`.
func Sleep(c Clock, d time.Duration, done <-chan struct{}) bool {
	t := c.NewTimer(d)
	select {
	case <-t.C():
		return true
	case <-done:
		t.Stop()
		return false
	}
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }
