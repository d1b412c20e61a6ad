// Package eventually waits, in tests, for something real to happen: a
// job to finish in another goroutine, a file to appear, a server to
// answer. It polls with a deadline, so a test that waits never sleeps a
// fixed time and never hangs past its bound. Tests of policies (backoff,
// breakers, leases) use the fake clock instead.
package eventually

import (
	"testing"
	"time"
)

// First and most time between two polls: polling starts fast, for what is
// nearly done, and slows down, so a long wait costs little CPU.
const (
	firstPoll = time.Millisecond
	maxPoll   = 50 * time.Millisecond
)

// True polls cond until it reports done, and fails t, naming what and
// cond's last word on why not, when timeout passes first. cond is called
// at least once.
func True(t testing.TB, what string, timeout time.Duration, cond func() (done bool, why string)) {
	t.Helper()
	if why, ok := Wait(timeout, cond); !ok {
		t.Fatalf("%s: not within %v: %s", what, timeout, why)
	}
}

// Wait polls cond until it reports done or timeout passes, and returns
// cond's last word and whether it was done. It is for a test that goes on
// after a wait that may fail, or that waits outside its own goroutine.
func Wait(timeout time.Duration, cond func() (done bool, why string)) (string, bool) {
	deadline := time.Now().Add(timeout)
	poll := firstPoll
	for {
		done, why := cond()
		if done {
			return why, true
		}
		if !time.Now().Before(deadline) {
			return why, false
		}
		time.Sleep(min(poll, time.Until(deadline)))
		poll = min(2*poll, maxPoll)
	}
}
