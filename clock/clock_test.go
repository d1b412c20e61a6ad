package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/weirhq/weir/clock"
)

var t0 = time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)

func TestFakeTimersFireInOrderWhenDue(t *testing.T) {
	c := clock.NewFake(t0)
	late := c.NewTimer(3 * time.Second)
	early := c.NewTimer(time.Second)
	if n := c.Timers(); n != 2 {
		t.Fatalf("Timers() = %d, want 2", n)
	}
	c.Advance(999 * time.Millisecond)
	select {
	case <-early.C():
		t.Fatal("timer fired before its deadline")
	default:
	}
	c.Advance(time.Millisecond)
	if got := <-early.C(); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("early fired with %v", got)
	}
	if d := c.AdvanceToNextTimer(); d != 2*time.Second {
		t.Fatalf("AdvanceToNextTimer moved %v, want 2s", d)
	}
	<-late.C()
	if d := c.AdvanceToNextTimer(); d != 0 {
		t.Fatalf("AdvanceToNextTimer with no timers moved %v", d)
	}
}

func TestFakeStop(t *testing.T) {
	c := clock.NewFake(t0)
	tm := c.NewTimer(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of a waiting timer returned false")
	}
	if tm.Stop() {
		t.Fatal("second Stop returned true")
	}
	c.Advance(time.Hour)
	select {
	case <-tm.C():
		t.Fatal("stopped timer fired")
	default:
	}
	fired := c.NewTimer(0)
	<-fired.C()
	if fired.Stop() {
		t.Fatal("Stop of a fired timer returned true")
	}
}

func TestFakeWaitForTimers(t *testing.T) {
	c := clock.NewFake(t0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tm := c.NewTimer(time.Minute)
		<-tm.C()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	<-done
	short, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := c.WaitForTimers(short, 5); err == nil {
		t.Fatal("WaitForTimers returned nil with no timers and a cancelled context")
	}
}

func TestRealAndOr(t *testing.T) {
	if clock.Or(nil) != clock.Real {
		t.Fatal("Or(nil) is not Real")
	}
	f := clock.NewFake(t0)
	if clock.Or(f) != clock.Clock(f) {
		t.Fatal("Or(f) is not f")
	}
	tm := clock.Real.NewTimer(time.Millisecond)
	<-tm.C()
	if d := time.Since(clock.Real.Now()); d > time.Minute || d < -time.Minute {
		t.Fatalf("Real.Now is off by %v", d)
	}
}

func TestMonotonic(t *testing.T) {
	f := clock.NewFake(t0)
	mono := clock.MonotonicOf(f)
	a := mono()
	f.Advance(90 * time.Second)
	if d := mono() - a; d != 90*time.Second {
		t.Fatalf("fake monotonic moved %v, want 90s", d)
	}
	real := clock.MonotonicOf(nil)
	r1 := real()
	tm := clock.Real.NewTimer(2 * time.Millisecond)
	<-tm.C()
	if d := real() - r1; d < 2*time.Millisecond || d > time.Minute {
		t.Fatalf("real monotonic moved %v across a 2ms timer", d)
	}
}

// A clock without the Monotonic capability still gets one, from Now.
func TestMonotonicFallsBackToNow(t *testing.T) {
	f := clock.NewFake(t0)
	var c clock.Clock = struct{ clock.Clock }{f} // hides Fake's Monotonic
	if _, ok := c.(clock.Monotonic); ok {
		t.Fatal("test clock should not have Monotonic")
	}
	mono := clock.MonotonicOf(c)
	f.Advance(time.Hour)
	if d := mono(); d != time.Hour {
		t.Fatalf("fallback monotonic reads %v, want 1h", d)
	}
}

// Changed is closed by the next change of the timers (made, fired,
// stopped), and not before: a test waits on it instead of polling.
func TestFakeChangedSignalsEachChangeOfTheTimers(t *testing.T) {
	c := clock.NewFake(t0)
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	ch := c.Changed()
	c.Advance(time.Second) // no timer: nothing changes but the time
	if closed(ch) {
		t.Fatal("Changed closed by an advance that fired no timer")
	}
	tm := c.NewTimer(time.Minute)
	if !closed(ch) {
		t.Fatal("Changed not closed by a new timer")
	}
	ch = c.Changed()
	if closed(ch) {
		t.Fatal("a fresh Changed is closed already")
	}
	c.Advance(time.Minute)
	if !closed(ch) {
		t.Fatal("Changed not closed by a timer firing")
	}
	<-tm.C()
	tm = c.NewTimer(time.Minute)
	ch = c.Changed()
	tm.Stop()
	if !closed(ch) {
		t.Fatal("Changed not closed by a timer stopping")
	}
}

// Sleep reports true once its time has passed on the clock, and false as
// soon as done is closed, leaving no timer armed.
func TestSleep(t *testing.T) {
	c := clock.NewFake(t0)
	slept := make(chan bool, 1)
	go func() { slept <- clock.Sleep(c, time.Minute, nil) }()
	if err := c.WaitForTimers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	if !<-slept {
		t.Fatal("Sleep reported false when its time passed")
	}

	done := make(chan struct{})
	go func() { slept <- clock.Sleep(c, time.Hour, done) }()
	if err := c.WaitForTimers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	close(done)
	if <-slept {
		t.Fatal("Sleep reported true when done was closed first")
	}
	if n := c.Timers(); n != 0 {
		t.Fatalf("Timers() = %d after Sleep returned, want 0", n)
	}
}
