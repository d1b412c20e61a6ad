package outbox

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/breaker"
)

// guard is the relay's gate on the broker: its breaker, and on top of it
// the relay's own wait before a probe once the breaker has opened. That
// wait grows with the opens in a row (Config.ProbeAfter), so that a short
// outage costs a short pause and a long one few probes, and it ends at
// once when the broker reports that it has connected again. The guard
// logs each change of the breaker's state it sees: the relay makes every
// call of the breaker through it, so it sees each change the relay's
// calls make.
type guard struct {
	br    *breaker.Breaker
	clock clock.Clock
	log   *slog.Logger
	probe backoff.Backoff
	conn  broker.Connectivity // nil when the broker does not report its connection

	// holding is set while the relay holds its probe back (probeAt), so
	// that a closed breaker costs a publish one atomic load.
	holding atomic.Bool
	// closed is set while the breaker was last seen closed.
	closed atomic.Bool

	mu       sync.Mutex
	seen     breaker.State // the breaker's state when last looked at
	openedAt time.Time     // its Snapshot().OpenedAt then, while open
	opens    int           // opens since it was last closed
	since    time.Time     // when the first of them was seen
	probeAt  time.Time     // no probe before, unless the broker reconnected
	connects uint64        // the broker's connection count at the last open
}

func newGuard(br *breaker.Breaker, b broker.Broker, clk clock.Clock, log *slog.Logger, probe backoff.Backoff) *guard {
	g := &guard{br: br, clock: clk, log: log, probe: probe, seen: breaker.Closed}
	g.conn, _ = b.(broker.Connectivity)
	g.closed.Store(true)
	return g
}

// allow asks to publish: it returns the relay's own *breaker.OpenError
// while the relay holds its probe back, and the breaker's answer after.
func (g *guard) allow() (breaker.Ticket, error) {
	if wait := g.wait(); wait > 0 {
		return breaker.Ticket{}, &breaker.OpenError{Name: g.br.Name(), State: breaker.Open, RetryIn: wait}
	}
	t, err := g.br.Allow()
	g.observe(nil)
	return t, err
}

// done records the outcome of a publish that allow admitted; cause is its
// error, logged if the breaker opens on it.
func (g *guard) done(t breaker.Ticket, o breaker.Outcome, cause error) {
	g.br.Done(t, o)
	g.observe(cause)
}

// wait returns how long the relay still holds its probe back: zero when
// it may ask the breaker. The hold ends early once a broker that reports
// its connection has connected again since the breaker opened.
func (g *guard) wait() time.Duration {
	if !g.holding.Load() {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.holding.Load() {
		return 0
	}
	now := g.clock.Now()
	left := g.probeAt.Sub(now)
	if left > 0 && g.conn != nil {
		if up, n := g.conn.Connected(); up && n != g.connects {
			g.log.Info("outbox: the broker has reconnected; probing it now", "probe_was_in", left)
			left = 0
		}
	}
	if left > 0 {
		return left
	}
	g.holding.Store(false)
	return 0
}

// paused reports how long the relay should wait before it claims more: the
// rest of its hold, or poll, while the breaker itself is open. It is at
// most poll, so that a reconnect is seen within it.
func (g *guard) paused(poll time.Duration) time.Duration {
	if w := g.wait(); w > 0 {
		return min(w, poll)
	}
	if !g.closed.Load() && g.br.State() == breaker.Open {
		return poll
	}
	return 0
}

// observe logs the breaker's change of state since it was last looked at,
// and starts the relay's hold when it has opened.
func (g *guard) observe(cause error) {
	s := g.br.State()
	if s == breaker.Closed && g.closed.Load() {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock.Now()
	switch s {
	case breaker.Open:
		snap := g.br.Snapshot()
		if g.seen == breaker.Open && snap.OpenedAt.Equal(g.openedAt) {
			return // seen already
		}
		g.openedAt = snap.OpenedAt
		g.opens++
		if g.opens == 1 {
			g.since = now
		}
		hold := g.probe.Next(g.opens, 0)
		g.probeAt = now.Add(hold)
		if g.conn != nil {
			_, g.connects = g.conn.Connected()
		}
		g.holding.Store(true)
		attrs := []any{"breaker", g.br.Name(), "opens_in_a_row", g.opens, "failures", snap.Counts.Failures, "probe_in", hold}
		if cause != nil {
			attrs = append(attrs, "err", cause.Error())
		}
		g.log.Warn("outbox: the broker's breaker opened; publishing paused", attrs...)
	case breaker.HalfOpen:
		if g.seen != breaker.HalfOpen {
			g.log.Info("outbox: the broker's breaker is half-open; probing the broker", "breaker", g.br.Name(), "paused_for", now.Sub(g.since))
		}
	case breaker.Closed:
		if g.seen != breaker.Closed {
			g.log.Info("outbox: the broker's breaker closed; publishing resumed", "breaker", g.br.Name(), "paused_for", now.Sub(g.since), "opens", g.opens)
		}
		g.opens = 0
		g.holding.Store(false)
	}
	g.seen = s
	g.closed.Store(s == breaker.Closed)
}
