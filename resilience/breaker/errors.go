package breaker

import (
	"errors"
	"fmt"
	"time"
)

// ErrOpen is matched by every error a breaker returns instead of making a
// call. Use errors.Is(err, ErrOpen) to tell a fast failure from the
// call's own error, and errors.As with an [*OpenError] for the details.
var ErrOpen = errors.New("circuit breaker is open")

// ErrInvalidConfig is wrapped by the error [New] returns for a bad [Config].
var ErrInvalidConfig = errors.New("invalid breaker config")

// OpenError is the error returned when the breaker refuses a call: it is
// open, or it is half-open and every probe slot is taken. It matches
// [ErrOpen] with errors.Is.
type OpenError struct {
	// Name is the breaker's name.
	Name string
	// State is Open or HalfOpen.
	State State
	// RetryIn is how long until the breaker admits its next probe. It is
	// zero when the breaker is half-open: the probes already admitted
	// decide what happens next.
	RetryIn time.Duration
}

var _ error = (*OpenError)(nil)

func (e *OpenError) Error() string {
	who := "circuit breaker"
	if e.Name != "" {
		who = fmt.Sprintf("circuit breaker %q", e.Name)
	}
	if e.State == HalfOpen {
		return who + " is half-open and all its probes are taken"
	}
	return fmt.Sprintf("%s is open: next probe in %v", who, e.RetryIn)
}

// Is reports whether target is [ErrOpen].
func (e *OpenError) Is(target error) bool { return target == ErrOpen }

// Permanent reports true. A retry policy (weir's retry package looks for
// this method) gives up at once on an open breaker instead of adding load
// to a dependency that is known to be down.
func (e *OpenError) Permanent() bool { return true }

// ignoredError marks an error the breaker must not count.
type ignoredError struct{ err error }

func (e *ignoredError) Error() string { return e.err.Error() }
func (e *ignoredError) Unwrap() error { return e.err }

// Ignore marks err as an error the breaker must neither count as a
// failure nor as a success, such as a validation error that says nothing
// about the health of the dependency. The result unwraps to err, so
// errors.Is and errors.As see through it. Ignore(nil) is nil.
func Ignore(err error) error {
	if err == nil {
		return nil
	}
	return &ignoredError{err: err}
}

// IsIgnored reports whether err, or any error it wraps, was marked with
// [Ignore].
func IsIgnored(err error) bool {
	_, ok := errors.AsType[*ignoredError](err)
	return ok
}
