package breaker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/enumname"
)

// Defaults of [Config], from weir's resilience spec.
const (
	// DefaultOpenDelay is how long a breaker stays open before it admits
	// probes.
	DefaultOpenDelay = 60 * time.Second
	// DefaultRateOpenDelay is the open delay that goes with FailureRate
	// (see FailureRateConfig).
	DefaultRateOpenDelay = 30 * time.Second
	// DefaultHalfOpenProbes is how many probe calls a half-open breaker
	// admits.
	DefaultHalfOpenProbes = 1
	// DefaultHalfOpenSuccessRatio is the share of the probes that must
	// succeed, strictly more than, for a half-open breaker to close.
	DefaultHalfOpenSuccessRatio = 0.8
)

// MaxHalfOpenProbes bounds Config.HalfOpenProbes.
const MaxHalfOpenProbes = 1 << 20

// State is the state of a breaker.
type State uint8

const (
	// Closed lets every call through and counts their outcomes.
	Closed State = iota
	// Open fails every call fast until the open delay has passed.
	Open
	// HalfOpen lets a fixed number of probe calls through to test the
	// dependency and fails the others fast.
	HalfOpen
)

var stateNames = []string{
	Closed:   "closed",
	Open:     "open",
	HalfOpen: "half-open",
}

func (s State) String() string { return enumname.Of(stateNames, s, "State") }

// Outcome is what a call's result means for the breaker.
type Outcome uint8

const (
	// Success is a call that shows the dependency healthy.
	Success Outcome = iota
	// Failure is a call that counts against the dependency. Done treats
	// an Outcome that is none of the three as a Failure.
	Failure
	// Ignored is a call that says nothing about the dependency, such as
	// one the caller cancelled. It is not counted at all. (The name
	// Ignore is taken by the function that marks an error.)
	Ignored
)

var outcomeNames = []string{
	Success: "success",
	Failure: "failure",
	Ignored: "ignored",
}

func (o Outcome) String() string { return enumname.Of(outcomeNames, o, "Outcome") }

// Config configures a [Breaker]. The zero value is a working breaker with
// the defaults of weir's resilience spec: open after 5 failures in 30 s,
// stay open 60 s, then admit one probe.
type Config struct {
	// Name identifies the breaker in errors, snapshots and transitions.
	// Default "".
	Name string
	// Strategy decides when the closed breaker opens. Default
	// CountInWindow(5, 30*time.Second).
	Strategy Strategy
	// OpenDelay is how long the breaker stays open before it admits
	// probes. Default 60 s ([DefaultOpenDelay]); the spec gives 30 s
	// ([DefaultRateOpenDelay]) for a FailureRate breaker, which
	// FailureRateConfig sets. Must not be negative.
	OpenDelay time.Duration
	// OpenJitter spreads the open delay, as a fraction in [0, 1): each
	// time the breaker opens it waits a uniform delay in
	// [OpenDelay×(1-OpenJitter), OpenDelay×(1+OpenJitter)). Default 0,
	// no jitter.
	OpenJitter float64
	// HalfOpenProbes is how many calls, in total, the half-open breaker
	// admits; the others fail fast. A probe whose outcome is ignored
	// gives its slot back. Default 1; must be in [1, MaxHalfOpenProbes].
	HalfOpenProbes int
	// HalfOpenSuccessRatio sets how many probes must succeed: the breaker
	// closes once its successful probes are strictly more than
	// HalfOpenSuccessRatio × HalfOpenProbes. Any failed probe reopens
	// it. Default 0.8; must be in [0, 1) (zero takes the default; use a
	// small positive ratio to close on the first success).
	HalfOpenSuccessRatio float64
	// Classify maps a call's context and error to an outcome. Default
	// [DefaultClassify].
	Classify func(ctx context.Context, err error) Outcome
	// OnStateChange, if set, is called after each change of state. Calls
	// are made in the order of the changes, one at a time, and never
	// with the breaker's lock held, so the callback may use the breaker.
	// Default nil.
	OnStateChange func(Transition)
	// Clock is the source of time. Default clock.Real.
	Clock clock.Clock
	// Rand returns uniform numbers in [0, 1) for OpenJitter. It is called
	// with the breaker's lock held. Default math/rand/v2's Float64.
	Rand func() float64
}

// FailureRateConfig returns the configuration weir's spec gives for calls
// to LLM and speech-to-text services: open when more than half of at least
// 10 calls in 30 s fail, and stay open 30 s. The other fields keep their
// defaults.
func FailureRateConfig(name string) Config {
	return Config{
		Name:      name,
		Strategy:  FailureRate(DefaultRate, DefaultMinCalls, DefaultWindow),
		OpenDelay: DefaultRateOpenDelay,
	}
}

// Transition describes a change of state, passed to Config.OnStateChange.
type Transition struct {
	// Name is the breaker's name.
	Name string
	// From and To are the states before and after the change.
	From, To State
	// At is the time of the change on the breaker's clock.
	At time.Time
	// Snapshot is the breaker just after the change.
	Snapshot Snapshot
}

// Counts are the outcomes a breaker has counted in its current period:
//
//   - Closed: Successes and Failures are what the strategy counts towards
//     tripping. CountInWindow counts the failures in its window, FailureRate
//     the successes and failures in its window, Consecutive the current run
//     of failures. CountInWindow and Consecutive do not count successes
//     (Successes is 0), which keeps a closed success to one atomic load.
//     Rejected is 0.
//   - Open: the counts at the moment the breaker opened (after Trip from
//     closed, the closed counts then), and Rejected, the calls refused
//     since.
//   - HalfOpen: the outcomes of this period's probes, and Rejected, the
//     calls refused since the breaker became half-open.
//
// ConsecutiveFailures is the current run of failures with no success
// between them; it is kept by every strategy.
type Counts struct {
	Successes           uint64
	Failures            uint64
	ConsecutiveFailures uint64
	Rejected            uint64
}

// Snapshot is a read-only view of a breaker.
type Snapshot struct {
	Name   string
	State  State
	Counts Counts
	// OpenedAt is when the breaker last opened; set while it is Open or
	// HalfOpen, zero while it is Closed.
	OpenedAt time.Time
	// NextProbeAt is when the open breaker will admit probes; zero unless
	// the breaker is Open.
	NextProbeAt time.Time
}

// Ticket is the admission of one call by [Breaker.Allow]. Pass it to
// [Breaker.Done] exactly once. It is a small value; the zero Ticket is
// never current, so Done ignores it.
type Ticket struct {
	gen   uint32
	state State
}

// State is the state in which the call was admitted: Closed, or HalfOpen
// for a probe.
func (t Ticket) State() State { return t.state }

// The state word packs what every call reads into one atomic uint64:
//
//	bits  0-1   State
//	bits  2-31  consecutive failures, saturating
//	bits 32-63  generation, bumped at every change of state
const (
	stateMask      = 1<<2 - 1
	consecShift    = 2
	maxConsecutive = 1<<30 - 1
	consecMask     = maxConsecutive << consecShift
	genShift       = 32
)

func pack(gen uint32, consec uint32, s State) uint64 {
	return uint64(gen)<<genShift | uint64(consec)<<consecShift | uint64(s)
}

func stateOf(w uint64) State   { return State(w & stateMask) }
func consecOf(w uint64) uint32 { return uint32(w&consecMask) >> consecShift }
func genOf(w uint64) uint32    { return uint32(w >> genShift) }

// Breaker is a circuit breaker. It is safe for concurrent use.
type Breaker struct {
	// word is read by every call; it is written only with mu held.
	word atomic.Uint64

	// Set by New, then read-only.
	name          string
	classify      func(context.Context, error) Outcome
	recordSuccess bool // the strategy counts successes
	openDelay     time.Duration
	openJitter    float64
	probes        int
	successRatio  float64
	onChange      func(Transition)
	clock         clock.Clock
	rand          func() float64
	epoch         time.Time // clock reading at New; times are ns since
	wallEpoch     time.Time // epoch without its monotonic reading

	// Keep the lock and what it guards off the cache line of word, which
	// every call reads.
	_ [64]byte

	mu        sync.Mutex
	tracker   tracker
	openedAt  int64
	nextProbe int64
	frozen    Counts // Open: the counts when the breaker opened
	rejected  uint64
	taken     int // HalfOpen: probe slots taken
	probeOK   uint64
	probeBad  uint64
	pending   []Transition // to deliver to onChange
	draining  bool         // a goroutine is delivering pending
}

// New returns a closed breaker. It fills the defaults into cfg, then
// returns an error wrapping [ErrInvalidConfig] that names the first bad
// field.
func New(cfg Config) (*Breaker, error) {
	cfg = withDefaults(cfg)
	if err := validate(cfg); err != nil {
		return nil, fmt.Errorf("new breaker %q: %v: %w", cfg.Name, err, ErrInvalidConfig)
	}
	clk := clock.Or(cfg.Clock)
	b := &Breaker{
		name:         cfg.Name,
		classify:     cfg.Classify,
		openDelay:    cfg.OpenDelay,
		openJitter:   cfg.OpenJitter,
		probes:       cfg.HalfOpenProbes,
		successRatio: cfg.HalfOpenSuccessRatio,
		onChange:     cfg.OnStateChange,
		clock:        clk,
		rand:         cfg.Rand,
		tracker:      cfg.Strategy.newTracker(),
	}
	b.recordSuccess = b.tracker.recordsSuccesses()
	b.epoch = clk.Now()
	b.wallEpoch = b.epoch.Round(0)
	b.tracker.reset(0)
	b.word.Store(pack(1, 0, Closed))
	return b, nil
}

func withDefaults(cfg Config) Config {
	if cfg.Strategy == nil {
		cfg.Strategy = CountInWindow(DefaultFailures, DefaultWindow)
	}
	if cfg.OpenDelay == 0 {
		cfg.OpenDelay = DefaultOpenDelay
	}
	if cfg.HalfOpenProbes == 0 {
		cfg.HalfOpenProbes = DefaultHalfOpenProbes
	}
	if cfg.HalfOpenSuccessRatio == 0 {
		cfg.HalfOpenSuccessRatio = DefaultHalfOpenSuccessRatio
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	return cfg
}

func validate(cfg Config) error {
	if err := cfg.Strategy.validate(); err != nil {
		return fmt.Errorf("Strategy: %w", err)
	}
	switch {
	case cfg.OpenDelay < 0:
		return fmt.Errorf("OpenDelay is %v, must not be negative", cfg.OpenDelay)
	case math.IsNaN(cfg.OpenJitter) || cfg.OpenJitter < 0 || cfg.OpenJitter >= 1:
		return fmt.Errorf("OpenJitter is %v, must be in [0, 1)", cfg.OpenJitter)
	case cfg.HalfOpenProbes < 1 || cfg.HalfOpenProbes > MaxHalfOpenProbes:
		return fmt.Errorf("HalfOpenProbes is %d, must be in [1, %d]", cfg.HalfOpenProbes, MaxHalfOpenProbes)
	case math.IsNaN(cfg.HalfOpenSuccessRatio) || cfg.HalfOpenSuccessRatio < 0 || cfg.HalfOpenSuccessRatio >= 1:
		return fmt.Errorf("HalfOpenSuccessRatio is %v, must be in [0, 1)", cfg.HalfOpenSuccessRatio)
	case !(float64(cfg.HalfOpenProbes) > cfg.HalfOpenSuccessRatio*float64(cfg.HalfOpenProbes)):
		return fmt.Errorf("HalfOpenSuccessRatio %v of %d probes can never be exceeded", cfg.HalfOpenSuccessRatio, cfg.HalfOpenProbes)
	}
	return nil
}

// Name returns the breaker's name.
func (b *Breaker) Name() string { return b.name }

// Do calls fn through the breaker. If the breaker refuses the call, Do
// returns an [*OpenError] without calling fn. Otherwise it returns fn's
// error unchanged, after recording the outcome that Config.Classify gives
// for it. If fn panics, the call counts as a failure and the panic goes
// on.
func (b *Breaker) Do(ctx context.Context, fn func(context.Context) error) error {
	t, err := b.Allow()
	if err != nil {
		return err
	}
	returned := false
	defer func() {
		if !returned {
			b.Done(t, Failure)
		}
	}()
	err = fn(ctx)
	returned = true
	b.Done(t, b.Outcome(ctx, err))
	return err
}

// Allow asks to make one call, for callers that decide its outcome
// themselves. If the breaker refuses, Allow returns an [*OpenError].
// Otherwise the caller makes the call and then passes the Ticket and the
// outcome to [Breaker.Done], exactly once; a half-open breaker holds the
// probe slot until then.
func (b *Breaker) Allow() (Ticket, error) {
	w := b.word.Load()
	if stateOf(w) == Closed {
		return Ticket{gen: genOf(w), state: Closed}, nil
	}
	return b.allowSlow()
}

func (b *Breaker) allowSlow() (Ticket, error) {
	b.mu.Lock()
	now := b.now()
	w := b.advanceLocked(now)
	var (
		t   Ticket
		err error
	)
	switch stateOf(w) {
	case Closed:
		t = Ticket{gen: genOf(w), state: Closed}
	case HalfOpen:
		if b.taken < b.probes {
			b.taken++
			t = Ticket{gen: genOf(w), state: HalfOpen}
		} else {
			b.rejected++
			err = &OpenError{Name: b.name, State: HalfOpen}
		}
	default:
		b.rejected++
		err = &OpenError{Name: b.name, State: Open, RetryIn: time.Duration(b.nextProbe - now)}
	}
	b.unlock()
	return t, err
}

// Done records the outcome of a call admitted by [Breaker.Allow]. An
// outcome whose ticket is from an earlier period (the breaker has changed
// state since the call was admitted, or was Reset) is dropped, so a slow
// call cannot disturb the period it outlived.
func (b *Breaker) Done(t Ticket, o Outcome) {
	if t.state == Closed {
		switch o {
		case Ignored:
			return
		case Success:
			w := b.word.Load()
			if genOf(w) != t.gen || (!b.recordSuccess && consecOf(w) == 0) {
				return
			}
		}
	}
	b.doneSlow(t, o)
}

func (b *Breaker) doneSlow(t Ticket, o Outcome) {
	b.mu.Lock()
	w := b.word.Load()
	if genOf(w) != t.gen {
		b.mu.Unlock()
		return
	}
	switch stateOf(w) {
	case Closed:
		switch o {
		case Ignored:
		case Success:
			if consecOf(w) != 0 {
				b.word.Store(w &^ consecMask)
			}
			if b.recordSuccess {
				if now := b.now(); b.tracker.success(now) {
					b.setLocked(Open, now)
				}
			}
		default:
			c := min(consecOf(w)+1, maxConsecutive)
			b.word.Store(pack(t.gen, c, Closed))
			if now := b.now(); b.tracker.failure(now, c) {
				b.setLocked(Open, now)
			}
		}
	case HalfOpen:
		switch o {
		case Ignored:
			b.taken--
		case Success:
			b.probeOK++
			if float64(b.probeOK) > b.successRatio*float64(b.probes) {
				b.setLocked(Closed, b.now())
			}
		default:
			b.probeBad++
			b.setLocked(Open, b.now())
		}
	}
	b.unlock()
}

// Outcome returns the outcome Config.Classify gives for a call's context
// and error.
func (b *Breaker) Outcome(ctx context.Context, err error) Outcome {
	if b.classify != nil {
		return b.classify(ctx, err)
	}
	if err == nil {
		return Success
	}
	return DefaultClassify(ctx, err)
}

// DefaultClassify is the classifier used when Config.Classify is nil:
//
//   - a nil error is a Success;
//   - context.Canceled or context.DeadlineExceeded while ctx is done is
//     Ignored: the caller gave up, which says nothing about the dependency
//     (the same errors with ctx still live, a timeout inside the
//     dependency, are failures);
//   - an error marked with [Ignore] is Ignored;
//   - any other error is a Failure.
func DefaultClassify(ctx context.Context, err error) Outcome {
	switch {
	case err == nil:
		return Success
	case ctx != nil && ctx.Err() != nil &&
		(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return Ignored
	case IsIgnored(err):
		return Ignored
	}
	return Failure
}

// State returns the breaker's state. An open breaker whose delay has
// passed becomes half-open here.
func (b *Breaker) State() State {
	w := b.word.Load()
	if stateOf(w) != Open {
		return stateOf(w)
	}
	b.mu.Lock()
	w = b.advanceLocked(b.now())
	b.unlock()
	return stateOf(w)
}

// Snapshot returns a view of the breaker. An open breaker whose delay has
// passed becomes half-open here.
func (b *Breaker) Snapshot() Snapshot {
	b.mu.Lock()
	now := b.now()
	w := b.advanceLocked(now)
	s := b.snapshotLocked(now, w)
	b.unlock()
	return s
}

// Trip opens the breaker, whatever its state, and starts a new open delay.
// Calls admitted before are dropped when they end.
func (b *Breaker) Trip() {
	b.mu.Lock()
	b.setLocked(Open, b.now())
	b.unlock()
}

// Reset closes the breaker, whatever its state, and clears its counts.
// Calls admitted before are dropped when they end.
func (b *Breaker) Reset() {
	b.mu.Lock()
	b.setLocked(Closed, b.now())
	b.unlock()
}

// now returns the clock's time in ns since New.
func (b *Breaker) now() int64 { return int64(b.clock.Now().Sub(b.epoch)) }

// at turns a time from now into a time.Time.
func (b *Breaker) at(ns int64) time.Time { return b.wallEpoch.Add(time.Duration(ns)) }

// advanceLocked moves an open breaker whose delay has passed to half-open,
// and returns the state word.
func (b *Breaker) advanceLocked(now int64) uint64 {
	w := b.word.Load()
	if stateOf(w) == Open && now >= b.nextProbe {
		b.setLocked(HalfOpen, now)
		w = b.word.Load()
	}
	return w
}

// setLocked moves the breaker to state to at now, starting a new period
// (and generation) even if the state does not change, and queues a
// Transition if it does.
func (b *Breaker) setLocked(to State, now int64) {
	w := b.word.Load()
	from := stateOf(w)
	switch to {
	case Open:
		switch from {
		case Closed:
			b.frozen = b.snapshotLocked(now, w).Counts
		case HalfOpen:
			b.frozen = Counts{Successes: b.probeOK, Failures: b.probeBad, ConsecutiveFailures: b.probeBad}
		}
		b.openedAt = now
		b.nextProbe = satAdd(now, b.jitteredDelay())
	case HalfOpen:
		b.taken, b.probeOK, b.probeBad = 0, 0, 0
	case Closed:
		b.tracker.reset(now)
	}
	b.rejected = 0
	gen := genOf(w) + 1
	if gen == 0 {
		gen = 1 // the zero Ticket must never be current
	}
	b.word.Store(pack(gen, 0, to))
	if b.onChange != nil && from != to {
		b.pending = append(b.pending, Transition{
			Name:     b.name,
			From:     from,
			To:       to,
			At:       b.at(now),
			Snapshot: b.snapshotLocked(now, b.word.Load()),
		})
	}
}

func (b *Breaker) jitteredDelay() int64 {
	d := float64(b.openDelay)
	if b.openJitter > 0 {
		u := b.rand()
		if !(u >= 0) { // also NaN
			u = 0
		}
		if u >= 1 {
			u = math.Nextafter(1, 0)
		}
		d *= 1 + b.openJitter*(2*u-1)
	}
	if d >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(d)
}

func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func (b *Breaker) snapshotLocked(now int64, w uint64) Snapshot {
	s := Snapshot{Name: b.name, State: stateOf(w)}
	switch s.State {
	case Closed:
		succ, fail := b.tracker.counts(now, consecOf(w))
		s.Counts = Counts{Successes: succ, Failures: fail, ConsecutiveFailures: uint64(consecOf(w))}
	case Open:
		s.Counts = b.frozen
		s.Counts.Rejected = b.rejected
		s.OpenedAt = b.at(b.openedAt)
		s.NextProbeAt = b.at(b.nextProbe)
	case HalfOpen:
		s.Counts = Counts{Successes: b.probeOK, Failures: b.probeBad, Rejected: b.rejected}
		s.OpenedAt = b.at(b.openedAt)
	}
	return s
}

// unlock releases mu and delivers the queued transitions, unless another
// goroutine is delivering them already: then that goroutine delivers these
// too, after its own, which keeps them in order.
func (b *Breaker) unlock() {
	if len(b.pending) == 0 || b.draining {
		b.mu.Unlock()
		return
	}
	b.drain()
}

func (b *Breaker) drain() {
	b.draining = true
	delivered := false
	defer func() {
		if !delivered { // a callback panicked: let the next change deliver
			b.mu.Lock()
			b.draining = false
			b.mu.Unlock()
		}
	}()
	for len(b.pending) > 0 {
		batch := b.pending
		b.pending = nil
		b.mu.Unlock()
		for _, tr := range batch {
			b.onChange(tr)
		}
		b.mu.Lock()
	}
	b.draining = false
	b.mu.Unlock()
	delivered = true
}
