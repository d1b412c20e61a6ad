package weir

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// TestDecideCoversEveryEndOfAnAttempt: what each way an attempt can end
// means for its job, rule by rule, on a fixed clock and jitter.
func TestDecideCoversEveryEndOfAnAttempt(t *testing.T) {
	made := time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)
	now := made.Add(10 * time.Minute)
	boom := errors.New("boom")
	// The kind's policy: 1 s doubling to 60 s without jitter, so that the
	// backoff is exact; a 24 h MaxRetryAfter.
	kind := func(mod func(*KindConfig)) KindConfig {
		kc := KindConfig{Backoff: backoff.Exponential(time.Second, 2, time.Minute).WithJitter(backoff.JitterNone)}
		if mod != nil {
			mod(&kc)
		}
		kc, err := kc.normalized("k")
		if err != nil {
			t.Fatal(err)
		}
		return kc
	}
	job := func(mod func(*weirtype.Job)) *weirtype.Job {
		j := &weirtype.Job{ID: 7, Kind: "k", Queue: "q", Attempt: 3, MaxAttempts: 5, CreatedAt: made, ScheduledAt: made, AttemptedAt: now.Add(-time.Second)}
		if mod != nil {
			mod(j)
		}
		return j
	}
	withDeadline := func(d time.Time) func(*weirtype.Job) { return func(j *weirtype.Job) { j.DeadlineAt = d } }
	hinted := func(d time.Duration) error { return retry.After(boom, d) }
	lost := fmt.Errorf("weir: job 7: %w", store.ErrLeaseLost)

	cases := []struct {
		name string
		j    *weirtype.Job
		kc   KindConfig
		end  attemptEnd
		want decision
		// wantMessage, when set, is a part of the recorded error's message.
		wantMessage string
	}{
		{name: "success completes", j: job(nil), kc: kind(nil), end: attemptEnd{},
			want: decision{verdict: verdictComplete}},
		{name: "success at the deadline completes", j: job(withDeadline(now)), kc: kind(nil), end: attemptEnd{},
			want: decision{verdict: verdictComplete}},
		{name: "success past the deadline is late", j: job(withDeadline(now.Add(-time.Nanosecond))), kc: kind(nil), end: attemptEnd{},
			want: decision{verdict: verdictLate}},
		{name: "a superseded attempt records nothing, even a success", j: job(nil), kc: kind(nil), end: attemptEnd{superseded: true},
			want: decision{verdict: verdictSuperseded, outcome: weirtype.AttemptLeaseLost}},
		{name: "a stopping client records nothing", j: job(nil), kc: kind(nil), end: attemptEnd{err: boom, cause: errStopping},
			want: decision{verdict: verdictInterrupted, err: boom}},
		{name: "a cancelled job records nothing", j: job(nil), kc: kind(nil), end: attemptEnd{err: boom, cause: errCancelled},
			want: decision{verdict: verdictInterrupted, err: boom}},
		{name: "a lost lease records nothing but counts", j: job(nil), kc: kind(nil), end: attemptEnd{err: boom, cause: lost},
			want: decision{verdict: verdictInterrupted, outcome: weirtype.AttemptLeaseLost, err: boom}},
		{name: "a snooze runs the job again after it", j: job(nil), kc: kind(nil), end: attemptEnd{err: JobSnooze(5 * time.Minute)},
			want: decision{verdict: verdictSnooze, until: now.Add(5 * time.Minute), delay: 5 * time.Minute}},
		{name: "a snooze of no time runs the job again at once", j: job(nil), kc: kind(nil), end: attemptEnd{err: JobSnooze(-time.Minute)},
			want: decision{verdict: verdictSnooze, until: now}},
		{name: "a failure is retried after the backoff", j: job(nil), kc: kind(nil), end: attemptEnd{err: boom},
			want: retried(now, 4*time.Second, boom, "*errors.errorString")},
		{name: "a panic is a failure", j: job(nil), kc: kind(nil), end: attemptEnd{err: &PanicError{Value: "x"}},
			want: retried(now, 4*time.Second, &PanicError{Value: "x"}, "*weir.PanicError")},
		{name: "a timeout is a failure, retried", j: job(nil), kc: kind(nil),
			end:  attemptEnd{err: boom, cause: &TimeoutError{Timeout: time.Second}},
			want: retried(now, 4*time.Second, &TimeoutError{Timeout: time.Second, Err: boom}, "*weir.TimeoutError")},
		{name: "a permanent error abandons at once", j: job(nil), kc: kind(nil), end: attemptEnd{err: retry.Permanent(boom)},
			want: abandoned(weirtype.AbandonPermanent, retry.Permanent(boom), "*errors.errorString")},
		{name: "the last attempt abandons", j: job(func(j *weirtype.Job) { j.Attempt = 5 }), kc: kind(nil), end: attemptEnd{err: boom},
			want: abandoned(weirtype.AbandonMaxAttempts, boom, "*errors.errorString")},
		{name: "an attempt past the deadline abandons", j: job(withDeadline(now.Add(-time.Second))), kc: kind(nil), end: attemptEnd{err: boom},
			want: abandoned(weirtype.AbandonDeadline, boom, weirtype.ErrorTypeDeadlineExceeded)},
		{name: "an attempt ended by the deadline abandons", j: job(withDeadline(now)), kc: kind(nil),
			end:  attemptEnd{err: boom, cause: &DeadlineError{DeadlineAt: now}},
			want: abandoned(weirtype.AbandonDeadline, fmt.Errorf("%w: %w", &DeadlineError{DeadlineAt: now}, boom), weirtype.ErrorTypeDeadlineExceeded)},
		{name: "a retry past the deadline abandons", j: job(withDeadline(now.Add(3 * time.Second))), kc: kind(nil), end: attemptEnd{err: boom},
			want: abandoned(weirtype.AbandonDeadline, boom, "*errors.errorString")},
		{name: "a retry past the TTL abandons", j: job(nil), kc: kind(func(kc *KindConfig) { kc.TTL = 10*time.Minute + 3*time.Second }),
			end: attemptEnd{err: boom}, want: abandoned(weirtype.AbandonTTL, boom, "*errors.errorString")},
		{name: "the TTL starts again at a requeue", kc: kind(func(kc *KindConfig) { kc.TTL = 5 * time.Minute }), end: attemptEnd{err: boom},
			j: job(func(j *weirtype.Job) {
				j.Errors = []weirtype.AttemptError{{Type: weirtype.ErrorTypeRequeued, At: now.Add(-time.Minute)}}
			}),
			want: retried(now, 4*time.Second, boom, "*errors.errorString")},
		{name: "the previous delay is read from the job", kc: kind(func(kc *KindConfig) {
			kc.Backoff = backoff.Exponential(time.Second, 2, time.Minute).WithJitter(backoff.JitterDecorrelated)
		}), end: attemptEnd{err: boom, jitter: 0.5},
			j: job(func(j *weirtype.Job) {
				// Attempt 2 failed at made and was scheduled 10 s later:
				// decorrelated jitter waits from Base to 3 × 10 s.
				j.Errors = []weirtype.AttemptError{{Attempt: 2, At: made}}
				j.ScheduledAt = made.Add(10 * time.Second)
			}),
			want: retried(now, time.Second+(30*time.Second-time.Second)/2, boom, "*errors.errorString")},
		{name: "the jitter comes from the end", j: job(nil), end: attemptEnd{err: boom, jitter: 0.75},
			kc: kind(func(kc *KindConfig) {
				kc.Backoff = backoff.Exponential(time.Second, 2, time.Minute).WithJitter(backoff.JitterFull)
			}),
			want: retried(now, 3*time.Second, boom, "*errors.errorString")},
		{name: "a retry-after hint raises the delay", j: job(nil), kc: kind(nil), end: attemptEnd{err: hinted(10 * time.Second)},
			want: retried(now, 10*time.Second, hinted(10*time.Second), "*errors.errorString")},
		{name: "a retry-after hint below the backoff leaves it", j: job(nil), kc: kind(nil), end: attemptEnd{err: hinted(time.Second)},
			want: retried(now, 4*time.Second, hinted(time.Second), "*errors.errorString")},
		{name: "a retry-after hint past the backoff's cap is waited in full", j: job(nil), kc: kind(nil), end: attemptEnd{err: hinted(2 * time.Hour)},
			want: retried(now, 2*time.Hour, hinted(2*time.Hour), "*errors.errorString")},
		{name: "a retry-after hint of MaxRetryAfter is waited", j: job(nil), kc: kind(func(kc *KindConfig) { kc.MaxRetryAfter = time.Hour }),
			end: attemptEnd{err: hinted(time.Hour)}, want: retried(now, time.Hour, hinted(time.Hour), "*errors.errorString")},
		{name: "a retry-after hint past MaxRetryAfter abandons", j: job(nil), kc: kind(func(kc *KindConfig) { kc.MaxRetryAfter = time.Hour }),
			end:         attemptEnd{err: hinted(time.Hour + time.Second)},
			want:        abandoned(weirtype.AbandonRetryAfterLimit, hinted(time.Hour+time.Second), "*errors.errorString"),
			wantMessage: "retry-after 1h0m1s exceeds the kind's MaxRetryAfter of 1h0m0s"},
		{name: "a retry-after hint past the TTL abandons", j: job(nil), kc: kind(func(kc *KindConfig) { kc.TTL = time.Hour }),
			end: attemptEnd{err: hinted(time.Hour)}, want: abandoned(weirtype.AbandonTTL, hinted(time.Hour), "*errors.errorString")},
		{name: "a retry-after hint past the deadline abandons", j: job(withDeadline(now.Add(time.Hour))), kc: kind(nil),
			end: attemptEnd{err: hinted(2 * time.Hour)}, want: abandoned(weirtype.AbandonDeadline, hinted(2*time.Hour), "*errors.errorString")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.end.now = now
			got := decide(c.j, c.kc, c.end)
			if got.verdict != c.want.verdict || got.outcome != c.want.outcome || got.reason != c.want.reason ||
				!got.until.Equal(c.want.until) || got.delay != c.want.delay {
				t.Fatalf("decide = %v %q %q until %v (delay %v); want %v %q %q until %v (delay %v)",
					got.verdict, got.outcome, got.reason, got.until, got.delay,
					c.want.verdict, c.want.outcome, c.want.reason, c.want.until, c.want.delay)
			}
			if fmt.Sprint(got.err) != fmt.Sprint(c.want.err) {
				t.Fatalf("error %v, want %v", got.err, c.want.err)
			}
			if c.want.verdict != verdictRetry && c.want.verdict != verdictAbandon {
				return
			}
			f := got.failure
			if f.Attempt != c.j.Attempt || !f.At.Equal(now) || f.Type != c.want.failure.Type ||
				!strings.HasSuffix(f.Message, c.want.err.Error()) || !strings.Contains(f.Message, c.wantMessage) {
				t.Fatalf("recorded error %+v; want attempt %d at %v, type %q, message of %q with %q",
					f, c.j.Attempt, now, c.want.failure.Type, c.want.err, c.wantMessage)
			}
		})
	}
}

// retried is the decision to retry at now+delay after the failure err of
// type typ.
func retried(now time.Time, delay time.Duration, err error, typ string) decision {
	return decision{verdict: verdictRetry, until: now.Add(delay), delay: delay, err: err, failure: weirtype.AttemptError{Type: typ}}
}

// abandoned is the decision to abandon for reason after the failure err of
// type typ.
func abandoned(reason weirtype.AbandonReason, err error, typ string) decision {
	return decision{verdict: verdictAbandon, reason: reason, err: err, failure: weirtype.AttemptError{Type: typ}}
}
