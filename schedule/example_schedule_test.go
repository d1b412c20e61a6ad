package schedule_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/schedule"
)

func ExampleParse() {
	s, err := schedule.Parse("every 15 minutes")
	if err != nil {
		panic(err)
	}
	// Ticks are aligned to the Unix epoch: every process computes the same
	// ones, whenever it started.
	now := time.Date(2024, 5, 15, 10, 7, 13, 0, time.UTC)
	tick := s.Next(now)
	fmt.Println(s, "->", tick.Format(time.RFC3339))
	fmt.Println("periodic/report/" + tick.Format(time.RFC3339))
	// Output:
	// every 15m -> 2024-05-15T10:15:00Z
	// periodic/report/2024-05-15T10:15:00Z
}

func ExampleParse_cron() {
	for _, spec := range []string{
		"daily at 02:00",
		"hourly at :15",
		"30 9 * * MON-FRI",
		"0 0 13 * FRI", // the 13th, and every Friday
		"CRON_TZ=Asia/Tokyo @monthly",
	} {
		s := schedule.MustParse(spec)
		fmt.Printf("%-30s %s\n", s, s.Next(time.Date(2024, 9, 1, 12, 0, 0, 0, time.UTC)).Format(time.RFC3339))
	}
	// Output:
	// daily at 02:00                 2024-09-02T02:00:00Z
	// hourly at :15                  2024-09-01T12:15:00Z
	// 30 9 * * MON-FRI               2024-09-02T09:30:00Z
	// 0 0 13 * FRI                   2024-09-06T00:00:00Z
	// CRON_TZ=Asia/Tokyo @monthly    2024-10-01T00:00:00+09:00
}

// A time that the clock skips does not fire that day; a time that it shows
// twice fires once.
func ExampleParse_daylightSaving() {
	s := schedule.MustParse("daily at 02:30 in Europe/Paris")
	spring := time.Date(2024, 3, 30, 12, 0, 0, 0, time.UTC)
	for _, t := range schedule.Ticks(s, spring, spring.AddDate(0, 0, 3)) {
		fmt.Println(t.Format(time.RFC3339))
	}
	autumn := time.Date(2024, 10, 26, 12, 0, 0, 0, time.UTC)
	for _, t := range schedule.Ticks(s, autumn, autumn.AddDate(0, 0, 2)) {
		fmt.Println(t.Format(time.RFC3339))
	}
	// Output:
	// 2024-04-01T02:30:00+02:00
	// 2024-04-02T02:30:00+02:00
	// 2024-10-27T02:30:00+02:00
	// 2024-10-28T02:30:00+01:00
}

func ExampleParse_error() {
	_, err := schedule.Parse("0 25 * * *")
	fmt.Println(err)
	fmt.Println(errors.Is(err, schedule.ErrInvalid))

	_, err = schedule.Parse("0 0 30 2 *")
	fmt.Println(err)
	fmt.Println(errors.Is(err, schedule.ErrNeverFires))
	// Output:
	// schedule "0 25 * * *": hour 25 out of range 0-23
	// true
	// schedule "0 0 30 2 *": never fires: day-of-month 30 does not occur in month 2
	// true
}

// After downtime, the engine lists the ticks it missed and decides how
// many of them to run.
func ExampleTicks() {
	s := schedule.MustParse("@hourly")
	down := time.Date(2024, 5, 15, 10, 20, 0, 0, time.UTC)
	up := time.Date(2024, 5, 15, 13, 5, 0, 0, time.UTC)
	missed := schedule.Ticks(s, down, up)
	for _, t := range missed {
		fmt.Println(t.Format(time.RFC3339))
	}
	fmt.Println("next:", s.Next(up).Format(time.RFC3339))
	// Output:
	// 2024-05-15T11:00:00Z
	// 2024-05-15T12:00:00Z
	// 2024-05-15T13:00:00Z
	// next: 2024-05-15T14:00:00Z
}

func ExampleEvery() {
	s, err := schedule.Every(90 * time.Minute)
	if err != nil {
		panic(err)
	}
	fmt.Println(s, s.Next(time.Date(2024, 5, 15, 10, 7, 0, 0, time.UTC)).Format(time.RFC3339))
	// Output:
	// every 1h30m 2024-05-15T10:30:00Z
}
