package schedule_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/weirhq/weir/schedule"
)

// cronModel is a cron expression drawn at random together with the values
// it selects, computed by the generator independently of the parser.
type cronModel struct {
	text                          string
	loc                           *time.Location
	minute, hour, dom, month, dow [64]bool
	domRestricted, dowRestricted  bool
}

// zones include half-hour and 45-minute offsets, half-hour changes (Lord
// Howe) and a change at midnight (São Paulo until 2019).
var zones = []string{"UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe",
	"Asia/Kolkata", "America/St_Johns", "Pacific/Chatham", "America/Sao_Paulo"}

type fieldSpec struct {
	min, max int // the range of "*"; day-of-week also takes 7
	names    []string
}

var (
	minuteSpec = fieldSpec{0, 59, nil}
	hourSpec   = fieldSpec{0, 23, nil}
	domSpec    = fieldSpec{1, 31, nil}
	monthSpec  = fieldSpec{1, 12, []string{"", "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}}
	dowSpec    = fieldSpec{0, 6, []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}}
)

// drawField draws one field: its text, and the values it selects.
func drawField(t *rapid.T, label string, f fieldSpec) (string, [64]bool) {
	var set [64]bool
	isDow := len(f.names) == 7
	render := func(v int, single bool) string {
		if isDow && single && v == 0 && rapid.Bool().Draw(t, label+" sunday as 7") {
			return "7"
		}
		if f.names != nil && v < len(f.names) && f.names[v] != "" && rapid.Bool().Draw(t, label+" by name") {
			name := f.names[v]
			if rapid.Bool().Draw(t, label+" upper") {
				name = strings.ToUpper(name)
			}
			return name
		}
		return strconv.Itoa(v)
	}
	value := func(name string) int { return rapid.IntRange(f.min, f.max).Draw(t, label+" "+name) }
	width := f.max - f.min + 1
	var items []string
	for range rapid.IntRange(1, 3).Draw(t, label+" items") {
		lo, hi, step := f.min, f.max, 1
		var item string
		switch rapid.IntRange(0, 9).Draw(t, label+" kind") {
		case 0, 1, 2, 3: // *
			item = "*"
		case 4: // */s
			step = rapid.IntRange(1, width).Draw(t, label+" step")
			item = "*/" + strconv.Itoa(step)
		case 5, 6: // n
			lo = value("n")
			hi = lo
			item = render(lo, true)
		case 7: // a-b
			lo = value("a")
			hi = rapid.IntRange(lo, f.max).Draw(t, label+" b")
			item = render(lo, false) + "-" + render(hi, false)
			if isDow && hi == 6 && rapid.Bool().Draw(t, label+" to 7") {
				hi = 7 // Sunday again, as in "5-7" or "0-7"
				item = render(lo, false) + "-7"
			}
		case 8: // a-b/s
			lo = value("a")
			hi = rapid.IntRange(lo, f.max).Draw(t, label+" b")
			step = rapid.IntRange(1, width).Draw(t, label+" step")
			item = strconv.Itoa(lo) + "-" + strconv.Itoa(hi) + "/" + strconv.Itoa(step)
		case 9: // a/s
			lo = value("a")
			step = rapid.IntRange(1, width).Draw(t, label+" step")
			item = strconv.Itoa(lo) + "/" + strconv.Itoa(step)
		}
		for v := lo; v <= hi; v += step {
			set[v] = true
		}
		items = append(items, item)
	}
	if isDow && set[7] {
		set[0], set[7] = true, false
	}
	return strings.Join(items, ","), set
}

func drawCron(t *rapid.T) cronModel {
	var m cronModel
	var fields [5]string
	fields[0], m.minute = drawField(t, "minute", minuteSpec)
	fields[1], m.hour = drawField(t, "hour", hourSpec)
	fields[2], m.dom = drawField(t, "dom", domSpec)
	fields[3], m.month = drawField(t, "month", monthSpec)
	fields[4], m.dow = drawField(t, "dow", dowSpec)
	m.domRestricted = !all(m.dom, 1, 31)
	m.dowRestricted = !all(m.dow, 0, 6)
	zone := rapid.SampledFrom(zones).Draw(t, "zone")
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	m.loc = loc
	m.text = strings.Join(fields[:], " ")
	if zone != "UTC" || rapid.Bool().Draw(t, "explicit UTC") {
		m.text = "CRON_TZ=" + zone + " " + m.text
	}
	return m
}

func all(set [64]bool, lo, hi int) bool {
	for v := lo; v <= hi; v++ {
		if !set[v] {
			return false
		}
	}
	return true
}

// matches reports whether the wall clock of t matches the model's fields.
func (m cronModel) matches(t time.Time) bool {
	w := t.In(m.loc)
	if w.Second() != 0 || w.Nanosecond() != 0 || !m.minute[w.Minute()] || !m.hour[w.Hour()] || !m.month[int(w.Month())] {
		return false
	}
	domOK, dowOK := m.dom[w.Day()], m.dow[int(w.Weekday())]
	if m.domRestricted && m.dowRestricted {
		return domOK || dowOK
	}
	return domOK && dowOK
}

// repeated reports whether the wall clock of t showed the same minute
// shortly before t, when the clock was set back.
func repeated(t time.Time, loc *time.Location) bool {
	w := t.In(loc).Format("2006-01-02 15:04")
	for _, d := range []time.Duration{15, 30, 45, 60, 90, 120} {
		if t.Add(-d*time.Minute).In(loc).Format("2006-01-02 15:04") == w {
			return true
		}
	}
	return false
}

// fires reports whether the model fires at t, per the package's rule.
func (m cronModel) fires(t time.Time) bool { return m.matches(t) && !repeated(t, m.loc) }

// neverFires reports whether the model's days never occur.
func (m cronModel) neverFires() bool {
	if !m.domRestricted || m.dowRestricted {
		return false
	}
	for month := 1; month <= 12; month++ {
		last := time.Date(2000, time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day()
		for d := 1; d <= last; d++ {
			if m.month[month] && m.dom[d] {
				return false
			}
		}
	}
	return true
}

// drawTime draws a time between 1990 and 2060, near a change of the
// zone's offset half of the time, in a random location.
func drawTime(t *rapid.T, label string, loc *time.Location) time.Time {
	sec := rapid.Int64Range(631152000, 2840140800).Draw(t, label+" unix")
	at := time.Unix(sec, int64(rapid.IntRange(0, 999_999_999).Draw(t, label+" nanos")))
	if rapid.Bool().Draw(t, label+" near a change") {
		if _, end := at.In(loc).ZoneBounds(); !end.IsZero() {
			at = end.Add(time.Duration(rapid.Int64Range(-3*3600, 3*3600).Draw(t, label+" offset")) * time.Second)
		}
	}
	return at.In(rapid.SampledFrom([]*time.Location{time.UTC, loc, time.FixedZone("X", -7*3600)}).Draw(t, label+" location"))
}

func TestPropertyCronNext(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		m := drawCron(t)
		s, err := schedule.Parse(m.text)
		if errors.Is(err, schedule.ErrNeverFires) {
			if !m.neverFires() {
				t.Fatalf("Parse(%q) says it never fires", m.text)
			}
			t.Skip("never fires")
		}
		if err != nil {
			t.Fatalf("Parse(%q): %v", m.text, err)
		}
		if m.neverFires() {
			t.Fatalf("Parse(%q) accepted an expression that never fires", m.text)
		}
		at := drawTime(t, "at", m.loc)
		next := s.Next(at)
		if next.IsZero() {
			t.Fatalf("%q: Next(%v) = zero", m.text, at)
		}
		if !next.After(at) {
			t.Fatalf("%q: Next(%v) = %v, not after it", m.text, at, next)
		}
		if next.Location().String() != m.loc.String() {
			t.Fatalf("%q: Next in %v, want %v", m.text, next.Location(), m.loc)
		}
		if !m.fires(next) {
			t.Fatalf("%q: Next(%v) = %v, which does not match the expression", m.text, at, next)
		}
		// Nothing fires in between, checked minute by minute when the gap
		// is short enough.
		if next.Sub(at) <= 48*time.Hour {
			for u := at.Truncate(time.Minute).Add(time.Minute); u.Before(next); u = u.Add(time.Minute) {
				if m.fires(u) {
					t.Fatalf("%q: Next(%v) = %v, but %v fires before", m.text, at, next, u.In(m.loc))
				}
			}
		}
		// Any time from at up to next has the same next tick; a later
		// time has a later or equal one.
		between := at.Add(time.Duration(rapid.Int64Range(0, int64(next.Sub(at))-1).Draw(t, "between")))
		if got := s.Next(between); !got.Equal(next) {
			t.Fatalf("%q: Next(%v) = %v, but Next(%v) = %v", m.text, at, next, between, got)
		}
		later := at.Add(time.Duration(rapid.Int64Range(0, int64(400*24*time.Hour)).Draw(t, "later")))
		if got := s.Next(later); got.Before(next) {
			t.Fatalf("%q: not monotonic: Next(%v) = %v, Next(%v) = %v", m.text, at, next, later, got)
		}
		// The next tick after a tick is strictly later and also fires.
		if after := s.Next(next); !after.After(next) || !m.fires(after) {
			t.Fatalf("%q: Next(%v) = %v", m.text, next, after)
		}
		// String parses back to the same schedule.
		again, err := schedule.Parse(s.String())
		if err != nil {
			t.Fatalf("Parse(String() = %q): %v", s.String(), err)
		}
		if got := again.Next(at); !got.Equal(next) {
			t.Fatalf("%q reparsed: Next(%v) = %v, want %v", s.String(), at, got, next)
		}
	})
}

func TestPropertyIntervalNext(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		p := rapid.Int64Range(1, 400*24*3600).Draw(t, "period seconds")
		s, err := schedule.Parse(fmt.Sprintf("every %ds", p))
		if err != nil {
			t.Fatal(err)
		}
		at := time.Unix(rapid.Int64Range(-1<<40, 1<<40).Draw(t, "unix"), int64(rapid.IntRange(0, 999_999_999).Draw(t, "nanos")))
		next := s.Next(at)
		if !next.After(at) || next.Sub(at) > time.Duration(p)*time.Second {
			t.Fatalf("every %ds: Next(%v) = %v", p, at, next)
		}
		if next.Unix()%p != 0 || next.Nanosecond() != 0 || next.Location() != time.UTC {
			t.Fatalf("every %ds: Next(%v) = %v is not aligned to the epoch", p, at, next)
		}
		later := at.Add(time.Duration(rapid.Int64Range(0, 1<<50).Draw(t, "later")))
		if s.Next(later).Before(next) {
			t.Fatalf("every %ds: not monotonic", p)
		}
		if again, _ := schedule.Parse(s.String()); !again.Next(at).Equal(next) {
			t.Fatalf("every %ds: String() = %q parses to another schedule", p, s.String())
		}
	})
}

func TestPropertyTicks(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		var s schedule.Schedule
		if rapid.Bool().Draw(t, "interval") {
			s = schedule.MustParse(fmt.Sprintf("every %ds", rapid.Int64Range(1, 7200).Draw(t, "period")))
		} else {
			m := drawCron(t)
			var err error
			if s, err = schedule.Parse(m.text); err != nil {
				t.Skip("never fires")
			}
		}
		loc := time.UTC
		if c, ok := s.(*schedule.Cron); ok {
			loc = c.Location()
		}
		from := drawTime(t, "from", loc)
		to := from.Add(time.Duration(rapid.Int64Range(-3600, 3*24*3600).Draw(t, "span")) * time.Second)
		ticks := schedule.Ticks(s, from, to)
		prev := from
		for i, tick := range ticks {
			if !tick.After(from) || tick.After(to) {
				t.Fatalf("%s: tick %d %v outside (%v, %v]", s, i, tick, from, to)
			}
			if want := s.Next(prev); !tick.Equal(want) {
				t.Fatalf("%s: tick %d = %v, want Next(%v) = %v", s, i, tick, prev, want)
			}
			prev = tick
		}
		if next := s.Next(prev); !next.IsZero() && !next.After(to) {
			t.Fatalf("%s: Ticks(%v, %v) stopped before %v", s, from, to, next)
		}
	})
}

// The zero Cron and the zero Interval never fire, and the zero Cron is in
// UTC.
func TestZeroSchedulesNeverFire(t *testing.T) {
	t.Parallel()
	for name, s := range map[string]schedule.Schedule{"Cron": &schedule.Cron{}, "Interval": schedule.Interval{}} {
		if got := s.Next(ref); !got.IsZero() {
			t.Errorf("zero %s: Next = %v, want the zero time", name, got)
		}
		if got := schedule.Ticks(s, ref, ref.AddDate(1, 0, 0)); len(got) != 0 {
			t.Errorf("zero %s: Ticks = %v, want none", name, got)
		}
	}
	var c schedule.Cron
	if got := c.Location(); got != time.UTC {
		t.Errorf("zero Cron: Location = %v, want UTC", got)
	}
}

// Next of any time, however far from now, is after it or the zero time.
func TestNextOfFarTimes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec string
		at   []time.Time
	}{
		{"CRON_TZ=Europe/Paris 0 0 29 2 *", []time.Time{
			time.Date(-200_000_000, 1, 1, 0, 0, 0, 0, time.UTC),
			time.Date(200_000_000, 1, 1, 0, 0, 0, 0, time.UTC),
			{},
		}},
		{"every 7s", []time.Time{
			{},
			time.Date(-1_000_000_000, 1, 1, 0, 0, 0, 0, time.UTC),
			time.Date(1_000_000_000, 1, 1, 0, 0, 0, 0, time.UTC),
			time.Unix(1<<62, 0),
			time.Unix(-1<<62, 0),
		}},
	} {
		s := schedule.MustParse(tc.spec)
		for _, at := range tc.at {
			if got := s.Next(at); !got.IsZero() && !got.After(at) {
				t.Errorf("%s: Next(%v) = %v, not after it", tc.spec, at, got)
			}
		}
	}
}
