package schedule_test

import (
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/schedule"
)

// nextTicks returns the n ticks of spec after from, in RFC3339.
func nextTicks(t *testing.T, spec, from string, n int) []string {
	t.Helper()
	s, err := schedule.Parse(spec)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	at, err := time.Parse(time.RFC3339Nano, from)
	if err != nil {
		t.Fatalf("bad from %q: %v", from, err)
	}
	var got []string
	for range n {
		next := s.Next(at)
		if !next.After(at) {
			t.Fatalf("Next(%v) = %v, not after it", at, next)
		}
		got = append(got, next.Format(time.RFC3339))
		at = next
	}
	return got
}

type nextCase struct {
	name, spec, from string
	want             []string
}

func runNextCases(t *testing.T, tests []nextCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := nextTicks(t, tt.spec, tt.from, len(tt.want))
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("%q after %s:\n got %v\nwant %v", tt.spec, tt.from, got, tt.want)
			}
		})
	}
}

func TestNextMonthEnds(t *testing.T) {
	t.Parallel()
	runNextCases(t, []nextCase{
		{"31st skips the short months", "0 0 31 * *", "2024-01-31T00:00:00Z",
			[]string{"2024-03-31T00:00:00Z", "2024-05-31T00:00:00Z", "2024-07-31T00:00:00Z", "2024-08-31T00:00:00Z", "2024-10-31T00:00:00Z"}},
		{"30th skips February", "0 12 30 * *", "2023-01-30T12:00:00Z",
			[]string{"2023-03-30T12:00:00Z", "2023-04-30T12:00:00Z"}},
		{"last days of the month", "59 23 28-31 * *", "2023-02-27T00:00:00Z",
			[]string{"2023-02-28T23:59:00Z", "2023-03-28T23:59:00Z", "2023-03-29T23:59:00Z"}},
		{"first of the month across the year", "0 0 1 * *", "2023-12-31T23:59:59.999Z",
			[]string{"2024-01-01T00:00:00Z", "2024-02-01T00:00:00Z"}},
		{"new year from new year", "0 0 1 1 *", "2024-01-01T00:00:00Z",
			[]string{"2025-01-01T00:00:00Z", "2026-01-01T00:00:00Z"}},
		{"new year's eve", "0 0 31 12 *", "2024-12-31T00:00:01Z",
			[]string{"2025-12-31T00:00:00Z"}},
		{"last minute of the year", "59 23 31 12 *", "2024-12-31T23:58:59Z",
			[]string{"2024-12-31T23:59:00Z", "2025-12-31T23:59:00Z"}},
		{"every minute across a month end", "* * * * *", "2024-04-30T23:58:30Z",
			[]string{"2024-04-30T23:59:00Z", "2024-05-01T00:00:00Z", "2024-05-01T00:01:00Z"}},
		{"@monthly from mid-month", "@monthly", "2024-02-15T00:00:00Z",
			[]string{"2024-03-01T00:00:00Z", "2024-04-01T00:00:00Z"}},
		{"quarter starts", "0 6 1 */3 *", "2024-02-01T00:00:00Z",
			[]string{"2024-04-01T06:00:00Z", "2024-07-01T06:00:00Z", "2024-10-01T06:00:00Z", "2025-01-01T06:00:00Z"}},
	})
}

func TestNextLeapYears(t *testing.T) {
	t.Parallel()
	runNextCases(t, []nextCase{
		{"Feb 29 every four years", "0 0 29 2 *", "2023-03-01T00:00:00Z",
			[]string{"2024-02-29T00:00:00Z", "2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"2000 is a leap year", "0 0 29 2 *", "1999-01-01T00:00:00Z",
			[]string{"2000-02-29T00:00:00Z", "2004-02-29T00:00:00Z"}},
		{"2100 is not: eight years from 2096", "0 0 29 2 *", "2096-02-29T00:00:00Z",
			[]string{"2104-02-29T00:00:00Z"}},
		{"every day of February", "0 0 * 2 *", "2024-02-28T00:00:00Z",
			[]string{"2024-02-29T00:00:00Z", "2025-02-01T00:00:00Z"}},
		{"Feb 28 and 29", "0 0 28,29 FEB *", "2023-02-28T00:00:00Z",
			[]string{"2024-02-28T00:00:00Z", "2024-02-29T00:00:00Z", "2025-02-28T00:00:00Z"}},
		{"Feb 29 or a Monday of February", "0 0 29 2 MON", "2024-02-27T00:00:00Z",
			[]string{"2024-02-29T00:00:00Z", "2025-02-03T00:00:00Z"}},
		{"day 366 of a leap year", "0 0 31 12 *", "2024-12-30T12:00:00Z",
			[]string{"2024-12-31T00:00:00Z"}},
	})
}

func TestNextDayOfWeek(t *testing.T) {
	t.Parallel()
	runNextCases(t, []nextCase{
		// 2024-09-01 is a Sunday.
		{"13th or Friday", "0 0 13 * FRI", "2024-09-01T00:00:00Z",
			[]string{"2024-09-06T00:00:00Z", "2024-09-13T00:00:00Z", "2024-09-20T00:00:00Z", "2024-09-27T00:00:00Z",
				"2024-10-04T00:00:00Z", "2024-10-11T00:00:00Z", "2024-10-13T00:00:00Z", "2024-10-18T00:00:00Z"}},
		{"1-31 is not a restriction: Mondays only", "0 0 1-31 * MON", "2024-09-01T00:00:00Z",
			[]string{"2024-09-02T00:00:00Z", "2024-09-09T00:00:00Z"}},
		{"0-6 is not a restriction: the 15th only", "0 0 15 * 0-6", "2024-09-01T00:00:00Z",
			[]string{"2024-09-15T00:00:00Z", "2024-10-15T00:00:00Z"}},
		{"*/2 is a restriction: odd days or Mondays", "0 0 */2 * MON", "2024-09-01T00:00:00Z",
			[]string{"2024-09-02T00:00:00Z", "2024-09-03T00:00:00Z", "2024-09-05T00:00:00Z", "2024-09-07T00:00:00Z", "2024-09-09T00:00:00Z", "2024-09-11T00:00:00Z"}},
		{"7 is Sunday", "0 0 * * 7", "2024-09-02T00:00:00Z",
			[]string{"2024-09-08T00:00:00Z", "2024-09-15T00:00:00Z"}},
		{"SAT-SUN", "0 0 * * SAT-SUN", "2024-09-02T00:00:00Z",
			[]string{"2024-09-07T00:00:00Z", "2024-09-08T00:00:00Z", "2024-09-14T00:00:00Z"}},
		{"5-7 is Friday to Sunday", "0 0 * * 5-7", "2024-09-02T00:00:00Z",
			[]string{"2024-09-06T00:00:00Z", "2024-09-07T00:00:00Z", "2024-09-08T00:00:00Z", "2024-09-13T00:00:00Z"}},
		{"weekdays at 09:30", "30 9 * * MON-FRI", "2024-09-06T09:30:00Z",
			[]string{"2024-09-09T09:30:00Z", "2024-09-10T09:30:00Z"}},
		{"every other day of the week from Monday", "0 0 * * 1-7/2", "2024-09-02T00:00:00Z",
			[]string{"2024-09-04T00:00:00Z", "2024-09-06T00:00:00Z", "2024-09-08T00:00:00Z", "2024-09-09T00:00:00Z"}},
	})
}

// Europe/Paris in 2024: 02:00 CET becomes 03:00 CEST on March 31 at
// 01:00Z; 03:00 CEST becomes 02:00 CET on October 27 at 01:00Z.
func TestNextDSTEuropeParis(t *testing.T) {
	t.Parallel()
	runNextCases(t, []nextCase{
		{"skipped time does not fire that day", "daily at 02:30 in Europe/Paris", "2024-03-29T12:00:00Z",
			[]string{"2024-03-30T02:30:00+01:00", "2024-04-01T02:30:00+02:00", "2024-04-02T02:30:00+02:00"}},
		{"time just after the gap fires", "CRON_TZ=Europe/Paris 0 3 * * *", "2024-03-30T12:00:00Z",
			[]string{"2024-03-31T03:00:00+02:00", "2024-04-01T03:00:00+02:00"}},
		{"time just before the gap fires", "CRON_TZ=Europe/Paris 59 1 * * *", "2024-03-30T12:00:00Z",
			[]string{"2024-03-31T01:59:00+01:00", "2024-04-01T01:59:00+02:00"}},
		{"every half hour through the gap", "CRON_TZ=Europe/Paris */30 * * * *", "2024-03-31T00:15:00Z",
			[]string{"2024-03-31T01:30:00+01:00", "2024-03-31T03:00:00+02:00", "2024-03-31T03:30:00+02:00"}},
		{"repeated time fires once", "daily at 02:30 in Europe/Paris", "2024-10-26T12:00:00Z",
			[]string{"2024-10-27T02:30:00+02:00", "2024-10-28T02:30:00+01:00"}},
		{"every half hour pauses in the repeated hour", "CRON_TZ=Europe/Paris */30 * * * *", "2024-10-26T23:45:00Z",
			[]string{"2024-10-27T02:00:00+02:00", "2024-10-27T02:30:00+02:00", "2024-10-27T03:00:00+01:00", "2024-10-27T03:30:00+01:00"}},
		{"from the first pass of the repeated hour", "CRON_TZ=Europe/Paris 30 2 * * *", "2024-10-27T00:10:00Z",
			[]string{"2024-10-27T02:30:00+02:00", "2024-10-28T02:30:00+01:00"}},
		{"from the second pass of the repeated hour", "CRON_TZ=Europe/Paris 30 2 * * *", "2024-10-27T01:10:00Z",
			[]string{"2024-10-28T02:30:00+01:00"}},
		{"from the very instant the clock goes back", "CRON_TZ=Europe/Paris * * * * *", "2024-10-27T01:00:00Z",
			[]string{"2024-10-27T03:00:00+01:00", "2024-10-27T03:01:00+01:00"}},
		{"hourly across both changes", "hourly at :00 in Europe/Paris", "2024-10-26T23:30:00Z",
			[]string{"2024-10-27T02:00:00+02:00", "2024-10-27T03:00:00+01:00", "2024-10-27T04:00:00+01:00"}},
	})
}

// America/New_York in 2024: 02:00 EST becomes 03:00 EDT on March 10 at
// 07:00Z; 02:00 EDT becomes 01:00 EST on November 3 at 06:00Z.
func TestNextDSTAmericaNewYork(t *testing.T) {
	t.Parallel()
	runNextCases(t, []nextCase{
		{"skipped time does not fire that day", "CRON_TZ=America/New_York 30 2 * * *", "2024-03-09T12:00:00Z",
			[]string{"2024-03-11T02:30:00-04:00", "2024-03-12T02:30:00-04:00"}},
		{"every minute jumps the gap", "TZ=America/New_York * * * * *", "2024-03-10T06:58:30Z",
			[]string{"2024-03-10T01:59:00-05:00", "2024-03-10T03:00:00-04:00", "2024-03-10T03:01:00-04:00"}},
		{"repeated time fires once", "CRON_TZ=America/New_York 30 1 * * *", "2024-11-02T12:00:00Z",
			[]string{"2024-11-03T01:30:00-04:00", "2024-11-04T01:30:00-05:00"}},
		{"hourly skips the repeated hour", "CRON_TZ=America/New_York 0 * * * *", "2024-11-03T04:30:00Z",
			[]string{"2024-11-03T01:00:00-04:00", "2024-11-03T02:00:00-05:00", "2024-11-03T03:00:00-05:00"}},
		{"from the second pass of the repeated hour", "CRON_TZ=America/New_York 30 1 * * *", "2024-11-03T06:10:00Z",
			[]string{"2024-11-04T01:30:00-05:00"}},
		{"daily midnight is unaffected", "CRON_TZ=America/New_York @daily", "2024-11-02T12:00:00Z",
			[]string{"2024-11-03T00:00:00-04:00", "2024-11-04T00:00:00-05:00"}},
	})
}

func TestNextDSTOtherZones(t *testing.T) {
	t.Parallel()
	runNextCases(t, []nextCase{
		// Lord Howe Island moves its clock by half an hour: 02:00 (+11)
		// becomes 01:30 (+10:30) on 2024-04-07, and 02:00 (+10:30) becomes
		// 02:30 (+11) on 2024-10-06.
		{"Lord Howe repeated half hour", "CRON_TZ=Australia/Lord_Howe 45 1 * * *", "2024-04-06T12:00:00Z",
			[]string{"2024-04-07T01:45:00+11:00", "2024-04-08T01:45:00+10:30"}},
		{"Lord Howe skipped half hour", "CRON_TZ=Australia/Lord_Howe 15 2 * * *", "2024-10-05T12:00:00Z",
			[]string{"2024-10-07T02:15:00+11:00"}},
		// São Paulo moved its clock from 00:00 to 01:00 on 2018-11-04: that
		// day had no midnight.
		{"a day without midnight", "CRON_TZ=America/Sao_Paulo @daily", "2018-11-02T12:00:00Z",
			[]string{"2018-11-03T00:00:00-03:00", "2018-11-05T00:00:00-02:00"}},
		// Samoa skipped 2011-12-30 altogether, crossing the date line.
		{"a day that did not exist", "daily at 12:00 in Pacific/Apia", "2011-12-28T12:00:00Z",
			[]string{"2011-12-28T12:00:00-10:00", "2011-12-29T12:00:00-10:00", "2011-12-31T12:00:00+14:00"}},
	})
}

func TestNextIsInTheSchedulesLocation(t *testing.T) {
	t.Parallel()
	for spec, zone := range map[string]string{
		"0 0 * * *":                      "UTC",
		"daily at 02:00 in Europe/Paris": "Europe/Paris",
		"CRON_TZ=Asia/Tokyo @hourly":     "Asia/Tokyo",
		"every 15m":                      "UTC",
	} {
		s := schedule.MustParse(spec)
		la, _ := time.LoadLocation("America/Los_Angeles")
		if got := s.Next(ref.In(la)).Location().String(); got != zone {
			t.Errorf("%q: Next in %s, want %s", spec, got, zone)
		}
	}
	if got := schedule.MustParse("CRON_TZ=Asia/Tokyo @daily").(*schedule.Cron).Location().String(); got != "Asia/Tokyo" {
		t.Errorf("Location() = %s, want Asia/Tokyo", got)
	}
}

// Before the Unix epoch and far ahead, within the supported years.
// (TestNextOfFarTimes checks times beyond them.)
func TestCronNextWithinTheSupportedYears(t *testing.T) {
	t.Parallel()
	s := schedule.MustParse("CRON_TZ=Europe/Paris 0 0 29 2 *")
	for _, tt := range []struct{ from, want string }{
		{"1900-01-01T00:00:00Z", "1904-02-29T00:00:00+00:09"},
		{"9999-03-01T00:00:00Z", "10000-02-29T00:00:00+01:00"},
	} {
		from, _ := time.Parse(time.RFC3339, tt.from)
		if got := s.Next(from).Format(time.RFC3339); got != tt.want {
			t.Errorf("Next(%s) = %s, want %s", tt.from, got, tt.want)
		}
	}
}

func TestTicks(t *testing.T) {
	t.Parallel()
	s := schedule.MustParse("every 15m")
	from := time.Date(2024, 5, 15, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		from, to time.Time
		want     []string
	}{
		{"excludes from, includes to", from, from.Add(45 * time.Minute),
			[]string{"10:15", "10:30", "10:45"}},
		{"between ticks", from.Add(time.Minute), from.Add(44 * time.Minute),
			[]string{"10:15", "10:30"}},
		{"empty range", from, from, nil},
		{"reversed range", from.Add(time.Hour), from, nil},
		{"no tick in range", from.Add(time.Second), from.Add(14 * time.Minute), nil},
	}
	for _, tt := range tests {
		var got []string
		for _, tick := range schedule.Ticks(s, tt.from, tt.to) {
			got = append(got, tick.Format("15:04"))
		}
		if strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("%s: Ticks = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// stuck is a faulty Schedule whose Next does not advance.
type stuck struct{ at time.Time }

func (s stuck) Next(time.Time) time.Time { return s.at }
func (s stuck) String() string           { return "stuck" }

func TestTicksStopsOnAScheduleThatDoesNotAdvance(t *testing.T) {
	t.Parallel()
	got := schedule.Ticks(stuck{ref}, ref.Add(-time.Hour), ref.Add(time.Hour))
	if len(got) != 1 || !got[0].Equal(ref) {
		t.Errorf("Ticks = %v, want [%v]", got, ref)
	}
}
