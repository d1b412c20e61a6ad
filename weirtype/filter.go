package weirtype

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// ErrInvalid is wrapped by the error of a call whose parameter is out of
// range; the error names the parameter. Package store's ErrInvalid is
// this same value, so errors.Is finds either.
var ErrInvalid = errors.New("store: invalid parameter")

// Invalidf returns an error wrapping ErrInvalid that names the bad
// parameter: "store: invalid parameter: " and the formatted text. Every
// check of a call's parameters, the store's and its drivers', makes its
// error with it, so that both drivers word a refusal alike.
func Invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// InsertResult is what one insert did, and the job it found or made.
type InsertResult struct {
	Job     *Job
	Outcome InsertOutcome
}

// Limits of JobFilter.Limit.
const (
	DefaultJobListLimit = 100
	MaxJobListLimit     = 1000
)

// JobFilter selects jobs to list. Zero fields match everything.
type JobFilter struct {
	// States, when not empty, keeps the jobs in one of them.
	States []State
	// Kinds, when not empty, keeps the jobs of one of them.
	Kinds []string
	// Queue, when set, keeps the jobs of that queue.
	Queue string
	// Before is a keyset cursor: only jobs with an id below it. 0 starts
	// from the newest job.
	Before int64
	// Limit is the most jobs returned. Default (0) 100
	// (DefaultJobListLimit); a larger one than 1000 (MaxJobListLimit) is
	// lowered to it; a negative one is ErrInvalid.
	Limit int
}

// Normalize returns f with its defaults filled in and its states and
// kinds each listed once, or an error wrapping ErrInvalid that names the
// bad field. Drivers call it before reading.
func (f JobFilter) Normalize() (JobFilter, error) {
	switch {
	case f.Limit < 0:
		return f, Invalidf("limit %d is negative", f.Limit)
	case f.Limit == 0:
		f.Limit = DefaultJobListLimit
	case f.Limit > MaxJobListLimit:
		f.Limit = MaxJobListLimit
	}
	if f.Before < 0 {
		return f, Invalidf("before %d is negative", f.Before)
	}
	var states []State
	for _, s := range f.States {
		if !s.Valid() {
			return f, Invalidf("state %q is unknown (want one of %v)", s, States())
		}
		if !slices.Contains(states, s) {
			states = append(states, s)
		}
	}
	f.States = states
	var kinds []string
	for _, k := range f.Kinds {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	f.Kinds = kinds
	return f, nil
}

// DeadLetterFilter selects dead letters. Zero fields match everything; a
// filter with no field set matches every dead letter.
type DeadLetterFilter struct {
	// IDs, when not nil, restricts to those dead letters: an empty,
	// non-nil IDs matches none, so that purging an empty selection
	// purges nothing.
	IDs []int64
	// JobID, when not 0, restricts to the dead letters of that job.
	JobID  int64
	Kind   string
	Queue  string
	Reason AbandonReason
	// FailedBefore and FailedAfter bound FailedAt (before: strictly
	// earlier; after: at or later).
	FailedBefore time.Time
	FailedAfter  time.Time
	// AfterID and Limit page through a listing: ids greater than AfterID,
	// at most Limit of them (0: no limit). Requeue and purge ignore them.
	AfterID int64
	Limit   int
}

// Validate returns an error wrapping ErrInvalid that names the first bad
// field of f: an unknown Reason, a negative JobID or Limit. Drivers call it
// before reading or writing.
func (f DeadLetterFilter) Validate() error {
	switch {
	case f.Reason != "" && !f.Reason.Valid():
		return Invalidf("filter abandon reason %q is unknown (want one of %v)", f.Reason, AbandonReasons())
	case f.JobID < 0:
		return Invalidf("filter job id %d is negative", f.JobID)
	case f.Limit < 0:
		return Invalidf("limit %d is negative", f.Limit)
	}
	return nil
}

// LateResultFilter selects late results. Zero fields match everything.
type LateResultFilter struct {
	JobID int64
	Kind  string
	// Pending restricts to the results not accepted yet.
	Pending bool
	// AfterID and Limit page: ids greater than AfterID, at most Limit of
	// them (0: no limit).
	AfterID int64
	Limit   int
}

// Validate returns an error wrapping ErrInvalid when f's Limit is
// negative.
func (f LateResultFilter) Validate() error {
	if f.Limit < 0 {
		return Invalidf("limit %d is negative", f.Limit)
	}
	return nil
}
