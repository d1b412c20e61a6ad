package retry

import (
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/internal/redact"
)

// Reason is why a policy gave up.
type Reason string

// The reasons a policy gives up. The strings are stable: they are used as
// metric labels and stored with dead letters.
const (
	ReasonMaxAttempts     Reason = "max_attempts_exceeded"
	ReasonTTL             Reason = "ttl_exceeded"
	ReasonNonRetryable    Reason = "non_retryable"
	ReasonCancelled       Reason = "cancelled"
	ReasonBudgetExhausted Reason = "budget_exhausted"
	// ReasonRetryAfterExceedsLimit: the last error's retry-after hint
	// asked for a longer wait than Config.MaxRetryAfter allows.
	ReasonRetryAfterExceedsLimit Reason = "retry_after_exceeds_limit"
	// ReasonDeadline: the next wait would end after the caller's context
	// deadline, so the policy stopped instead of waiting to fail.
	ReasonDeadline Reason = "deadline_exceeded"
)

// ErrGaveUp matches every *Error with errors.Is.
var ErrGaveUp = errors.New("retry: gave up")

// Error is returned when a policy gives up. It unwraps to the last error the
// function returned.
type Error struct {
	// Reason is why the policy gave up.
	Reason Reason
	// Attempts is how many times the function ran.
	Attempts int
	// Elapsed is the time from the start of the first attempt to giving up.
	Elapsed time.Duration
	// Last is the last error the function returned; nil when the context
	// ended before the first attempt.
	Last error
	// Detail explains the reason in words, for example how far the next
	// wait would have passed the TTL.
	Detail string
	// RetryAfter and MaxRetryAfter, set with reason
	// retry_after_exceeds_limit, are the hint the last error carried and
	// the limit it passed.
	RetryAfter    time.Duration
	MaxRetryAfter time.Duration

	ctxErr error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("retry: gave up after %d attempt%s in %v (%s", e.Attempts, plural(e.Attempts), e.Elapsed.Round(time.Millisecond), e.Reason)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	msg += ")"
	if e.Last != nil {
		msg += ": " + e.Last.Error()
	}
	// The last error may quote what a server sent back, credentials
	// included.
	return redact.String(msg)
}

// Unwrap returns the last error the function returned.
func (e *Error) Unwrap() error { return e.Last }

// Is matches ErrGaveUp, and for a cancelled policy also the context's error
// (context.Canceled or context.DeadlineExceeded); reason deadline_exceeded
// matches context.DeadlineExceeded.
func (e *Error) Is(target error) bool {
	if target == ErrGaveUp {
		return true
	}
	return e.ctxErr != nil && errors.Is(e.ctxErr, target)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Permanent marks err as not worth retrying: a policy that sees it gives up
// at once with ReasonNonRetryable. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// IsPermanent reports whether err, or an error it wraps, was marked with
// Permanent or has a method `Permanent() bool` that returns true.
func IsPermanent(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() error   { return e.err }
func (e *permanentError) Permanent() bool { return true }

// After attaches a retry-after hint to err: the next attempt should not start
// sooner than d from now. A server's Retry-After header becomes such a hint.
// After(nil, d) is nil.
func After(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &afterError{err: err, d: d}
}

// AfterHint returns the retry-after hint attached to err, or an error it
// wraps, by After or by any error with a method `RetryAfter() time.Duration`.
func AfterHint(err error) (time.Duration, bool) {
	var h interface{ RetryAfter() time.Duration }
	if errors.As(err, &h) {
		return h.RetryAfter(), true
	}
	return 0, false
}

type afterError struct {
	err error
	d   time.Duration
}

func (e *afterError) Error() string             { return e.err.Error() }
func (e *afterError) Unwrap() error             { return e.err }
func (e *afterError) RetryAfter() time.Duration { return e.d }
