package eventually

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitReturnsOnceDone(t *testing.T) {
	var n atomic.Int32
	why, ok := Wait(time.Minute, func() (bool, string) { return n.Add(1) == 3, "counting" })
	if !ok || n.Load() != 3 || why != "counting" {
		t.Fatalf("Wait: %q, %v after %d calls; want done on the third", why, ok, n.Load())
	}
}

func TestWaitGivesUpAtItsDeadline(t *testing.T) {
	start := time.Now()
	why, ok := Wait(30*time.Millisecond, func() (bool, string) { return false, "never" })
	if ok || why != "never" {
		t.Fatalf("Wait of a condition never met: %q, %v", why, ok)
	}
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Fatalf("gave up after %v, before its 30ms", took)
	}
}

func TestTrueFailsWithTheLastWord(t *testing.T) {
	ft := &fakeT{}
	True(ft, "the queue drains", 10*time.Millisecond, func() (bool, string) { return false, "3 jobs left" })
	if ft.msg != "the queue drains: not within 10ms: 3 jobs left" {
		t.Fatalf("failure %q", ft.msg)
	}
}

// fakeT records a Fatalf instead of ending the test.
type fakeT struct {
	testing.TB
	msg string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}
