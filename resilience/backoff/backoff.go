package backoff

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/weirhq/weir/internal/enumname"
)

// Defaults from weir's resilience spec.
const (
	DefaultBase     = time.Second
	DefaultFactor   = 2.0
	DefaultCap      = 60 * time.Second
	DefaultFraction = 0.2
)

// Schedule is how the delay grows from one retry to the next.
type Schedule uint8

const (
	// ScheduleExponential multiplies the delay by Factor at each retry. It
	// is the default.
	ScheduleExponential Schedule = iota
	// ScheduleConstant waits Base before every retry.
	ScheduleConstant
	// ScheduleLinear adds Step at each retry.
	ScheduleLinear
)

var scheduleNames = []string{
	ScheduleExponential: "exponential",
	ScheduleConstant:    "constant",
	ScheduleLinear:      "linear",
}

func (s Schedule) String() string { return enumname.Of(scheduleNames, s, "Schedule") }

// JitterMode is how randomness is applied to the scheduled delay.
type JitterMode uint8

const (
	// JitterDefault is the zero value: proportional jitter of ±20%.
	JitterDefault JitterMode = iota
	// JitterNone waits exactly the scheduled delay.
	JitterNone
	// JitterFull waits a uniform time in [0, d].
	JitterFull
	// JitterEqual waits d/2 plus a uniform time in [0, d/2].
	JitterEqual
	// JitterProportional waits d × (1 ± Fraction).
	JitterProportional
	// JitterDecorrelated waits a uniform time in [Base, 3 × previous delay],
	// capped.
	JitterDecorrelated
)

var jitterModeNames = []string{
	JitterDefault:      "default",
	JitterNone:         "none",
	JitterFull:         "full",
	JitterEqual:        "equal",
	JitterProportional: "proportional",
	JitterDecorrelated: "decorrelated",
}

func (m JitterMode) String() string { return enumname.Of(jitterModeNames, m, "JitterMode") }

// ErrInvalid is wrapped by the error Validate returns.
var ErrInvalid = errors.New("invalid backoff")

// Backoff describes a retry delay schedule. The zero value is the default
// (exponential, 1 s base, factor 2, 60 s cap, ±20% jitter); in a struct
// literal, zero fields take their defaults. Values made by Exponential,
// Constant and Linear take their arguments as given. A Backoff is a plain value, safe to copy and to share
// between goroutines.
type Backoff struct {
	// Schedule is exponential (default), constant or linear.
	Schedule Schedule
	// Base is the first delay. Default 1 s.
	Base time.Duration
	// Factor multiplies the delay at each retry of an exponential
	// schedule. Default 2; must be at least 1.
	Factor float64
	// Step is added at each retry of a linear schedule. Default Base.
	Step time.Duration
	// Cap is the longest delay. Default 60 s.
	Cap time.Duration
	// Jitter is the jitter mode. Default proportional.
	Jitter JitterMode
	// Fraction is p for proportional jitter, in (0, 1]. Default 0.2.
	Fraction float64

	// exact is set by the constructors: their arguments are taken as
	// given, so Constant(0) waits nothing instead of the default base.
	exact bool
}

// Exponential returns an exponential backoff with the default jitter.
// Its arguments are taken as given: a zero base or cap means zero.
func Exponential(base time.Duration, factor float64, cap time.Duration) Backoff {
	return Backoff{Schedule: ScheduleExponential, Base: base, Factor: factor, Step: base, Cap: cap,
		Jitter: JitterProportional, Fraction: DefaultFraction, exact: true}
}

// Constant returns a backoff that waits d before every retry, without jitter.
// Constant(0) retries at once.
func Constant(d time.Duration) Backoff {
	return Backoff{Schedule: ScheduleConstant, Base: d, Factor: 1, Step: 0, Cap: d,
		Jitter: JitterNone, Fraction: DefaultFraction, exact: true}
}

// Linear returns a backoff that starts at base and grows by step, up to cap,
// with the default jitter.
// Its arguments are taken as given.
func Linear(base, step, cap time.Duration) Backoff {
	return Backoff{Schedule: ScheduleLinear, Base: base, Factor: 1, Step: step, Cap: cap,
		Jitter: JitterProportional, Fraction: DefaultFraction, exact: true}
}

// WithJitter returns a copy of b with jitter mode m.
func (b Backoff) WithJitter(m JitterMode) Backoff {
	b.Jitter = m
	return b
}

// WithProportionalJitter returns a copy of b with proportional jitter of ±p.
func (b Backoff) WithProportionalJitter(p float64) Backoff {
	b.Jitter = JitterProportional
	b.Fraction = p
	return b
}

// Normalized returns b with every zero field set to its default, unless b
// was made by a constructor, whose arguments stand as given. A Cap below Base
// is raised to Base.
func (b Backoff) Normalized() Backoff {
	if b.exact {
		b.Cap = max(b.Cap, b.Base)
		return b
	}
	if b.Base == 0 {
		b.Base = DefaultBase
	}
	if b.Factor == 0 {
		b.Factor = DefaultFactor
	}
	if b.Step == 0 {
		b.Step = b.Base
	}
	if b.Cap == 0 {
		b.Cap = DefaultCap
	}
	if b.Cap < b.Base {
		b.Cap = b.Base
	}
	if b.Jitter == JitterDefault {
		b.Jitter = JitterProportional
	}
	if b.Fraction == 0 {
		b.Fraction = DefaultFraction
	}
	return b
}

// Or returns b with each zero field taken from def, for a component whose
// defaults differ from this package's. The zero Backoff gives def whole; a
// Backoff made by Exponential, Constant or Linear is returned as it is, its
// arguments standing as given. The schedule is b's (its zero value is
// exponential).
func (b Backoff) Or(def Backoff) Backoff {
	if b == (Backoff{}) {
		return def
	}
	if b.exact {
		return b
	}
	if b.Base == 0 {
		b.Base = def.Base
	}
	if b.Factor == 0 {
		b.Factor = def.Factor
	}
	if b.Step == 0 && def.Step != def.Base {
		b.Step = def.Step
	}
	if b.Cap == 0 {
		b.Cap = def.Cap
	}
	if b.Jitter == JitterDefault {
		b.Jitter = def.Jitter
	}
	if b.Fraction == 0 {
		b.Fraction = def.Fraction
	}
	return b
}

// Validate reports a field that is out of range, naming it.
func (b Backoff) Validate() error {
	switch {
	case b.Schedule > ScheduleLinear:
		return fmt.Errorf("%w: unknown schedule %d", ErrInvalid, b.Schedule)
	case b.Jitter > JitterDecorrelated:
		return fmt.Errorf("%w: unknown jitter mode %d", ErrInvalid, b.Jitter)
	case b.Base < 0:
		return fmt.Errorf("%w: base %v is negative", ErrInvalid, b.Base)
	case b.Cap < 0:
		return fmt.Errorf("%w: cap %v is negative", ErrInvalid, b.Cap)
	case b.Step < 0:
		return fmt.Errorf("%w: step %v is negative", ErrInvalid, b.Step)
	case (b.Factor != 0 || b.exact) && (b.Factor < 1 || math.IsNaN(b.Factor) || math.IsInf(b.Factor, 0)):
		return fmt.Errorf("%w: factor %v must be a finite number of at least 1", ErrInvalid, b.Factor)
	case (b.Fraction != 0 || b.exact) && !(b.Fraction > 0 && b.Fraction <= 1):
		return fmt.Errorf("%w: jitter fraction %v must be in (0, 1]", ErrInvalid, b.Fraction)
	}
	return nil
}

// Scheduled returns the delay before retry n (n ≥ 1) before jitter: the
// schedule's d, at most Cap. Zero fields take their defaults.
func (b Backoff) Scheduled(n int) time.Duration {
	return b.Normalized().scheduled(n)
}

func (b Backoff) scheduled(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	var d float64
	switch b.Schedule {
	case ScheduleConstant:
		d = float64(b.Base)
	case ScheduleLinear:
		d = float64(b.Base) + float64(b.Step)*float64(n-1)
	default:
		d = float64(b.Base) * math.Pow(b.Factor, float64(n-1))
	}
	if d >= float64(b.Cap) || math.IsNaN(d) {
		return b.Cap
	}
	return time.Duration(d)
}

// Delay returns the wait before retry n (n ≥ 1), given the previous delay
// (used by decorrelated jitter; pass 0 before the first retry) and u, a
// uniform random number in [0, 1). It is a pure function: the same
// arguments give the same delay, which is how the bounds are tested.
func (b Backoff) Delay(n int, prev time.Duration, u float64) time.Duration {
	b = b.Normalized()
	if u < 0 || math.IsNaN(u) {
		u = 0
	}
	if u >= 1 {
		u = math.Nextafter(1, 0)
	}
	if b.Jitter == JitterDecorrelated {
		if prev < b.Base {
			prev = b.Base
		}
		hi := 3 * float64(prev)
		if hi > float64(b.Cap) {
			hi = float64(b.Cap)
		}
		return clampDur(float64(b.Base)+u*(hi-float64(b.Base)), b.Cap)
	}
	d := float64(b.scheduled(n))
	switch b.Jitter {
	case JitterFull:
		d *= u
	case JitterEqual:
		d = d/2 + u*d/2
	case JitterProportional:
		d *= 1 + b.Fraction*(2*u-1)
	}
	return clampDur(d, b.Cap)
}

// Next is Delay with a random u from math/rand/v2.
func (b Backoff) Next(n int, prev time.Duration) time.Duration {
	return b.Delay(n, prev, rand.Float64())
}

func clampDur(d float64, cap time.Duration) time.Duration {
	switch {
	case d <= 0:
		return 0
	case d >= float64(cap):
		return cap
	}
	return time.Duration(d)
}

// PollCap is the longest PollDelay waits after failures, unless the poll
// interval itself is longer.
const PollCap = 2 * time.Second

// PollDelay is how long a poller that polls every every waits after fails
// failures in a row of what it polls (a database that is down, say):
// every, doubled at each failure up to the greater of every and PollCap,
// with the default jitter. Without failures it is every.
func PollDelay(every time.Duration, fails int) time.Duration {
	if fails < 1 || every <= 0 {
		return every
	}
	return max(every, Exponential(every, 2, max(every, PollCap)).Next(fails, 0))
}
