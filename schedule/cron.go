package schedule

import (
	"fmt"
	"math/bits"
	"strings"
	"time"
)

// Cron is a schedule of wall-clock times in a location: a cron expression,
// a daily or hourly schedule, or an @ descriptor. It fires at the first
// instant at which the wall clock of its location shows a matching minute;
// see the package documentation for daylight-saving changes.
//
// The zero Cron never fires.
type Cron struct {
	minute uint64 // bits 0-59
	hour   uint64 // bits 0-23
	dom    uint64 // bits 1-31
	month  uint64 // bits 1-12
	dow    uint64 // bits 0-6, Sunday = 0
	// either is set when both day fields are restricted: a day that
	// matches either of them fires.
	either bool
	loc    *time.Location
	spec   string
}

var _ Schedule = (*Cron)(nil)

// searchYears bounds the search of Next. The longest gap between the ticks
// of a valid expression is eight years: February 29 from 2096 to 2104.
const searchYears = 10

// maxYear bounds the years that Next accepts, far from the overflow of
// time.Time arithmetic.
const maxYear = 100_000_000

const (
	allMinutes = 1<<60 - 1
	allHours   = 1<<24 - 1
	allDoms    = 1<<32 - 2   // 1-31
	allMonths  = 1<<13 - 2   // 1-12
	allDows    = 1<<7 - 1    // 0-6
	sundayBit7 = 1<<7 | 1<<0 // 7 and 0 are both Sunday
)

func newCron(minute, hour, dom, month, dow uint64, loc *time.Location, spec string) *Cron {
	return &Cron{
		minute: minute, hour: hour, dom: dom, month: month, dow: dow,
		either: dom != allDoms && dow != allDows,
		loc:    loc,
		spec:   spec,
	}
}

// String returns the spec in a normal form: single spaces, keywords in
// lower case, a zone prefix written "CRON_TZ=".
func (c *Cron) String() string { return c.spec }

// Location returns the location whose wall clock the schedule follows.
func (c *Cron) Location() *time.Location {
	if c.loc == nil {
		return time.UTC
	}
	return c.loc
}

// Next returns the first tick strictly after after, in the schedule's
// location, or the zero time if there is none in the next ten years (or
// after lies beyond a hundred million years from year 0).
func (c *Cron) Next(after time.Time) time.Time {
	if c.minute == 0 || c.hour == 0 || c.dom == 0 || c.month == 0 || c.dow == 0 {
		return time.Time{}
	}
	loc := c.Location()
	a := after.In(loc)
	y, mo, d := a.Date()
	if y < -maxYear || y > maxYear {
		return time.Time{}
	}
	h, mi, _ := a.Clock()
	// Start at the minute that contains after: its first instant may still
	// lie after after when the clock was just set back. Every tick is a
	// whole second, so a tick is after after when it is after its floor.
	at := civil{y, int(mo), d, h, mi}
	floor := after.Unix()
	limit := y + searchYears
	for {
		var ok bool
		if at, ok = c.match(at, limit); !ok {
			return time.Time{}
		}
		// A minute the clock skips has no instant; one that it shows
		// twice fires at the first. Either way, one earlier than after
		// is not a tick after after, and the next minute is tried.
		if u, ok := firstInstant(at, loc); ok && u > floor {
			return time.Unix(u, 0).In(loc)
		}
		at = at.addMinute()
	}
}

// civil is a wall-clock minute, without a location. Its day may run past
// the end of the month; match carries it into the next month.
type civil struct{ y, m, d, h, mi int }

func (c civil) addMinute() civil {
	c.mi++
	if c.mi == 60 {
		c.mi, c.h = 0, c.h+1
		if c.h == 24 {
			c.h, c.d = 0, c.d+1
		}
	}
	return c
}

// match returns the first minute at or after at that matches the fields,
// in a year up to limit.
func (c *Cron) match(at civil, limit int) (civil, bool) {
	y, m, d, h, mi := at.y, at.m, at.d, at.h, at.mi
	for y <= limit {
		if c.month&(1<<m) == 0 || d > daysIn(y, m) {
			if m++; m > 12 {
				m, y = 1, y+1
			}
			d, h, mi = 1, 0, 0
			continue
		}
		if !c.dayMatches(y, m, d) {
			d, h, mi = d+1, 0, 0
			continue
		}
		nh, ok := nextBit(c.hour, h)
		if !ok {
			d, h, mi = d+1, 0, 0
			continue
		}
		if nh != h {
			h, mi = nh, 0
		}
		nm, ok := nextBit(c.minute, mi)
		if !ok {
			if h, mi = h+1, 0; h == 24 {
				d, h = d+1, 0
			}
			continue
		}
		return civil{y, m, d, h, nm}, true
	}
	return civil{}, false
}

func (c *Cron) dayMatches(y, m, d int) bool {
	wd := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC).Weekday()
	domOK := c.dom&(1<<d) != 0
	dowOK := c.dow&(1<<wd) != 0
	if c.either {
		return domOK || dowOK
	}
	return domOK && dowOK
}

// nextBit returns the lowest set bit of set at or above from.
func nextBit(set uint64, from int) (int, bool) {
	set &^= 1<<from - 1
	if set == 0 {
		return 0, false
	}
	return bits.TrailingZeros64(set), true
}

func daysIn(y, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// zoneWindow exceeds the largest UTC offset of any zone, past or present
// (about 15h56m), so every instant whose wall clock shows a given time lies
// within zoneWindow of that time read as UTC.
const zoneWindow = 18 * 3600

// firstInstant returns the first instant, in Unix seconds, at which the
// wall clock of loc shows the minute at, and false if it never does (the
// clock skips it). It does not rely on time.Date, which leaves the choice
// of instant unspecified for a repeated or skipped time: it tries the
// offset of every zone period around the time and keeps the earliest
// instant that reads back as the time.
func firstInstant(at civil, loc *time.Location) (int64, bool) {
	u0 := time.Date(at.y, time.Month(at.m), at.d, at.h, at.mi, 0, 0, time.UTC).Unix()
	if loc == time.UTC {
		return u0, true
	}
	var best int64
	found := false
	t := time.Unix(u0-zoneWindow, 0).In(loc)
	for range 16 { // zone periods in the window; real zones have one or two
		_, off := t.Zone()
		u := u0 - int64(off)
		if _, back := time.Unix(u, 0).In(loc).Zone(); back == off && (!found || u < best) {
			best, found = u, true
		}
		_, end := t.ZoneBounds()
		if end.IsZero() || end.Unix() > u0+zoneWindow {
			break
		}
		t = end
	}
	return best, found
}

// field describes one field of a cron expression.
type field struct {
	name     string
	min, max int      // values accepted
	starMax  int      // the last value that "*" covers
	names    []string // names[v] names the value v, if the field has names
}

var (
	minuteField = field{name: "minute", min: 0, max: 59, starMax: 59}
	hourField   = field{name: "hour", min: 0, max: 23, starMax: 23}
	domField    = field{name: "day-of-month", min: 1, max: 31, starMax: 31}
	monthField  = field{name: "month", min: 1, max: 12, starMax: 12, names: []string{
		"", "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}}
	dowField = field{name: "day-of-week", min: 0, max: 7, starMax: 6, names: []string{
		"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}}
)

var descriptors = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// parseCron parses five cron fields or an @ descriptor, in loc; zone is the
// zone's name as written in a CRON_TZ= prefix, or empty.
func parseCron(words []string, loc *time.Location, zone string) (Schedule, *partError) {
	var fields []string
	var text string
	if strings.HasPrefix(words[0], "@") {
		name := strings.ToLower(words[0])
		exp, ok := descriptors[name]
		if !ok {
			return nil, errorf(words[0], "unknown descriptor %s; want @yearly, @monthly, @weekly, @daily, @hourly or @every", words[0])
		}
		if len(words) > 1 {
			return nil, errorf(words[1], "unexpected %q after %s", words[1], name)
		}
		fields, text = strings.Fields(exp), name
	} else {
		if len(words) != 5 {
			got := fmt.Sprintf("%d words", len(words))
			if len(words) == 1 {
				got = fmt.Sprintf("%q", words[0])
			}
			return nil, errorf("", "want an interval (\"every 15m\"), \"daily at HH:MM\", \"hourly at :MM\" "+
				"or 5 cron fields (minute hour day-of-month month day-of-week), got %s", got)
		}
		fields, text = words, strings.Join(words, " ")
	}
	var sets [5]uint64
	for i, f := range []field{minuteField, hourField, domField, monthField, dowField} {
		set, err := parseField(fields[i], f)
		if err != nil {
			return nil, err
		}
		sets[i] = set
	}
	if sets[4]&sundayBit7 != 0 {
		sets[4] = sets[4]&^sundayBit7 | 1
	}
	if err := checkFires(sets[2], sets[3], sets[4], fields); err != nil {
		return nil, err
	}
	if zone != "" {
		text = "CRON_TZ=" + zone + " " + text
	}
	return newCron(sets[0], sets[1], sets[2], sets[3], sets[4], loc, text), nil
}

// checkFires refuses the expressions whose days never occur, such as
// "0 0 30 2 *": a restricted day of the month, an unrestricted day of the
// week (the days are the days of the month then), and no selected month
// that has any of the selected days. It is exact but for the ticks that a
// daylight-saving change skips.
func checkFires(dom, month, dow uint64, fields []string) *partError {
	if dom == allDoms || dow != allDows {
		return nil
	}
	for m := 1; m <= 12; m++ {
		maxDay := daysIn(2000, m) // a leap year: February 29 fires
		if month&(1<<m) != 0 && dom&(1<<(maxDay+1)-1) != 0 {
			return nil
		}
	}
	return &partError{
		part:   fields[2],
		reason: fmt.Sprintf("never fires: day-of-month %s does not occur in month %s", fields[2], fields[3]),
		err:    ErrNeverFires,
	}
}

// parseField parses one cron field: a comma-separated list of *, n, a-b,
// */s, a-b/s and a/s (a to the end, by s).
func parseField(text string, f field) (uint64, *partError) {
	var set uint64
	for item := range strings.SplitSeq(text, ",") {
		if item == "" {
			return 0, errorf(text, "%s %q has an empty list item", f.name, text)
		}
		span, stepText, hasStep := strings.Cut(item, "/")
		var lo, hi int
		if span == "*" {
			lo, hi = f.min, f.starMax
		} else {
			first, last, isRange := strings.Cut(span, "-")
			var err *partError
			if lo, err = f.value(first, item); err != nil {
				return 0, err
			}
			switch {
			case isRange:
				if hi, err = f.value(last, item); err != nil {
					return 0, err
				}
				if f.name == dowField.name && hi == 0 && lo > 0 {
					hi = 7 // SAT-SUN
				}
				if hi < lo {
					return 0, errorf(item, "%s range %s is backwards", f.name, span)
				}
			case hasStep:
				hi = max(lo, f.starMax)
			default:
				hi = lo
			}
		}
		step := 1
		if hasStep {
			n, ok := parseCount(stepText)
			if !ok {
				return 0, errorf(item, "%s step %q is not a number", f.name, stepText)
			}
			if width := f.starMax - f.min + 1; n < 1 || n > int64(width) {
				return 0, errorf(item, "%s step %s out of range 1-%d", f.name, stepText, width)
			}
			step = int(n)
		}
		for v := lo; v <= hi; v += step {
			set |= 1 << v
		}
	}
	return set, nil
}

// value parses a number or a name of the field; item is the list item it
// comes from, for the error.
func (f field) value(s, item string) (int, *partError) {
	if n, ok := parseCount(s); ok {
		if n < int64(f.min) || n > int64(f.max) {
			return 0, errorf(s, "%s %s out of range %d-%d", f.name, s, f.min, f.max)
		}
		return int(n), nil
	}
	for v, name := range f.names {
		if name != "" && strings.EqualFold(s, name) {
			return v, nil
		}
	}
	if s == "" {
		return 0, errorf(item, "%s %q is missing a number", f.name, item)
	}
	if f.names != nil {
		return 0, errorf(s, "%s %q is neither a number nor a name such as %s", f.name, s, f.names[1])
	}
	return 0, errorf(s, "%s %q is not a number", f.name, s)
}

// parseDaily parses "daily at HH:MM [in Zone]", from words[i] on ("at");
// the words before are "daily" or "every day".
func parseDaily(words []string, i int) (Schedule, *partError) {
	lead := strings.Join(words[:i], " ")
	if len(words) < i+2 || !strings.EqualFold(words[i], "at") {
		return nil, errorf(lead, "want %q, such as \"daily at 02:00\"", strings.ToLower(lead)+" at HH:MM")
	}
	clock := words[i+1]
	hText, mText, ok := strings.Cut(clock, ":")
	h, hOK := parseCount(hText)
	m, mOK := parseCount(mText)
	if !ok || !hOK || !mOK || len(hText) > 2 || len(mText) != 2 {
		return nil, errorf(clock, "time %q is not HH:MM", clock)
	}
	if h > 23 {
		return nil, errorf(hText, "hour %s out of range 0-23", hText)
	}
	if m > 59 {
		return nil, errorf(mText, "minute %s out of range 0-59", mText)
	}
	loc, zone, err := parseIn(words[i+2:])
	if err != nil {
		return nil, err
	}
	spec := fmt.Sprintf("daily at %02d:%02d", h, m) + zone
	return newCron(1<<m, 1<<h, allDoms, allMonths, allDows, loc, spec), nil
}

// parseHourly parses "hourly at :MM [in Zone]".
func parseHourly(words []string) (Schedule, *partError) {
	if len(words) < 3 || !strings.EqualFold(words[1], "at") {
		return nil, errorf(words[0], "want \"hourly at :MM\", such as \"hourly at :15\"")
	}
	mText, ok := strings.CutPrefix(words[2], ":")
	m, mOK := parseCount(mText)
	if !ok || !mOK || len(mText) > 2 {
		return nil, errorf(words[2], "minute %q is not :MM, such as \":15\"", words[2])
	}
	if m > 59 {
		return nil, errorf(mText, "minute %s out of range 0-59", mText)
	}
	loc, zone, err := parseIn(words[3:])
	if err != nil {
		return nil, err
	}
	spec := fmt.Sprintf("hourly at :%02d", m) + zone
	return newCron(1<<m, allHours, allDoms, allMonths, allDows, loc, spec), nil
}

// parseIn parses an optional "in Zone" suffix. It returns the location and
// the suffix as String writes it.
func parseIn(rest []string) (*time.Location, string, *partError) {
	switch {
	case len(rest) == 0:
		return time.UTC, "", nil
	case !strings.EqualFold(rest[0], "in"):
		return nil, "", errorf(rest[0], "unexpected %q; want \"in\" and a time zone", rest[0])
	case len(rest) == 1:
		return nil, "", errorf(rest[0], "%q needs a time zone, such as \"in Europe/Paris\"", rest[0])
	case len(rest) > 2:
		return nil, "", errorf(rest[2], "unexpected %q after the time zone", rest[2])
	}
	loc, err := loadLocation(rest[1])
	if err != nil {
		return nil, "", err
	}
	return loc, " in " + rest[1], nil
}
