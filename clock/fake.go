package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Fake is a [Clock] whose time moves only when Advance or Set is called.
// It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	start   time.Time
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced whenever timers change
}

// NewFake returns a fake clock that reads start.
func NewFake(start time.Time) *Fake {
	return &Fake{start: start, now: start, changed: make(chan struct{})}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer that fires once the fake time reaches Now()+d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{clock: f, when: f.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.fired = true
		t.c <- f.now
		return t
	}
	f.timers = append(f.timers, t)
	f.notifyLocked()
	return t
}

// Advance moves the time forward by d and fires every timer that is due, in
// the order of their deadlines.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLocked(f.now.Add(d))
}

// Set moves the time to t (forward or back) and fires every timer that is due.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLocked(t)
}

func (f *Fake) setLocked(t time.Time) {
	f.now = t
	sort.SliceStable(f.timers, func(i, j int) bool { return f.timers[i].when.Before(f.timers[j].when) })
	kept := f.timers[:0]
	for _, tm := range f.timers {
		if !tm.when.After(t) {
			tm.fired = true
			tm.c <- t
			continue
		}
		kept = append(kept, tm)
	}
	fired := len(f.timers) - len(kept)
	clear(f.timers[len(kept):])
	f.timers = kept
	if fired > 0 {
		f.notifyLocked()
	}
}

// AdvanceToNextTimer moves the time to the earliest waiting timer's deadline,
// fires it (and any other timer due by then) and returns how far the time
// moved. With no timer waiting it does nothing and returns 0.
func (f *Fake) AdvanceToNextTimer() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.timers) == 0 {
		return 0
	}
	next := f.timers[0].when
	for _, tm := range f.timers[1:] {
		if tm.when.Before(next) {
			next = tm.when
		}
	}
	d := next.Sub(f.now)
	f.setLocked(next)
	return d
}

// Timers returns how many timers are waiting to fire.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// WaitForTimers blocks until at least n timers are waiting to fire, which is
// how a test knows that the code under test has started to wait. It returns
// the context's error if ctx ends first.
func (f *Fake) WaitForTimers(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		if len(f.timers) >= n {
			f.mu.Unlock()
			return nil
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Changed returns a channel that is closed the next time a timer is made,
// fires or is stopped: how a test waits, without polling, for the code
// under test to act on the clock (to wait on it again after a timer
// fired, say).
func (f *Fake) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *Fake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

type fakeTimer struct {
	clock *Fake
	when  time.Time
	c     chan time.Time
	fired bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.fired {
		return false
	}
	for i, tm := range f.timers {
		if tm == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)
			f.notifyLocked()
			return true
		}
	}
	return false
}
