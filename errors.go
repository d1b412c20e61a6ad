package weir

import (
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/internal/errtype"
)

// JobSnooze returns the error a worker returns to run its job again after
// d, without using an attempt and without recording an error. A negative d
// is taken as 0 (run again as soon as a worker is free).
func JobSnooze(d time.Duration) error {
	return &snoozeError{d: max(d, 0)}
}

type snoozeError struct{ d time.Duration }

func (e *snoozeError) Error() string { return fmt.Sprintf("weir: snooze for %v", e.d) }

// PanicError is the error of an attempt whose worker panicked: the client
// recovers the panic and treats it as a failed, retryable attempt.
type PanicError struct {
	// Value is what the worker passed to panic.
	Value any
	// Stack is the worker goroutine's stack at the panic.
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("weir: worker panicked: %v\n%s", e.Value, e.Stack)
}

// TimeoutError is the error of an attempt that ran past its kind's
// KindConfig.Timeout. It is also the cause (context.Cause) of the
// worker's context, which ends at the timeout.
type TimeoutError struct {
	// Timeout is the kind's per-attempt timeout.
	Timeout time.Duration
	// Err is what the worker returned once its context ended; nil in the
	// context's cause.
	Err error
}

func (e *TimeoutError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("weir: attempt timed out after %v", e.Timeout)
	}
	return fmt.Sprintf("weir: attempt timed out after %v: %v", e.Timeout, e.Err)
}

// Unwrap returns what the worker returned.
func (e *TimeoutError) Unwrap() error { return e.Err }

// DeadlineError is the cause (context.Cause) of a worker's context when its
// job's deadline (KindConfig.SLA, InsertOpts.DeadlineAt) passes during the
// attempt; an attempt that then fails abandons the job with reason
// deadline_exceeded, and one that succeeds anyway is stored as a late
// result.
type DeadlineError struct {
	DeadlineAt time.Time
}

func (e *DeadlineError) Error() string {
	return fmt.Sprintf("weir: the job's deadline %s passed", e.DeadlineAt.UTC().Format(time.RFC3339))
}

// The causes of a worker's context ending other than its timeout. They are
// not exported: a worker only needs to return; the client knows why.
var (
	errStopping  = errors.New("weir: the client is stopping")
	errCancelled = errors.New("weir: the job was cancelled")
)

// errStartAfterStop is Start's error once Stop has begun.
var errStartAfterStop = errors.New("weir: Start: the client was stopped")

// errorType is the Go type of err recorded with a failed attempt.
func errorType(err error) string { return errtype.Name(err) }
