package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Schedule is a periodic schedule: the instants at which a periodic job is
// due. Implementations are pure functions of their argument and safe for
// concurrent use.
type Schedule interface {
	// Next returns the first tick strictly after after, in the schedule's
	// location, or the zero time if the schedule has no tick in the
	// following ten years.
	Next(after time.Time) time.Time
	// String returns the schedule in a form that Parse accepts and that
	// parses to a schedule with the same ticks.
	String() string
}

// ErrInvalid is matched (with errors.Is) by every error that Parse returns.
var ErrInvalid = errors.New("invalid schedule")

// ErrNeverFires is the cause of the error Parse returns for a cron
// expression that can never fire, such as "0 0 30 2 *" (February 30).
var ErrNeverFires = errors.New("schedule never fires")

// ParseError describes a spec that Parse refused. It matches ErrInvalid and
// unwraps to its cause, if any.
type ParseError struct {
	// Spec is the spec given to Parse.
	Spec string
	// Part is the offending part of Spec, such as "25" or "Mars/Olympus";
	// empty when the spec as a whole is at fault.
	Part string
	// Reason says what is wrong, naming the part: "hour 25 out of range
	// 0-23".
	Reason string
	// Err is the cause: ErrNeverFires, the error of time.LoadLocation for
	// an unknown time zone, or nil.
	Err error
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("schedule %q: %s", e.Spec, e.Reason)
}

// Is reports whether target is ErrInvalid.
func (e *ParseError) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the cause, if any.
func (e *ParseError) Unwrap() error { return e.Err }

// partError is a parse error before the spec is attached to it.
type partError struct {
	part, reason string
	err          error
}

func (e *partError) Error() string { return e.reason }

func errorf(part string, format string, args ...any) *partError {
	return &partError{part: part, reason: fmt.Sprintf(format, args...)}
}

// Parse parses a schedule spec; the package documentation lists the syntax.
// It returns an Interval for the interval forms and a *Cron for all the
// others. A refused spec yields a *ParseError.
func Parse(spec string) (Schedule, error) {
	s, perr := parse(spec)
	if perr != nil {
		return nil, &ParseError{Spec: spec, Part: perr.part, Reason: perr.reason, Err: perr.err}
	}
	return s, nil
}

// MustParse is like Parse but panics if the spec is refused. It simplifies
// the declaration of schedules written in the program's source.
func MustParse(spec string) Schedule {
	s, err := Parse(spec)
	if err != nil {
		panic(err)
	}
	return s
}

func parse(spec string) (Schedule, *partError) {
	words := strings.Fields(spec)
	if len(words) == 0 {
		return nil, errorf("", "empty schedule")
	}
	first := words[0]
	if zone, ok := zonePrefix(first); ok {
		rest := words[1:]
		if len(rest) == 0 {
			return nil, errorf(first, "%s is not followed by a schedule", first)
		}
		switch {
		case strings.EqualFold(rest[0], "hourly"):
			return nil, errorf(first, "%s: write the zone as a suffix, \"hourly at :MM in %s\"", first, zone)
		case strings.EqualFold(rest[0], "every") && len(rest) > 1 && strings.EqualFold(rest[1], "day"),
			strings.EqualFold(rest[0], "daily"):
			return nil, errorf(first, "%s: write the zone as a suffix, \"daily at HH:MM in %s\"", first, zone)
		case strings.EqualFold(rest[0], "@every") || strings.EqualFold(rest[0], "every"):
			return nil, errorf(first, "%s: an interval is aligned to the Unix epoch and takes no time zone", first)
		}
		loc, err := loadLocation(zone)
		if err != nil {
			return nil, err
		}
		return parseCron(rest, loc, zone)
	}
	switch {
	case strings.HasPrefix(first, "@"):
		if strings.EqualFold(first, "@every") {
			return parseInterval(words)
		}
		return parseCron(words, time.UTC, "")
	case strings.EqualFold(first, "every"):
		if len(words) >= 2 && strings.EqualFold(words[1], "day") {
			return parseDaily(words, 2)
		}
		return parseInterval(words)
	case strings.EqualFold(first, "daily"):
		return parseDaily(words, 1)
	case strings.EqualFold(first, "hourly"):
		return parseHourly(words)
	}
	return parseCron(words, time.UTC, "")
}

// zonePrefix recognizes "CRON_TZ=zone" and "TZ=zone".
func zonePrefix(word string) (zone string, ok bool) {
	for _, p := range []string{"CRON_TZ=", "TZ="} {
		if len(word) >= len(p) && strings.EqualFold(word[:len(p)], p) {
			return word[len(p):], true
		}
	}
	return "", false
}

// loadLocation loads a named zone, refusing the names whose meaning depends
// on the machine: every process must compute the same ticks.
func loadLocation(name string) (*time.Location, *partError) {
	switch {
	case name == "":
		return nil, errorf(name, "empty time zone")
	case strings.EqualFold(name, "Local"):
		return nil, errorf(name, "time zone %q depends on the machine; name the zone, such as \"Europe/Paris\"", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, &partError{part: name, reason: fmt.Sprintf("unknown time zone %q", name), err: err}
	}
	return loc, nil
}

// Ticks returns the ticks of s in (from, to], in order: what a process that
// was down from from to to has missed. It is empty when to is not after
// from. The result has one element per tick, so the caller bounds the
// range: a day of "every 1s" is 86,400 ticks. Ticks stops early if s.Next
// fails to advance, so a faulty Schedule cannot make it loop forever.
func Ticks(s Schedule, from, to time.Time) []time.Time {
	var ticks []time.Time
	t := s.Next(from)
	for !t.IsZero() && !t.After(to) {
		ticks = append(ticks, t)
		next := s.Next(t)
		if !next.After(t) {
			break
		}
		t = next
	}
	return ticks
}
