package schedule

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Interval is a schedule that ticks every Duration, aligned to the Unix
// epoch: its ticks are the instants 1970-01-01T00:00:00Z + k×Duration for
// every integer k. Every process therefore computes the same ticks, however
// long it has been running. Ticks are in UTC.
//
// The zero Interval never fires.
type Interval struct {
	d time.Duration
}

var _ Schedule = Interval{}

// Every returns the interval schedule of period d, which must be a whole
// number of seconds, at least one.
func Every(d time.Duration) (Interval, error) {
	if err := checkInterval(d); err != nil {
		spec := "every " + d.String()
		return Interval{}, &ParseError{Spec: spec, Part: d.String(), Reason: err.reason}
	}
	return Interval{d: d}, nil
}

// Duration returns the period.
func (i Interval) Duration() time.Duration { return i.d }

// Next returns the first tick strictly after after, in UTC.
func (i Interval) Next(after time.Time) time.Time {
	if checkInterval(i.d) != nil {
		return time.Time{}
	}
	p := int64(i.d / time.Second)
	// after.Unix() is the floor of after in seconds, and ticks fall on
	// whole seconds, so the next tick after after is the next multiple of
	// p after after.Unix().
	q := floorDiv(after.Unix(), p) + 1
	if q > maxUnix/p || q < -maxUnix/p {
		return time.Time{}
	}
	return time.Unix(q*p, 0).UTC()
}

// maxUnix bounds the seconds handed to time.Unix, far beyond any real
// schedule and far from overflow.
const maxUnix = math.MaxInt64 / 4

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// String returns "every" and the period, such as "every 2h30m".
func (i Interval) String() string { return "every " + formatDuration(i.d) }

// formatDuration writes d as time.ParseDuration reads it, without the zero
// units that Duration.String adds: "2h30m" rather than "2h30m0s".
func formatDuration(d time.Duration) string {
	if d <= 0 || d%time.Second != 0 {
		return d.String()
	}
	s := int64(d / time.Second)
	h, m, sec := s/3600, s/60%60, s%60
	var b strings.Builder
	if h > 0 {
		b.WriteString(strconv.FormatInt(h, 10) + "h")
	}
	if m > 0 {
		b.WriteString(strconv.FormatInt(m, 10) + "m")
	}
	if sec > 0 {
		b.WriteString(strconv.FormatInt(sec, 10) + "s")
	}
	return b.String()
}

func checkInterval(d time.Duration) *partError {
	switch {
	case d < time.Second:
		return errorf(d.String(), "interval %v is under the minimum of 1s", d)
	case d%time.Second != 0:
		// Tick times go into idempotency keys at second precision.
		return errorf(d.String(), "interval %v is not a whole number of seconds", d)
	}
	return nil
}

var units = map[string]time.Duration{
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
}

// singular are the words of "every minute" and the like.
var singular = map[string]time.Duration{"second": time.Second, "minute": time.Minute, "hour": time.Hour}

// parseInterval parses "every N unit", "every unit", "every <duration>" and
// "@every <duration>"; words[0] is "every" or "@every".
func parseInterval(words []string) (Schedule, *partError) {
	if len(words) < 2 {
		return nil, errorf(words[0], "%s needs a period, such as \"%s 15m\"", words[0], words[0])
	}
	var d time.Duration
	arg := words[1]
	rest := words[2:]
	word := !strings.HasPrefix(words[0], "@") // "every", not "@every"
	if unit, ok := singular[strings.ToLower(arg)]; ok && word {
		d = unit
	} else if n, ok := parseCount(arg); ok && word {
		if len(rest) == 0 {
			return nil, errorf(arg, "interval %s has no unit, such as \"%s minutes\"", arg, arg)
		}
		unit, ok := units[strings.ToLower(rest[0])]
		if !ok {
			return nil, errorf(rest[0], "unknown unit %q; use seconds, minutes or hours (or a cron expression for days)", rest[0])
		}
		if n > int64(math.MaxInt64/unit) {
			return nil, errorf(arg, "interval %s %s is too long", arg, rest[0])
		}
		d = time.Duration(n) * unit
		rest = rest[1:]
	} else {
		var err error
		d, err = time.ParseDuration(arg)
		if err != nil {
			return nil, errorf(arg, "%q is not a duration such as \"15m\" or \"2h30m\"", arg)
		}
	}
	if len(rest) > 0 {
		return nil, errorf(rest[0], "unexpected %q after the interval", rest[0])
	}
	if err := checkInterval(d); err != nil {
		err.part = arg
		return nil, err
	}
	return Interval{d: d}, nil
}

// parseCount parses a whole number of up to 18 digits.
func parseCount(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
