package breaker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/resilience/breaker"
)

// model is a plain reference breaker, written for clarity rather than
// speed: it keeps every outcome of the period and recomputes the counts
// from them. Times are durations since t0.
type model struct {
	kind     string // "count", "rate" or "consecutive"
	n        int    // count and consecutive: failures that open
	window   time.Duration
	rate     float64
	minCalls int
	delay    time.Duration
	probes   int
	ratio    float64

	now   time.Duration
	state breaker.State
	gen   int

	// Closed: the outcomes of the period, oldest first.
	outcomes []record
	run      int // consecutive failures

	// Open.
	frozen              breaker.Counts
	openedAt, nextProbe time.Duration
	rejected            uint64

	// HalfOpen.
	taken     int
	good, bad uint64
}

type record struct {
	at     time.Duration
	failed bool
}

type modelTicket struct {
	gen   int
	state breaker.State
}

func (m *model) strategy() breaker.Strategy {
	switch m.kind {
	case "count":
		return breaker.CountInWindow(m.n, m.window)
	case "rate":
		return breaker.FailureRate(m.rate, m.minCalls, m.window)
	}
	return breaker.Consecutive(m.n)
}

// live reports whether an outcome at at still counts at now.
func (m *model) live(at time.Duration) bool {
	if m.kind == "count" {
		return m.now-at < m.window
	}
	// Buckets of window/10: the outcome counts while its bucket is one of
	// the last 10.
	g := m.window / 10
	return floor(at, g) > floor(m.now, g)-10
}

func floor(a, b time.Duration) time.Duration {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func (m *model) closedCounts() breaker.Counts {
	c := breaker.Counts{ConsecutiveFailures: uint64(m.run)}
	if m.kind == "consecutive" {
		c.Failures = uint64(m.run)
		return c
	}
	for _, r := range m.outcomes {
		if !m.live(r.at) {
			continue
		}
		if r.failed {
			c.Failures++
		} else if m.kind == "rate" {
			c.Successes++
		}
	}
	return c
}

func (m *model) tripped() bool {
	switch m.kind {
	case "consecutive":
		return m.run >= m.n
	case "count":
		var failed []time.Duration
		for _, r := range m.outcomes {
			if r.failed {
				failed = append(failed, r.at)
			}
		}
		return len(failed) >= m.n && m.now-failed[len(failed)-m.n] < m.window
	}
	c := m.closedCounts()
	calls := c.Successes + c.Failures
	return calls >= uint64(m.minCalls) && float64(c.Failures)/float64(calls) > m.rate
}

func (m *model) set(to breaker.State) {
	from := m.state
	switch to {
	case breaker.Open:
		switch from {
		case breaker.Closed:
			m.frozen = m.closedCounts()
		case breaker.HalfOpen:
			m.frozen = breaker.Counts{Successes: m.good, Failures: m.bad, ConsecutiveFailures: m.bad}
		}
		m.openedAt, m.nextProbe = m.now, m.now+m.delay
	case breaker.HalfOpen:
		m.taken, m.good, m.bad = 0, 0, 0
	case breaker.Closed:
		m.outcomes = nil
	}
	m.run, m.rejected = 0, 0
	m.state = to
	m.gen++
}

func (m *model) wake() {
	if m.state == breaker.Open && m.now >= m.nextProbe {
		m.set(breaker.HalfOpen)
	}
}

// allow returns the ticket, or the state and RetryIn of the refusal.
func (m *model) allow() (modelTicket, *breaker.OpenError) {
	m.wake()
	switch m.state {
	case breaker.Closed:
		return modelTicket{m.gen, breaker.Closed}, nil
	case breaker.HalfOpen:
		if m.taken < m.probes {
			m.taken++
			return modelTicket{m.gen, breaker.HalfOpen}, nil
		}
		m.rejected++
		return modelTicket{}, &breaker.OpenError{State: breaker.HalfOpen}
	}
	m.rejected++
	return modelTicket{}, &breaker.OpenError{State: breaker.Open, RetryIn: m.nextProbe - m.now}
}

func (m *model) done(t modelTicket, o breaker.Outcome) {
	if t.gen != m.gen || (o == breaker.Ignored && t.state == breaker.Closed) {
		return
	}
	if m.state == breaker.HalfOpen {
		switch o {
		case breaker.Ignored:
			m.taken--
		case breaker.Success:
			m.good++
			if float64(m.good) > m.ratio*float64(m.probes) {
				m.set(breaker.Closed)
			}
		default:
			m.bad++
			m.set(breaker.Open)
		}
		return
	}
	failed := o != breaker.Success
	if failed {
		m.run++
	} else {
		m.run = 0
	}
	if m.kind != "consecutive" && (failed || m.kind == "rate") {
		m.outcomes = append(m.outcomes, record{m.now, failed})
	}
	if (failed || m.kind == "rate") && m.tripped() {
		m.set(breaker.Open)
	}
}

func (m *model) snapshot() breaker.Snapshot {
	m.wake()
	s := breaker.Snapshot{State: m.state}
	switch m.state {
	case breaker.Closed:
		s.Counts = m.closedCounts()
	case breaker.Open:
		s.Counts = m.frozen
		s.Counts.Rejected = m.rejected
		s.OpenedAt, s.NextProbeAt = t0.Add(m.openedAt), t0.Add(m.nextProbe)
	case breaker.HalfOpen:
		s.Counts = breaker.Counts{Successes: m.good, Failures: m.bad, Rejected: m.rejected}
		s.OpenedAt = t0.Add(m.openedAt)
	}
	return s
}

func sameSnapshot(a, b breaker.Snapshot) bool {
	return a.State == b.State && a.Counts == b.Counts &&
		a.OpenedAt.Equal(b.OpenedAt) && a.NextProbeAt.Equal(b.NextProbeAt)
}

// TestMatchesModel runs random sequences of calls, interleaved outcomes,
// clock moves, trips and resets against a breaker and the model, and
// checks that they agree on every admission, refusal and snapshot.
func TestMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := &model{
			kind:     rapid.SampledFrom([]string{"count", "rate", "consecutive"}).Draw(rt, "kind"),
			n:        rapid.IntRange(1, 6).Draw(rt, "n"),
			window:   time.Duration(rapid.IntRange(1, 10).Draw(rt, "window s")) * time.Second,
			rate:     rapid.SampledFrom([]float64{0, 0.25, 0.5, 0.75}).Draw(rt, "rate"),
			minCalls: rapid.IntRange(1, 10).Draw(rt, "minCalls"),
			delay:    time.Duration(rapid.IntRange(1, 10).Draw(rt, "delay s")) * time.Second,
			probes:   rapid.IntRange(1, 4).Draw(rt, "probes"),
			ratio:    rapid.SampledFrom([]float64{0.1, 0.5, 0.8, 0.9}).Draw(rt, "ratio"),
			state:    breaker.Closed,
		}
		clk := clock.NewFake(t0)
		b, err := breaker.New(breaker.Config{
			Strategy:             m.strategy(),
			OpenDelay:            m.delay,
			HalfOpenProbes:       m.probes,
			HalfOpenSuccessRatio: m.ratio,
			Clock:                clk,
		})
		if err != nil {
			rt.Fatal(err)
		}
		type pair struct {
			real  breaker.Ticket
			model modelTicket
		}
		var tickets []pair
		outcome := rapid.SampledFrom([]breaker.Outcome{breaker.Success, breaker.Failure, breaker.Ignored})

		allow := func(rt *rapid.T) (pair, bool) {
			tk, err := b.Allow()
			mt, merr := m.allow()
			var oe *breaker.OpenError
			switch {
			case merr == nil && err != nil:
				rt.Fatalf("Allow = %v, want a %v ticket", err, mt.state)
			case merr != nil && !errors.As(err, &oe):
				rt.Fatalf("Allow = %v, want %v", err, merr)
			case merr != nil && (oe.State != merr.State || oe.RetryIn != merr.RetryIn):
				rt.Fatalf("Allow = %+v, want %+v", oe, merr)
			case merr == nil && tk.State() != mt.state:
				rt.Fatalf("ticket state %v, want %v", tk.State(), mt.state)
			}
			return pair{tk, mt}, merr == nil
		}

		rt.Repeat(map[string]func(*rapid.T){
			"allow": func(rt *rapid.T) {
				if p, ok := allow(rt); ok {
					tickets = append(tickets, p)
				}
			},
			"done": func(rt *rapid.T) {
				if len(tickets) == 0 {
					rt.Skip("no call in flight")
				}
				i := rapid.IntRange(0, len(tickets)-1).Draw(rt, "ticket")
				o := outcome.Draw(rt, "outcome")
				b.Done(tickets[i].real, o)
				m.done(tickets[i].model, o)
				tickets = append(tickets[:i], tickets[i+1:]...)
			},
			"call": func(rt *rapid.T) {
				o := outcome.Draw(rt, "outcome")
				if p, ok := allow(rt); ok {
					b.Done(p.real, o)
					m.done(p.model, o)
				}
			},
			"advance": func(rt *rapid.T) {
				d := time.Duration(rapid.IntRange(0, 24).Draw(rt, "half seconds"))*500*time.Millisecond +
					rapid.SampledFrom([]time.Duration{-1, 0, 0, 1}).Draw(rt, "nudge")
				d = max(d, 0)
				clk.Advance(d)
				m.now += d
			},
			"trip": func(*rapid.T) {
				b.Trip()
				m.set(breaker.Open)
			},
			"reset": func(*rapid.T) {
				b.Reset()
				m.set(breaker.Closed)
			},
			"": func(rt *rapid.T) {
				got, want := b.Snapshot(), m.snapshot()
				if !sameSnapshot(got, want) {
					rt.Fatalf("snapshot\n got %+v\nwant %+v", got, want)
				}
			},
		})
	})
}

// TestJitterBounds checks that every opening waits within
// [d×(1-j), d×(1+j)], whatever Rand returns.
func TestJitterBounds(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		d := time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(time.Hour)).Draw(rt, "delay"))
		j := rapid.Float64Range(0, 0.99).Draw(rt, "jitter")
		u := rapid.Float64Range(-1, 2).Draw(rt, "u")
		clk := clock.NewFake(t0)
		b, err := breaker.New(breaker.Config{OpenDelay: d, OpenJitter: j, Clock: clk, Rand: func() float64 { return u }})
		if err != nil {
			rt.Fatal(err)
		}
		b.Trip()
		got := b.Snapshot().NextProbeAt.Sub(t0)
		lo := time.Duration(float64(d) * (1 - j))
		hi := time.Duration(float64(d) * (1 + j))
		if got < lo-1 || got > hi+1 {
			rt.Fatalf("delay %v outside [%v, %v]", got, lo, hi)
		}
		var oe *breaker.OpenError
		if err := b.Do(context.Background(), ok); !errors.As(err, &oe) || oe.RetryIn != got {
			rt.Fatalf("Do = %v, want RetryIn %v", err, got)
		}
	})
}
