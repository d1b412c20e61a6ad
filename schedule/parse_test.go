package schedule_test

import (
	"errors"
	"testing"
	"time"
	_ "time/tzdata" // the tests do not depend on the machine's zoneinfo

	"github.com/weirhq/weir/schedule"
)

// ref is a Wednesday, 2024-05-15T10:07:13.5Z.
var ref = time.Date(2024, 5, 15, 10, 7, 13, 500_000_000, time.UTC)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec string
		str  string // String()
		next string // Next(ref), RFC3339
	}{
		// Intervals, aligned to the Unix epoch.
		{"every 15 minutes", "every 15m", "2024-05-15T10:15:00Z"},
		{"every 1 hour", "every 1h", "2024-05-15T11:00:00Z"},
		{"every 30s", "every 30s", "2024-05-15T10:07:30Z"},
		{"every 2h30m", "every 2h30m", "2024-05-15T10:30:00Z"},
		{"@every 15m", "every 15m", "2024-05-15T10:15:00Z"},
		{"EVERY 90 Seconds", "every 1m30s", "2024-05-15T10:07:30Z"},
		{"every minute", "every 1m", "2024-05-15T10:08:00Z"},
		{"every 1.5h", "every 1h30m", "2024-05-15T10:30:00Z"},
		{"every 86400s", "every 24h", "2024-05-16T00:00:00Z"},
		{"every 7 mins", "every 7m", "2024-05-15T10:14:00Z"}, // 1715768040 = 420 × 4085162
		// Daily and hourly.
		{"daily at 02:00", "daily at 02:00", "2024-05-16T02:00:00Z"},
		{"every day at 14:30", "daily at 14:30", "2024-05-15T14:30:00Z"},
		{"daily at 2:05 in Europe/Paris", "daily at 02:05 in Europe/Paris", "2024-05-16T02:05:00+02:00"},
		{"Daily AT 23:59 IN UTC", "daily at 23:59 in UTC", "2024-05-15T23:59:00Z"},
		{"hourly at :15", "hourly at :15", "2024-05-15T10:15:00Z"},
		{"hourly at :5 in Asia/Kolkata", "hourly at :05 in Asia/Kolkata", "2024-05-15T16:05:00+05:30"},
		// Descriptors.
		{"@daily", "@daily", "2024-05-16T00:00:00Z"},
		{"@midnight", "@midnight", "2024-05-16T00:00:00Z"},
		{"@HOURLY", "@hourly", "2024-05-15T11:00:00Z"},
		{"@weekly", "@weekly", "2024-05-19T00:00:00Z"},
		{"@monthly", "@monthly", "2024-06-01T00:00:00Z"},
		{"@yearly", "@yearly", "2025-01-01T00:00:00Z"},
		{"@annually", "@annually", "2025-01-01T00:00:00Z"},
		// Cron expressions.
		{"  0   2 * *   *  ", "0 2 * * *", "2024-05-16T02:00:00Z"},
		{"*/15 9-17 * JAN-MAR mon-fri", "*/15 9-17 * JAN-MAR mon-fri", "2025-01-01T09:00:00Z"},
		{"0 0 1,15 * *", "0 0 1,15 * *", "2024-06-01T00:00:00Z"},
		{"5/20 10 * * *", "5/20 10 * * *", "2024-05-15T10:25:00Z"},
		{"0-30/10 10 * * *", "0-30/10 10 * * *", "2024-05-15T10:10:00Z"},
		{"0 12 * * 7", "0 12 * * 7", "2024-05-19T12:00:00Z"},
		{"0 12 * * SAT-SUN", "0 12 * * SAT-SUN", "2024-05-18T12:00:00Z"},
		{"0 0 29 2 *", "0 0 29 2 *", "2028-02-29T00:00:00Z"},
		{"0 0 30 2 MON", "0 0 30 2 MON", "2025-02-03T00:00:00Z"}, // Mondays in February: it fires
		{"TZ=Europe/Paris 0 2 * * *", "CRON_TZ=Europe/Paris 0 2 * * *", "2024-05-16T02:00:00+02:00"},
		{"cron_tz=America/New_York @daily", "CRON_TZ=America/New_York @daily", "2024-05-16T00:00:00-04:00"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			t.Parallel()
			s, err := schedule.Parse(tt.spec)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := s.String(); got != tt.str {
				t.Errorf("String() = %q, want %q", got, tt.str)
			}
			if got := s.Next(ref).Format(time.RFC3339); got != tt.next {
				t.Errorf("Next(%v) = %s, want %s", ref, got, tt.next)
			}
			again, err := schedule.Parse(s.String())
			if err != nil {
				t.Fatalf("Parse(String()): %v", err)
			}
			if again.String() != s.String() {
				t.Errorf("String() of the reparsed schedule = %q, want %q", again.String(), s.String())
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec   string
		reason string
		part   string
		cause  error // errors.Is, besides ErrInvalid
	}{
		{"", "empty schedule", "", nil},
		{"   ", "empty schedule", "", nil},
		{"banana", `want an interval ("every 15m"), "daily at HH:MM", "hourly at :MM" or 5 cron fields (minute hour day-of-month month day-of-week), got "banana"`, "", nil},
		// Cron fields.
		{"0 25 * * *", "hour 25 out of range 0-23", "25", nil},
		{"60 * * * *", "minute 60 out of range 0-59", "60", nil},
		{"0 0 0 * *", "day-of-month 0 out of range 1-31", "0", nil},
		{"0 0 32 * *", "day-of-month 32 out of range 1-31", "32", nil},
		{"0 0 * 13 *", "month 13 out of range 1-12", "13", nil},
		{"0 0 * * 8", "day-of-week 8 out of range 0-7", "8", nil},
		{"0 99999999999999999999 * * *", `hour "99999999999999999999" is not a number`, "99999999999999999999", nil},
		{"0 0 * * FUNDAY", `day-of-week "FUNDAY" is neither a number nor a name such as MON`, "FUNDAY", nil},
		{"0 0 * FOO *", `month "FOO" is neither a number nor a name such as JAN`, "FOO", nil},
		{"0 0 * * * *", `want an interval ("every 15m"), "daily at HH:MM", "hourly at :MM" or 5 cron fields (minute hour day-of-month month day-of-week), got 6 words`, "", nil},
		{"0 0 * *", `want an interval ("every 15m"), "daily at HH:MM", "hourly at :MM" or 5 cron fields (minute hour day-of-month month day-of-week), got 4 words`, "", nil},
		{"*/0 * * * *", "minute step 0 out of range 1-60", "*/0", nil},
		{"*/61 * * * *", "minute step 61 out of range 1-60", "*/61", nil},
		{"0 0 * * */8", "day-of-week step 8 out of range 1-7", "*/8", nil},
		{"*/x * * * *", `minute step "x" is not a number`, "*/x", nil},
		{"30-10 * * * *", "minute range 30-10 is backwards", "30-10", nil},
		{"0 0 * * FRI-MON", "day-of-week range FRI-MON is backwards", "FRI-MON", nil},
		{"1,,2 * * * *", `minute "1,,2" has an empty list item`, "1,,2", nil},
		{"-5 * * * *", `minute "-5" is missing a number`, "-5", nil},
		{"5- * * * *", `minute "5-" is missing a number`, "5-", nil},
		{"a * * * *", `minute "a" is not a number`, "a", nil},
		{"*/MON * * * *", `minute step "MON" is not a number`, "*/MON", nil},
		{"0 0 30 2 *", "never fires: day-of-month 30 does not occur in month 2", "30", schedule.ErrNeverFires},
		{"0 0 31 4,6,9,11 *", "never fires: day-of-month 31 does not occur in month 4,6,9,11", "31", schedule.ErrNeverFires},
		{"0 0 30,31 FEB *", "never fires: day-of-month 30,31 does not occur in month FEB", "30,31", schedule.ErrNeverFires},
		// Descriptors.
		{"@reboot", "unknown descriptor @reboot; want @yearly, @monthly, @weekly, @daily, @hourly or @every", "@reboot", nil},
		{"@daily now", `unexpected "now" after @daily`, "now", nil},
		// Zones.
		{"CRON_TZ=Mars/Olympus 0 0 * * *", `unknown time zone "Mars/Olympus"`, "Mars/Olympus", nil},
		{"CRON_TZ=../etc/passwd 0 0 * * *", `unknown time zone "../etc/passwd"`, "../etc/passwd", nil},
		{"CRON_TZ= 0 0 * * *", "empty time zone", "", nil},
		{"TZ=Local @daily", `time zone "Local" depends on the machine; name the zone, such as "Europe/Paris"`, "Local", nil},
		{"CRON_TZ=Europe/Paris", "CRON_TZ=Europe/Paris is not followed by a schedule", "CRON_TZ=Europe/Paris", nil},
		{"CRON_TZ=Europe/Paris every 15m", "CRON_TZ=Europe/Paris: an interval is aligned to the Unix epoch and takes no time zone", "CRON_TZ=Europe/Paris", nil},
		{"CRON_TZ=Europe/Paris daily at 02:00", `CRON_TZ=Europe/Paris: write the zone as a suffix, "daily at HH:MM in Europe/Paris"`, "CRON_TZ=Europe/Paris", nil},
		{"TZ=Europe/Paris every day at 02:00", `TZ=Europe/Paris: write the zone as a suffix, "daily at HH:MM in Europe/Paris"`, "TZ=Europe/Paris", nil},
		{"TZ=Asia/Kolkata hourly at :15", `TZ=Asia/Kolkata: write the zone as a suffix, "hourly at :MM in Asia/Kolkata"`, "TZ=Asia/Kolkata", nil},
		// Intervals.
		{"every", `every needs a period, such as "every 15m"`, "every", nil},
		{"@every", `@every needs a period, such as "@every 15m"`, "@every", nil},
		{"every 0s", "interval 0s is under the minimum of 1s", "0s", nil},
		{"every 0 minutes", "interval 0s is under the minimum of 1s", "0", nil},
		{"every 500ms", "interval 500ms is under the minimum of 1s", "500ms", nil},
		{"every -5m", "interval -5m0s is under the minimum of 1s", "-5m", nil},
		{"every 1500ms", "interval 1.5s is not a whole number of seconds", "1500ms", nil},
		{"every 15", `interval 15 has no unit, such as "15 minutes"`, "15", nil},
		{"every 15 fortnights", `unknown unit "fortnights"; use seconds, minutes or hours (or a cron expression for days)`, "fortnights", nil},
		{"every 2 days", `unknown unit "days"; use seconds, minutes or hours (or a cron expression for days)`, "days", nil},
		{"every 15 minutes please", `unexpected "please" after the interval`, "please", nil},
		{"every banana", `"banana" is not a duration such as "15m" or "2h30m"`, "banana", nil},
		{"@every 15 minutes", `"15" is not a duration such as "15m" or "2h30m"`, "15", nil},
		{"every 9999999999 hours", "interval 9999999999 hours is too long", "9999999999", nil},
		{"every 3000000h", `"3000000h" is not a duration such as "15m" or "2h30m"`, "3000000h", nil},
		// Daily and hourly.
		{"daily", `want "daily at HH:MM", such as "daily at 02:00"`, "daily", nil},
		{"every day", `want "every day at HH:MM", such as "daily at 02:00"`, "every day", nil},
		{"daily at 25:00", "hour 25 out of range 0-23", "25", nil},
		{"daily at 02:60", "minute 60 out of range 0-59", "60", nil},
		{"daily at 2", `time "2" is not HH:MM`, "2", nil},
		{"daily at 002:00", `time "002:00" is not HH:MM`, "002:00", nil},
		{"every day at 7am", `time "7am" is not HH:MM`, "7am", nil},
		{"daily at 02:00 in", `"in" needs a time zone, such as "in Europe/Paris"`, "in", nil},
		{"daily at 02:00 in Mars/Olympus", `unknown time zone "Mars/Olympus"`, "Mars/Olympus", nil},
		{"daily at 02:00 in Europe/Paris now", `unexpected "now" after the time zone`, "now", nil},
		{"daily at 02:00 on Mondays", `unexpected "on"; want "in" and a time zone`, "on", nil},
		{"hourly", `want "hourly at :MM", such as "hourly at :15"`, "hourly", nil},
		{"hourly at 15", `minute "15" is not :MM, such as ":15"`, "15", nil},
		{"hourly at :60", "minute 60 out of range 0-59", "60", nil},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			t.Parallel()
			s, err := schedule.Parse(tt.spec)
			if err == nil {
				t.Fatalf("Parse accepted it as %q", s)
			}
			var pe *schedule.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T %v is not a *ParseError", err, err)
			}
			if want := `schedule "` + tt.spec + `": ` + tt.reason; err.Error() != want {
				t.Errorf("error:\n got %s\nwant %s", err, want)
			}
			if pe.Reason != tt.reason || pe.Part != tt.part || pe.Spec != tt.spec {
				t.Errorf("ParseError{Spec: %q, Part: %q, Reason: %q}, want Part %q, Reason %q", pe.Spec, pe.Part, pe.Reason, tt.part, tt.reason)
			}
			if !errors.Is(err, schedule.ErrInvalid) {
				t.Errorf("errors.Is(err, ErrInvalid) = false")
			}
			if tt.cause != nil && !errors.Is(err, tt.cause) {
				t.Errorf("errors.Is(err, %v) = false", tt.cause)
			}
			if tt.cause == nil && errors.Is(err, schedule.ErrNeverFires) {
				t.Errorf("errors.Is(err, ErrNeverFires) = true")
			}
		})
	}
}

func TestParseUnknownZoneUnwrapsToTheLoadError(t *testing.T) {
	t.Parallel()
	_, err := schedule.Parse("daily at 02:00 in Mars/Olympus")
	var pe *schedule.ParseError
	if !errors.As(err, &pe) || pe.Err == nil {
		t.Fatalf("Parse = %v, want a *ParseError with the cause", err)
	}
	if _, want := time.LoadLocation("Mars/Olympus"); errors.Unwrap(err).Error() != want.Error() {
		t.Errorf("cause = %v, want %v", errors.Unwrap(err), want)
	}
}

func TestMustParse(t *testing.T) {
	t.Parallel()
	if got := schedule.MustParse("@hourly").String(); got != "@hourly" {
		t.Errorf("MustParse(@hourly) = %q", got)
	}
	defer func() {
		if r := recover(); r == nil {
			t.Errorf("MustParse of a bad spec did not panic")
		} else if err, ok := r.(error); !ok || !errors.Is(err, schedule.ErrInvalid) {
			t.Errorf("MustParse panicked with %v, want a ParseError", r)
		}
	}()
	schedule.MustParse("0 25 * * *")
}
