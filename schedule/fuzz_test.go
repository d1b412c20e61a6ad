package schedule_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/schedule"
)

// fuzzTimes are sample times around month ends, a leap day and the
// daylight-saving changes of Europe and North America.
var fuzzTimes = []time.Time{
	time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
	time.Date(2024, 2, 28, 23, 59, 59, 500, time.UTC),
	time.Date(2024, 3, 10, 6, 30, 0, 0, time.UTC),
	time.Date(2024, 3, 31, 0, 30, 0, 0, time.UTC),
	time.Date(2024, 10, 27, 0, 59, 0, 0, time.UTC),
	time.Date(2024, 11, 3, 5, 45, 0, 0, time.UTC),
	time.Date(2099, 12, 31, 23, 59, 59, 0, time.UTC),
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"every 15 minutes", "every 1 hour", "every 30s", "every 2h30m", "@every 15m", "every minute",
		"daily at 02:00", "every day at 14:30", "hourly at :15", "@daily", "@hourly", "@weekly",
		"daily at 02:30 in Europe/Paris", "hourly at :45 in Australia/Lord_Howe",
		"0 2 * * *", "*/15 9-17 * JAN-MAR mon-fri", "0 0 13 * FRI", "0 0 29 2 *", "5/20 1-23/2 */3 * 7",
		"CRON_TZ=America/New_York 30 1 * * *", "TZ=Europe/Paris @monthly", "0 0 1-31 * SAT-SUN",
		"0 25 * * *", "0 0 30 2 *", "every 500ms", "CRON_TZ=Mars/Olympus @daily", "TZ=Local @daily",
		"", "@", "every", "1,,2 * * * *", "*/0 * * * *", "0-7/8 * * * *",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := schedule.Parse(spec)
		if err != nil {
			var pe *schedule.ParseError
			if !errors.As(err, &pe) || !errors.Is(err, schedule.ErrInvalid) || pe.Spec != spec {
				t.Fatalf("Parse(%q) = %#v, want a *ParseError for the spec", spec, err)
			}
			if !strings.HasPrefix(err.Error(), "schedule ") || pe.Reason == "" {
				t.Fatalf("Parse(%q): malformed error %q", spec, err)
			}
			return
		}
		again, err := schedule.Parse(s.String())
		if err != nil {
			t.Fatalf("Parse(%q).String() = %q, which Parse refuses: %v", spec, s.String(), err)
		}
		if again.String() != s.String() {
			t.Fatalf("String() not stable: %q, then %q", s.String(), again.String())
		}
		for _, at := range fuzzTimes {
			next := s.Next(at)
			if got := again.Next(at); !got.Equal(next) {
				t.Fatalf("%q and %q: Next(%v) = %v and %v", spec, s.String(), at, next, got)
			}
			if !next.IsZero() && !next.After(at) {
				t.Fatalf("%q: Next(%v) = %v, not after it", spec, at, next)
			}
		}
	})
}
