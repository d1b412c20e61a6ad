package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/weirhq/weir/weirtype"
)

// Pauses keeps the queues, and the kinds within queues, whose jobs are not
// claimed: paused by an operator, held by a kind's open breaker, or held
// until a server's Retry-After. Claim obeys every pause the store holds,
// so that every process sees a pause at its next claim.
//
// Claim skips the waiting jobs of a queue or kind while a pause holds it:
// an operator's pause until Resume; a retry_after pause until its Until;
// a breaker pause until Complete completes its probe. At and after a
// breaker pause's Until, one claim takes one due job of the kind as the
// probe (the highest in claim order, in no queue or kind also held by
// another pause), and moves Until one open period on (the period the
// pause was recorded with), so that a probe that fails or never finishes
// is followed by the next one period later. Completing the probe ends
// the pause.
type Pauses interface {
	// Pause records, at now, the pause p and returns it. A pause of the
	// same queue, kind and cause is replaced, keeping its PausedAt while
	// it still held: an operator's gets p's By and Reason; a breaker's
	// gets p's Until and open period (Until − now); a retry_after pause
	// keeps the later of its Until and p's.
	Pause(ctx context.Context, now time.Time, p PauseParams) (*weirtype.Pause, error)

	// Resume ends the pauses of queue and kind (kind empty: those of the
	// whole queue) by cause, every cause when cause is empty, and returns
	// them. It returns an error wrapping ErrNotFound, changing nothing,
	// when there is none.
	Resume(ctx context.Context, queue, kind string, cause weirtype.PauseCause) ([]*weirtype.Pause, error)

	// ListPauses returns the pauses that hold at now (see Pause.Active),
	// by queue, kind and cause.
	ListPauses(ctx context.Context, now time.Time) ([]*weirtype.Pause, error)
}

// Limits of PauseParams.
const (
	// MaxPauseName bounds the length of a pause's queue, kind and By, in
	// bytes.
	MaxPauseName = 200
	// MaxPauseReason bounds the length of a pause's Reason, in bytes.
	MaxPauseReason = 1000
)

// PauseParams is a pause to record.
type PauseParams struct {
	// Queue is the queue paused. Required.
	Queue string
	// Kind is the kind paused within Queue; empty pauses the whole
	// queue. Required for a breaker or retry_after pause.
	Kind string
	// Cause is what pauses. Default operator.
	Cause weirtype.PauseCause
	// By and Reason say who paused and why, for operators.
	By, Reason string
	// Until is when a retry_after pause ends, or when a breaker pause
	// lets its first probe through: required, after now. Zero for an
	// operator's pause.
	Until time.Time
	// KnownKind says the caller knows Kind exists (a client that
	// registers it). Otherwise Pause refuses a kind of which Queue has no
	// job, in any state, with an error wrapping ErrNotFound: a name
	// mistyped would pause nothing.
	KnownKind bool
	// KnownQueue says the caller knows Queue exists (a client that works
	// it), for a pause of a whole queue. Otherwise Pause refuses a queue
	// that has no job, in any state, and no pause, with an error wrapping
	// ErrNotFound.
	KnownQueue bool
}

// Normalize returns p with its defaults, or an error wrapping ErrInvalid
// that names the bad field.
func (p PauseParams) Normalize(now time.Time) (PauseParams, error) {
	if p.Cause == "" {
		p.Cause = weirtype.PauseOperator
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"queue", p.Queue, MaxPauseName}, {"kind", p.Kind, MaxPauseName}, {"by", p.By, MaxPauseName}, {"reason", p.Reason, MaxPauseReason}} {
		if len(f.v) > f.max {
			return p, invalidf("pause: %s is %d bytes long, more than %d", f.name, len(f.v), f.max)
		}
		if !utf8.ValidString(f.v) {
			return p, invalidf("pause: %s is not valid UTF-8", f.name)
		}
	}
	switch {
	case CheckNow(now) != nil:
		return p, CheckNow(now)
	case p.Queue == "":
		return p, invalidf("pause: queue is empty")
	case !p.Cause.Valid():
		return p, invalidf("pause: cause %q is unknown: want operator, breaker or retry_after", p.Cause)
	case p.Cause == weirtype.PauseOperator && !p.Until.IsZero():
		return p, invalidf("pause: an operator's pause lasts until resumed: until must be zero, not %v", p.Until)
	case p.Cause != weirtype.PauseOperator && p.Kind == "":
		return p, invalidf("pause: a %s pause holds a kind: kind is empty", p.Cause)
	case p.Cause != weirtype.PauseOperator && !p.Until.After(now):
		return p, invalidf("pause: until %v is not after now %v", p.Until, now)
	}
	return p, nil
}

// NotPaused is the error, wrapping ErrNotFound, of a Resume that found no
// pause of queue and kind by cause.
func NotPaused(queue, kind string, cause weirtype.PauseCause) error {
	what := fmt.Sprintf("queue %q", queue)
	if kind != "" {
		what = fmt.Sprintf("kind %q of queue %q", kind, queue)
	}
	if cause != "" {
		return fmt.Errorf("%w: %s has no %s pause", ErrNotFound, what, cause)
	}
	return fmt.Errorf("%w: %s is not paused", ErrNotFound, what)
}

// SortPauses sorts ps by queue, kind and cause, as ListPauses returns
// them.
func SortPauses(ps []*weirtype.Pause) {
	slices.SortFunc(ps, func(a, b *weirtype.Pause) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Cause, b.Cause))
	})
}
