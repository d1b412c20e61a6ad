package leakcheck

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// fakeT records a Fatalf instead of ending the test.
type fakeT struct {
	testing.TB
	msg string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}

// parkedForLeakcheck blocks until stop closes: a goroutine a component
// forgot, named so that its stack shows it.
func parkedForLeakcheck(stop chan struct{}) { <-stop }

func TestCheckNamesAGoroutineLeftRunning(t *testing.T) {
	s := Take()
	stop := make(chan struct{})
	go parkedForLeakcheck(stop)
	ft := &fakeT{}
	s.Check(ft, 50*time.Millisecond)
	if !strings.Contains(ft.msg, "parkedForLeakcheck") {
		t.Fatalf("Check with a goroutine left running: %q, want a failure with its stack", ft.msg)
	}
	close(stop)
	ft = &fakeT{}
	s.Check(ft, 5*time.Second)
	if ft.msg != "" {
		t.Fatalf("Check once it ended: %s", ft.msg)
	}
}

func TestCheckIgnoresGoroutinesOfTheSnapshot(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	go parkedForLeakcheck(stop)
	s := Take()
	ft := &fakeT{}
	s.Check(ft, 10*time.Millisecond)
	if ft.msg != "" {
		t.Fatalf("Check of a goroutine running before the snapshot: %s", ft.msg)
	}
}

// A goroutine that ends a little after Check begins is waited for.
func TestCheckWaitsForAGoroutineThatIsEnding(t *testing.T) {
	s := Take()
	stop := make(chan struct{})
	go parkedForLeakcheck(stop)
	time.AfterFunc(20*time.Millisecond, func() { close(stop) })
	ft := &fakeT{}
	s.Check(ft, 10*time.Second)
	if ft.msg != "" {
		t.Fatalf("Check of a goroutine that ended within the timeout: %s", ft.msg)
	}
}

func TestCheckLeavesOutWhatItIsTold(t *testing.T) {
	s := Take()
	stop := make(chan struct{})
	defer close(stop)
	go parkedForLeakcheck(stop)
	ft := &fakeT{}
	s.Check(ft, 10*time.Millisecond, "parkedForLeakcheck")
	if ft.msg != "" {
		t.Fatalf("Check of a goroutine it was told to leave out: %s", ft.msg)
	}
}
