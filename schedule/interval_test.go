package schedule_test

import (
	"errors"
	"testing"
	"time"

	"github.com/weirhq/weir/schedule"
)

func TestIntervalEpochAlignment(t *testing.T) {
	t.Parallel()
	epoch := time.Unix(0, 0).UTC()
	tests := []struct {
		spec  string
		after time.Time
		want  string
	}{
		{"every 2h30m", epoch, "1970-01-01T02:30:00Z"},
		{"every 2h30m", epoch.Add(-time.Nanosecond), "1970-01-01T00:00:00Z"},
		{"every 1m", time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC), "1970-01-01T00:00:00Z"},
		{"every 7s", time.Unix(-8, 0), "1969-12-31T23:59:53Z"}, // -7
		{"every 7s", time.Unix(-7, 0), "1970-01-01T00:00:00Z"},
		{"every 7s", time.Unix(-7, 1), "1970-01-01T00:00:00Z"},
		{"every 15 minutes", time.Date(2024, 5, 15, 10, 14, 59, 999_999_999, time.UTC), "2024-05-15T10:15:00Z"},
		{"every 15 minutes", time.Date(2024, 5, 15, 10, 15, 0, 0, time.UTC), "2024-05-15T10:30:00Z"},
		{"every 24h", time.Date(2024, 5, 15, 23, 0, 0, 0, time.FixedZone("X", -5*3600)), "2024-05-17T00:00:00Z"}, // 04:00Z on the 16th
		// A week since the epoch begins on a Thursday.
		{"every 168h", time.Date(2024, 5, 15, 0, 0, 0, 0, time.UTC), "2024-05-16T00:00:00Z"},
		// One hour is half past the hour in India.
		{"every 1 hour", time.Date(2024, 5, 15, 10, 7, 0, 0, time.UTC), "2024-05-15T11:00:00Z"},
	}
	for _, tt := range tests {
		got := schedule.MustParse(tt.spec).Next(tt.after).Format(time.RFC3339)
		if got != tt.want {
			t.Errorf("%q: Next(%v) = %s, want %s", tt.spec, tt.after, got, tt.want)
		}
	}
}

// TestIntervalSameTicksWhateverTheStart is the reason for the alignment:
// processes that start at different times compute the same ticks, so they
// enqueue one job per tick between them.
func TestIntervalSameTicksWhateverTheStart(t *testing.T) {
	t.Parallel()
	s := schedule.MustParse("every 15 minutes")
	end := time.Date(2024, 5, 15, 12, 0, 0, 0, time.UTC)
	a := schedule.Ticks(s, time.Date(2024, 5, 15, 9, 3, 17, 0, time.UTC), end)
	b := schedule.Ticks(s, time.Date(2024, 5, 15, 9, 11, 42, 0, time.UTC), end)
	if len(a) != 12 || len(b) != 12 {
		t.Fatalf("got %d and %d ticks, want 12", len(a), len(b))
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			t.Errorf("tick %d: %v and %v", i, a[i], b[i])
		}
	}
}

func TestEvery(t *testing.T) {
	t.Parallel()
	i, err := schedule.Every(90 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if i.Duration() != 90*time.Minute || i.String() != "every 1h30m" {
		t.Errorf("Every(90m) = %v, %s", i.Duration(), i)
	}
	for _, d := range []time.Duration{0, -time.Second, 999 * time.Millisecond, 1500 * time.Millisecond} {
		if _, err := schedule.Every(d); !errors.Is(err, schedule.ErrInvalid) {
			t.Errorf("Every(%v) = %v, want ErrInvalid", d, err)
		}
	}
}
