package weir_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/weirtype"
)

// hinted is a worker whose attempts fail with the retry-after hint in the
// job's name (a Go duration) until succeed is set, recording when each
// attempt started.
type hinted struct {
	mu      sync.Mutex
	started []time.Time
	succeed bool
	now     func() time.Time
}

func (h *hinted) work(_ context.Context, j *weir.Job[task]) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.started = append(h.started, h.now())
	if h.succeed {
		return nil
	}
	d, err := time.ParseDuration(j.Args.Name)
	if err != nil {
		return retry.Permanent(err)
	}
	return retry.After(errors.New("429 too many requests"), d)
}

func (h *hinted) starts() []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.started...)
}

// A retry-after hint far longer than the backoff's cap is honoured in
// full: the job does not run again a moment before the hint has passed.
func TestRetryAfterLongerThanTheBackoffCapIsNeverCut(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		h := &hinted{}
		e := newEnvOn(t, open, weir.WorkFunc(h.work), weir.KindConfig{Backoff: backoff.Exponential(time.Second, 2, time.Minute)}, longLease)
		h.now = e.fc.Now
		e.start()
		id := e.insert(task{Name: "2h"}, nil).ID
		j := e.waitState(id, weirtype.StateScheduled, 1)
		failedAt := j.Errors[0].At
		if got := j.ScheduledAt.Sub(failedAt); got != 2*time.Hour {
			t.Fatalf("retry scheduled %v after the failure, want the hint's 2h (the backoff's cap is 1 min)", got)
		}
		h.mu.Lock()
		h.succeed = true
		h.mu.Unlock()
		// Up to a second before the hint passes, in steps the cap would have
		// let through many times over: no attempt.
		e.advanceUntil(5*time.Minute, func() bool { return !e.fc.Now().Before(failedAt.Add(2*time.Hour - 5*time.Minute)) })
		e.advance(failedAt.Add(2*time.Hour - time.Second).Sub(e.fc.Now()))
		if s := h.starts(); len(s) != 1 {
			t.Fatalf("the job ran again at %v, before its retry-after passed at %v", s[1], failedAt.Add(2*time.Hour))
		}
		e.advanceState(id, time.Second, weirtype.StateCompleted, 2)
		if s := h.starts(); len(s) != 2 || s[1].Before(failedAt.Add(2*time.Hour)) {
			t.Fatalf("attempts started at %v, want the second at or after %v", s, failedAt.Add(2*time.Hour))
		}
	})
}

// A hint the job cannot wait for abandons it at once, never after an early
// retry: one longer than the kind's MaxRetryAfter (24 h by default), one
// that would pass its TTL, one that would pass its deadline.
func TestRetryAfterBeyondWhatTheJobMayWaitAbandonsAtOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		for _, tc := range []struct {
			name   string
			kc     weir.KindConfig
			hint   string
			reason weirtype.AbandonReason
			msg    string
		}{
			{"past the default MaxRetryAfter", weir.KindConfig{}, "25h", weirtype.AbandonRetryAfterLimit, "exceeds the kind's MaxRetryAfter of 24h0m0s"},
			{"past a kind's MaxRetryAfter", weir.KindConfig{MaxRetryAfter: time.Hour}, "61m", weirtype.AbandonRetryAfterLimit, "exceeds the kind's MaxRetryAfter of 1h0m0s"},
			{"past the TTL", weir.KindConfig{TTL: time.Hour}, "2h", weirtype.AbandonTTL, "429 too many requests"},
			{"past the deadline", weir.KindConfig{SLA: time.Hour}, "2h", weirtype.AbandonDeadline, "429 too many requests"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				h := &hinted{}
				e := newEnvOn(t, open, weir.WorkFunc(h.work), tc.kc, nil)
				h.now = e.fc.Now
				e.start()
				id := e.insert(task{Name: tc.hint}, nil).ID
				j := e.waitState(id, weirtype.StateDead, 1)
				dl := e.deadLetter(id)
				if dl.Reason != tc.reason || !strings.Contains(dl.LastError, tc.msg) || !strings.Contains(dl.LastError, "429 too many requests") {
					t.Fatalf("dead letter: reason %s, last error %q; want %s, naming %q and the handler's error", dl.Reason, dl.LastError, tc.reason, tc.msg)
				}
				if s := h.starts(); len(s) != 1 || !j.FinalizedAt.Equal(t0) {
					t.Fatalf("attempts %v, finalized %v: want one attempt, abandoned at once (%v)", s, j.FinalizedAt, t0)
				}
			})
		}
		// A hint at the limit waits.
		h := &hinted{}
		e := newEnvOn(t, open, weir.WorkFunc(h.work), weir.KindConfig{MaxRetryAfter: time.Hour}, nil)
		h.now = e.fc.Now
		e.start()
		j := e.waitState(e.insert(task{Name: "1h"}, nil).ID, weirtype.StateScheduled, 1)
		if !j.ScheduledAt.Equal(t0.Add(time.Hour)) {
			t.Fatalf("a hint of exactly MaxRetryAfter: scheduled at %v, want %v", j.ScheduledAt, t0.Add(time.Hour))
		}
	})
}

func TestKindConfigRefusesANegativeMaxRetryAfter(t *testing.T) {
	err := weir.AddWorker(weir.NewWorkers(), weir.WorkFunc(func(context.Context, *weir.Job[task]) error { return nil }),
		weir.KindConfig{MaxRetryAfter: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "MaxRetryAfter") {
		t.Fatalf("AddWorker with a negative MaxRetryAfter: %v, want an error naming it", err)
	}
}
