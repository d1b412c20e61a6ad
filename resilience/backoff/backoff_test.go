package backoff_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/weirhq/weir/resilience/backoff"
)

func TestZeroValueIsSpecDefault(t *testing.T) {
	b := backoff.Backoff{}.Normalized()
	want := backoff.Backoff{
		Schedule: backoff.ScheduleExponential,
		Base:     time.Second,
		Factor:   2,
		Step:     time.Second,
		Cap:      60 * time.Second,
		Jitter:   backoff.JitterProportional,
		Fraction: 0.2,
	}
	if b != want {
		t.Fatalf("zero value normalized to %+v, want %+v", b, want)
	}
}

func TestScheduled(t *testing.T) {
	tests := []struct {
		name string
		b    backoff.Backoff
		want []time.Duration // for retries 1, 2, 3, ...
	}{
		{"exponential default", backoff.Backoff{}, []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, 60 * time.Second, 60 * time.Second}},
		{"exponential spec 02", backoff.Exponential(250*time.Millisecond, 2, time.Minute), []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute}},
		{"exponential spec 04", backoff.Exponential(5*time.Minute, 2, time.Hour), []time.Duration{5 * time.Minute, 10 * time.Minute, 20 * time.Minute, 40 * time.Minute, time.Hour}},
		{"factor 1.5", backoff.Exponential(time.Second, 1.5, time.Minute), []time.Duration{time.Second, 1500 * time.Millisecond, 2250 * time.Millisecond}},
		{"constant", backoff.Constant(3 * time.Second), []time.Duration{3 * time.Second, 3 * time.Second, 3 * time.Second}},
		{"linear", backoff.Linear(time.Second, 2*time.Second, 6*time.Second), []time.Duration{time.Second, 3 * time.Second, 5 * time.Second, 6 * time.Second, 6 * time.Second}},
		{"constant zero retries at once", backoff.Constant(0), []time.Duration{0, 0}},
		{"constructor zero cap means the base", backoff.Exponential(time.Second, 2, 0), []time.Duration{time.Second, time.Second}},
		{"cap below base is raised", backoff.Exponential(10*time.Second, 2, time.Second), []time.Duration{10 * time.Second, 10 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, want := range tt.want {
				if got := tt.b.Scheduled(i + 1); got != want {
					t.Errorf("Scheduled(%d) = %v, want %v", i+1, got, want)
				}
			}
		})
	}
}

func TestScheduledHugeRetryNumberStaysAtCap(t *testing.T) {
	b := backoff.Exponential(time.Second, 10, time.Minute)
	for _, n := range []int{30, 100, 1000, math.MaxInt32, math.MaxInt} {
		if got := b.Scheduled(n); got != time.Minute {
			t.Errorf("Scheduled(%d) = %v, want the cap", n, got)
		}
	}
}

func TestJitterEndpoints(t *testing.T) {
	exp := backoff.Exponential(time.Second, 2, time.Minute)
	tests := []struct {
		name   string
		b      backoff.Backoff
		n      int
		prev   time.Duration
		lo, hi time.Duration // Delay at u=0 and as u approaches 1
	}{
		{"none", exp.WithJitter(backoff.JitterNone), 3, 0, 4 * time.Second, 4 * time.Second},
		{"full", exp.WithJitter(backoff.JitterFull), 3, 0, 0, 4 * time.Second},
		{"equal", exp.WithJitter(backoff.JitterEqual), 3, 0, 2 * time.Second, 4 * time.Second},
		{"proportional 20%", exp.WithProportionalJitter(0.2), 3, 0, 3200 * time.Millisecond, 4800 * time.Millisecond},
		{"proportional capped", exp.WithProportionalJitter(0.2), 7, 0, 48 * time.Second, time.Minute},
		{"decorrelated first", exp.WithJitter(backoff.JitterDecorrelated), 1, 0, time.Second, 3 * time.Second},
		{"decorrelated grows from prev", exp.WithJitter(backoff.JitterDecorrelated), 5, 10 * time.Second, time.Second, 30 * time.Second},
		{"decorrelated capped", exp.WithJitter(backoff.JitterDecorrelated), 5, 50 * time.Second, time.Second, time.Minute},
	}
	const almostOne = 0.9999999999
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.b.Delay(tt.n, tt.prev, 0); got != tt.lo {
				t.Errorf("Delay(u=0) = %v, want %v", got, tt.lo)
			}
			if got := tt.b.Delay(tt.n, tt.prev, almostOne); got > tt.hi || tt.hi-got > time.Millisecond {
				t.Errorf("Delay(u→1) = %v, want just under %v", got, tt.hi)
			}
		})
	}
}

// bounds is the documented range of Delay for retry n after a wait of prev.
func bounds(b backoff.Backoff, n int, prev time.Duration) (lo, hi time.Duration) {
	b = b.Normalized()
	d := b.Scheduled(n)
	switch b.Jitter {
	case backoff.JitterNone:
		return d, d
	case backoff.JitterFull:
		return 0, d
	case backoff.JitterEqual:
		return d / 2, d
	case backoff.JitterProportional:
		lo := time.Duration(float64(d) * (1 - b.Fraction))
		hi := time.Duration(math.Min(float64(b.Cap), float64(d)*(1+b.Fraction)))
		return lo, hi
	case backoff.JitterDecorrelated:
		prev = max(prev, b.Base)
		return b.Base, min(b.Cap, 3*prev)
	}
	panic("unknown jitter mode")
}

func genBackoff(t *rapid.T) backoff.Backoff {
	base := time.Duration(rapid.Int64Range(1, int64(10*time.Minute)).Draw(t, "base"))
	capd := time.Duration(rapid.Int64Range(0, int64(24*time.Hour)).Draw(t, "cap"))
	// Values from the constructors keep zero arguments as given.
	switch rapid.IntRange(0, 3).Draw(t, "made by") {
	case 1:
		return backoff.Exponential(base*time.Duration(rapid.IntRange(0, 1).Draw(t, "zero base")), rapid.Float64Range(1, 10).Draw(t, "factor"), capd)
	case 2:
		return backoff.Constant(base * time.Duration(rapid.IntRange(0, 1).Draw(t, "zero base")))
	case 3:
		return backoff.Linear(base, time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "step")), capd).
			WithJitter(backoff.JitterMode(rapid.IntRange(1, 5).Draw(t, "jitter")))
	}
	return backoff.Backoff{
		Schedule: backoff.Schedule(rapid.IntRange(0, 2).Draw(t, "schedule")),
		Base:     base,
		Factor:   rapid.Float64Range(1, 10).Draw(t, "factor"),
		Step:     time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "step")),
		Cap:      capd,
		Jitter:   backoff.JitterMode(rapid.IntRange(0, 5).Draw(t, "jitter")),
		Fraction: rapid.Float64Range(0.001, 1).Draw(t, "fraction"),
	}
}

func TestPropertyDelayWithinDocumentedBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := genBackoff(t)
		if err := b.Validate(); err != nil {
			t.Fatalf("generated invalid backoff: %v", err)
		}
		n := rapid.IntRange(1, 200).Draw(t, "n")
		prev := time.Duration(rapid.Int64Range(0, int64(48*time.Hour)).Draw(t, "prev"))
		u := rapid.Float64Range(0, 1).Draw(t, "u")
		if u == 1 {
			u = math.Nextafter(1, 0)
		}
		got := b.Delay(n, prev, u)
		lo, hi := bounds(b, n, prev)
		// Float rounding may cost a nanosecond at either end.
		if got < lo-1 || got > hi+1 {
			t.Fatalf("Delay(%d, %v, %v) = %v, outside [%v, %v] for %+v", n, prev, u, got, lo, hi, b.Normalized())
		}
		if capd := b.Normalized().Cap; got > capd {
			t.Fatalf("Delay %v exceeds cap %v", got, capd)
		}
		if got < 0 {
			t.Fatalf("negative delay %v", got)
		}
	})
}

func TestPropertyScheduleNeverDecreasesAndNeverPassesCap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := genBackoff(t)
		n := rapid.IntRange(1, 500).Draw(t, "n")
		d1, d2 := b.Scheduled(n), b.Scheduled(n+1)
		if d2 < d1 {
			t.Fatalf("Scheduled(%d)=%v > Scheduled(%d)=%v", n, d1, n+1, d2)
		}
		if c := b.Normalized().Cap; d2 > c {
			t.Fatalf("Scheduled(%d)=%v exceeds cap %v", n+1, d2, c)
		}
	})
}

func TestPropertyDecorrelatedSequenceStaysBounded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := genBackoff(t).WithJitter(backoff.JitterDecorrelated).Normalized()
		var prev time.Duration
		for n := 1; n <= 50; n++ {
			d := b.Delay(n, prev, rapid.Float64Range(0, 0.999999).Draw(t, "u"))
			if d < b.Base || d > b.Cap {
				t.Fatalf("retry %d: delay %v outside [%v, %v]", n, d, b.Base, b.Cap)
			}
			prev = d
		}
	})
}

func TestDelayClampsOutOfRangeRandom(t *testing.T) {
	b := backoff.Exponential(time.Second, 2, time.Minute).WithJitter(backoff.JitterFull)
	if got := b.Delay(1, 0, -3); got != 0 {
		t.Errorf("u<0: got %v, want 0", got)
	}
	if got := b.Delay(1, 0, math.NaN()); got != 0 {
		t.Errorf("u=NaN: got %v, want 0", got)
	}
	if got := b.Delay(1, 0, 7); got > time.Second {
		t.Errorf("u>1: got %v, want at most 1s", got)
	}
}

func TestNextUsesRandomness(t *testing.T) {
	b := backoff.Exponential(time.Second, 2, time.Minute).WithJitter(backoff.JitterFull)
	seen := map[time.Duration]bool{}
	for range 100 {
		d := b.Next(4, 0)
		if d < 0 || d > 8*time.Second {
			t.Fatalf("Next = %v outside [0, 8s]", d)
		}
		seen[d] = true
	}
	if len(seen) < 50 {
		t.Fatalf("100 draws of full jitter gave only %d distinct delays", len(seen))
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		b    backoff.Backoff
		want string
	}{
		{"negative base", backoff.Backoff{Base: -1}, "base"},
		{"negative cap", backoff.Backoff{Cap: -1}, "cap"},
		{"negative step", backoff.Backoff{Step: -1}, "step"},
		{"factor below one", backoff.Backoff{Factor: 0.5}, "factor"},
		{"factor NaN", backoff.Backoff{Factor: math.NaN()}, "factor"},
		{"factor Inf", backoff.Backoff{Factor: math.Inf(1)}, "factor"},
		{"fraction above one", backoff.Backoff{Fraction: 1.5}, "fraction"},
		{"fraction negative", backoff.Backoff{Fraction: -0.1}, "fraction"},
		{"unknown schedule", backoff.Backoff{Schedule: 9}, "schedule"},
		{"unknown jitter", backoff.Backoff{Jitter: 9}, "jitter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.b.Validate()
			if !errors.Is(err, backoff.ErrInvalid) {
				t.Fatalf("Validate() = %v, want ErrInvalid", err)
			}
			if !contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %q, want it to name %q", err, tt.want)
			}
		})
	}
	if err := backoff.Exponential(time.Second, 0, time.Minute).Validate(); err == nil {
		t.Fatal("Exponential with factor 0 validated")
	}
	if err := (backoff.Backoff{}).Validate(); err != nil {
		t.Fatalf("zero value: %v", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestStrings(t *testing.T) {
	if got := backoff.ScheduleLinear.String(); got != "linear" {
		t.Errorf("got %q", got)
	}
	if got := backoff.JitterDecorrelated.String(); got != "decorrelated" {
		t.Errorf("got %q", got)
	}
	if got := backoff.JitterMode(42).String(); got != "JitterMode(42)" {
		t.Errorf("got %q", got)
	}
}

func BenchmarkDelay(b *testing.B) {
	bo := backoff.Backoff{}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = bo.Delay(i%10+1, 0, 0.5)
	}
}

func TestPollDelay(t *testing.T) {
	const every = 20 * time.Millisecond
	if got := backoff.PollDelay(every, 0); got != every {
		t.Fatalf("no failures: %v, want %v", got, every)
	}
	prevLow := time.Duration(0)
	for fails := 1; fails <= 12; fails++ {
		got := backoff.PollDelay(every, fails)
		want := min(every<<(fails-1), backoff.PollCap)
		lo, hi := max(every, time.Duration(float64(want)*0.8)), time.Duration(float64(want)*1.2)
		if got < lo || got > min(hi, backoff.PollCap) {
			t.Fatalf("%d failures: %v, want within [%v, %v]", fails, got, lo, min(hi, backoff.PollCap))
		}
		if lo < prevLow {
			t.Fatalf("%d failures: the bound went down", fails)
		}
		prevLow = lo
	}
	if got := backoff.PollDelay(5*time.Second, 3); got != 5*time.Second {
		t.Fatalf("a poll longer than the cap: %v, want the poll, 5s", got)
	}
}
