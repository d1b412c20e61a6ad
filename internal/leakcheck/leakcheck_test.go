package leakcheck

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// parkedForLeakcheck blocks until stop closes: a goroutine a component
// forgot, named so that its stack shows it.
func parkedForLeakcheck(stop chan struct{}) { <-stop }

// park starts a parkedForLeakcheck, ended when the test ends.
func park(t *testing.T) (stop func()) {
	ch := make(chan struct{})
	go parkedForLeakcheck(ch)
	stop = sync.OnceFunc(func() { close(ch) })
	t.Cleanup(stop)
	return stop
}

func TestLeftNamesAGoroutineStillRunning(t *testing.T) {
	s := Take()
	stop := park(t)
	if left := s.Left(50 * time.Millisecond); len(left) != 1 || !strings.Contains(left[0], "parkedForLeakcheck") {
		t.Fatalf("Left with a goroutine still running: %q, want its stack", left)
	}
	stop()
	if left := s.Left(5 * time.Second); len(left) != 0 {
		t.Fatalf("Left once it ended: %q", left)
	}
}

func TestLeftLeavesOutTheSnapshotsAndTheIgnored(t *testing.T) {
	park(t)
	s := Take()
	if left := s.Left(10 * time.Millisecond); len(left) != 0 {
		t.Fatalf("Left of a goroutine running before the snapshot: %q", left)
	}
	park(t)
	if left := s.Left(10*time.Millisecond, "parkedForLeakcheck"); len(left) != 0 {
		t.Fatalf("Left of a goroutine it was told to leave out: %q", left)
	}
}

// A goroutine that ends a little after Left begins is waited for.
func TestLeftWaitsForAGoroutineThatIsEnding(t *testing.T) {
	s := Take()
	stop := park(t)
	time.AfterFunc(20*time.Millisecond, stop)
	if left := s.Left(10 * time.Second); len(left) != 0 {
		t.Fatalf("Left of a goroutine that ended within the timeout: %q", left)
	}
}
