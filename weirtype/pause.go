package weirtype

import "time"

// PauseCause says what holds a paused queue or kind.
type PauseCause string

// The causes of a pause. A queue or kind may be held by several at once;
// its jobs are claimed again once none holds it.
const (
	// PauseOperator: an operator (or a program, through the Client)
	// paused it; it lasts until resumed.
	PauseOperator PauseCause = "operator"
	// PauseBreaker: the breaker of the kind is open. Until is when the
	// next probe may run: then one job of the kind is claimed as the
	// probe, the pause held another open period meanwhile; the probe's
	// success ends the pause.
	PauseBreaker PauseCause = "breaker"
	// PauseRetryAfter: a server answered a job of the kind, or of its
	// rate-limit key, with a Retry-After; the pause ends at Until.
	PauseRetryAfter PauseCause = "retry_after"
)

// Valid reports whether c is one of the causes.
func (c PauseCause) Valid() bool {
	switch c {
	case PauseOperator, PauseBreaker, PauseRetryAfter:
		return true
	}
	return false
}

// Pause is a queue, or a kind within a queue, whose waiting jobs are not
// claimed. Running jobs are not touched: they finish.
type Pause struct {
	Queue string
	// Kind is the kind paused within Queue; empty when the whole queue
	// is.
	Kind  string
	Cause PauseCause
	// By names who paused: the operator, the breaker, the rate-limit key.
	By string
	// Reason is the operator's, or the engine's, word on why.
	Reason string
	// PausedAt is when the pause began.
	PausedAt time.Time
	// Until is when a retry_after pause ends, or when a breaker pause
	// lets its next probe through; zero for an operator's pause, which
	// lasts until resumed.
	Until time.Time
}

// Active reports whether p holds its jobs at now: an operator's or a
// breaker's pause until it is ended, a retry_after pause until Until.
func (p *Pause) Active(now time.Time) bool {
	return p.Cause != PauseRetryAfter || p.Until.After(now)
}
