package weir

import (
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// verdict is what the end of an attempt means for its job.
type verdict int

const (
	// verdictSuperseded: a later attempt runs the job; this one records
	// nothing.
	verdictSuperseded verdict = iota
	// verdictInterrupted: the attempt was stopped (the client stopping,
	// the job cancelled, its lease lost); it records nothing.
	verdictInterrupted
	// verdictComplete: the attempt succeeded; the job is completed.
	verdictComplete
	// verdictLate: the attempt succeeded after the job's deadline; the
	// success is kept as a late result.
	verdictLate
	// verdictSnooze: the job runs again at until, its attempt given back.
	verdictSnooze
	// verdictRetry: the attempt failed; the job runs again at until.
	verdictRetry
	// verdictAbandon: the attempt failed; the job goes to the dead-letter
	// store for reason.
	verdictAbandon
)

var verdictNames = [...]string{"superseded", "interrupted", "complete", "late", "snooze", "retry", "abandon"}

func (v verdict) String() string { return verdictNames[v] }

// attemptEnd is how an attempt of a job ended: what decide reads.
type attemptEnd struct {
	// err is what the worker returned.
	err error
	// cause is why the attempt's context ended (context.Cause), nil if it
	// had not.
	cause error
	// superseded is set when a later attempt of the job runs.
	superseded bool
	// now is when the attempt ended.
	now time.Time
	// jitter is a uniform number in [0, 1): the backoff's randomness.
	jitter float64
}

// decision is what to do about an attempt that ended.
type decision struct {
	verdict verdict
	// outcome is the attempt's outcome to count when it was interrupted
	// (weirtype.AttemptLeaseLost), empty when there is none to count.
	outcome weirtype.AttemptOutcome
	// until is when a snoozed or retried job runs again; delay how long
	// from the attempt's end that is.
	until time.Time
	delay time.Duration
	// reason is why an abandoned job is abandoned.
	reason weirtype.AbandonReason
	// failure is the error recorded for a failed attempt (retried or
	// abandoned).
	failure weirtype.AttemptError
	// err is the attempt's error, as the logs give it.
	err error
}

// decide says what the end of an attempt of j, a job of a kind with
// policy kc, means: it reads only its arguments, so that every rule of a
// job's life after an attempt is tested on its own. In order:
//
//   - a superseded attempt records nothing;
//   - a success completes the job, or is a late result past its
//     deadline;
//   - an attempt stopped by the client's shutdown or the job's cancel
//     records nothing, nor one whose lease was lost (counted as such);
//   - a snooze runs the job again after its delay;
//   - a failure (a timeout or the deadline's end of the attempt included)
//     abandons the job past its deadline (deadline_exceeded), when it is
//     marked permanent (non_retryable) or on its last attempt
//     (max_attempts_exceeded); otherwise the job is retried after the
//     kind's backoff raised to the error's retry-after hint in full,
//     unless the hint is longer than the kind's MaxRetryAfter
//     (retry_after_exceeds_limit) or the retry would start past the TTL
//     (ttl_exceeded) or the deadline (deadline_exceeded).
func decide(j *weirtype.Job, kc KindConfig, end attemptEnd) decision {
	now, err, cause := end.now, end.err, end.cause
	switch {
	case end.superseded:
		return decision{verdict: verdictSuperseded, outcome: weirtype.AttemptLeaseLost, err: err}
	case err == nil && pastDeadline(j, now):
		return decision{verdict: verdictLate}
	case err == nil:
		return decision{verdict: verdictComplete}
	}
	// Declared after the success's return: errors.As takes their
	// addresses, so each is allocated where it is declared.
	var (
		snooze   *snoozeError
		timeout  *TimeoutError
		deadline *DeadlineError
	)
	switch {
	case errors.Is(cause, errStopping) || errors.Is(cause, errCancelled):
		// A stopping client gives the job back; a cancelled job is final.
		return decision{verdict: verdictInterrupted, err: err}
	case errors.Is(cause, store.ErrLeaseLost):
		// A lost lease is someone else's now.
		return decision{verdict: verdictInterrupted, outcome: weirtype.AttemptLeaseLost, err: err}
	case errors.As(err, &snooze):
		return decision{verdict: verdictSnooze, until: now.Add(snooze.d), delay: snooze.d}
	case errors.As(cause, &timeout):
		err = &TimeoutError{Timeout: timeout.Timeout, Err: err}
	case errors.As(cause, &deadline):
		err = fmt.Errorf("%w: %w", deadline, err)
	}

	d := decision{
		verdict: verdictAbandon,
		err:     err,
		failure: weirtype.AttemptError{Attempt: j.Attempt, At: now, Message: err.Error(), Type: errorType(err)},
	}
	switch {
	case pastDeadline(j, now) || deadline != nil:
		d.reason = weirtype.AbandonDeadline
		d.failure.Type = weirtype.ErrorTypeDeadlineExceeded
		return d
	case retry.IsPermanent(err):
		d.reason = weirtype.AbandonPermanent
		return d
	case j.Attempt >= j.MaxAttempts:
		d.reason = weirtype.AbandonMaxAttempts
		return d
	}
	delay, hint := retryDelay(kc, j, err, end.jitter)
	retryAt := now.Add(delay)
	switch ttl := kc.TTL; {
	case hint > kc.MaxRetryAfter:
		// Retrying sooner would call before the server allows; waiting
		// that long is more than the kind allows.
		d.reason = weirtype.AbandonRetryAfterLimit
		d.failure.Message = fmt.Sprintf("weir: retry-after %v exceeds the kind's MaxRetryAfter of %v; abandoned rather than retried before the server allows: %s",
			hint, kc.MaxRetryAfter, d.failure.Message)
	case ttl > 0 && retryAt.After(ttlStart(j).Add(ttl)):
		d.reason = weirtype.AbandonTTL
	case pastDeadline(j, retryAt):
		d.reason = weirtype.AbandonDeadline
	default:
		d.verdict, d.until, d.delay = verdictRetry, retryAt, delay
	}
	return d
}

// pastDeadline reports whether j has a deadline and now is after it.
func pastDeadline(j *weirtype.Job, now time.Time) bool {
	return !j.DeadlineAt.IsZero() && now.After(j.DeadlineAt)
}

// ttlStart is when j's TTL started: when the job was made or, if an
// operator requeued it from the dead-letter store or retried it, at the
// latest requeue or retry.
func ttlStart(j *weirtype.Job) time.Time {
	for i := len(j.Errors) - 1; i >= 0; i-- {
		if t := j.Errors[i].Type; t == weirtype.ErrorTypeRequeued || t == weirtype.ErrorTypeRetried {
			return j.Errors[i].At
		}
	}
	return j.CreatedAt
}

// retryDelay is the wait before the retry after j's attempt failed with
// err: the kind's backoff for the attempt with jitter u (its previous
// delay read from the job: when this attempt was scheduled, less when the
// previous one failed), raised to err's retry-after hint, in full: the
// hint is a floor that neither the backoff's Cap nor its jitter lowers. It
// also returns the hint, 0 for none.
func retryDelay(kc KindConfig, j *weirtype.Job, err error, u float64) (delay, hint time.Duration) {
	var prev time.Duration
	if n := len(j.Errors); n > 0 && j.Errors[n-1].Attempt == j.Attempt-1 {
		prev = max(j.ScheduledAt.Sub(j.Errors[n-1].At), 0)
	}
	delay = kc.Backoff.Delay(j.Attempt, prev, u)
	if h, ok := retry.AfterHint(err); ok && h > 0 {
		hint = h
		delay = max(delay, h)
	}
	return delay, hint
}
