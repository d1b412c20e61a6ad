package weir

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// KindBreaker is the circuit breaker a kind names (KindConfig.Breaker): a
// *breaker.Breaker, through which the kind's worker calls its
// dependency.
type KindBreaker interface {
	// Snapshot returns the breaker's state and, while it is open, when it
	// admits its next probe.
	Snapshot() breaker.Snapshot
}

// PauseParams names what Client.Pause pauses, and says who and why.
type PauseParams struct {
	// Queue is the queue paused. Default the queue of Kind when the
	// client registers Kind; otherwise required. A queue the client does
	// not work must have a job (in any state) or a pause.
	Queue string
	// Kind, when set, pauses only the jobs of that kind in Queue. A kind
	// the client does not register must have a job in Queue (in any
	// state): a mistyped name is refused rather than pausing nothing.
	Kind string
	// By and Reason are shown to operators with the pause.
	By, Reason string
}

// Pause pauses a queue, or a kind within a queue, in the store: from its
// next claim on, no process claims the jobs it holds (they keep their
// attempts and wait, nothing is snoozed); running jobs finish. It lasts
// until Resume. Pausing what is paused already keeps its PausedAt and
// takes the new By and Reason. A queue this client works may be paused
// before its first job; an empty queue name, a queue the client does not
// work that has no job and no pause, or a kind neither registered with
// this client nor found in the queue, is an error (wrapping
// store.ErrNotFound for the last two).
func (c *Client) Pause(ctx context.Context, p PauseParams) (*weirtype.Pause, error) {
	r := c.kinds[p.Kind]
	if p.Queue == "" && r != nil {
		p.Queue = r.cfg.Queue
	}
	if p.Queue == "" {
		return nil, errors.New("weir: pause: the queue is empty (name a queue, or a kind this client registers)")
	}
	paused, err := c.ex.Pause(ctx, c.clock.Now(), store.PauseParams{
		Queue: p.Queue, Kind: p.Kind, By: p.By, Reason: p.Reason, KnownKind: r != nil, KnownQueue: c.producers[p.Queue] != nil,
	})
	if err != nil {
		return nil, fmt.Errorf("weir: pause: %w", err)
	}
	c.log.Info("paused", "queue", p.Queue, "kind", p.Kind, "by", p.By, "reason", p.Reason)
	return paused, nil
}

// Resume ends every pause of queue, or of kind within queue (kind
// empty: the pauses of the whole queue), whatever holds it: an
// operator's, a breaker's, a Retry-After's. It returns the pauses it
// ended, or an error wrapping store.ErrNotFound when there was none. The
// queue's producer in this client claims at once; other processes at
// their next poll. A kind whose breaker is still open in some process is
// paused again when that breaker next opens; meanwhile the calls it
// refuses are snoozed to its probe time, their attempts given back.
func (c *Client) Resume(ctx context.Context, queue, kind string) ([]*weirtype.Pause, error) {
	if queue == "" {
		if r := c.kinds[kind]; r != nil {
			queue = r.cfg.Queue
		}
	}
	if queue == "" {
		return nil, errors.New("weir: resume: the queue is empty (name a queue, or a kind this client registers)")
	}
	ended, err := c.ex.Resume(ctx, queue, kind, "")
	if err != nil {
		return nil, fmt.Errorf("weir: resume: %w", err)
	}
	c.log.Info("resumed", "queue", queue, "kind", kind)
	c.wake(queue)
	return ended, nil
}

// ListPauses returns the pauses that hold now, by queue, kind and cause.
func (c *Client) ListPauses(ctx context.Context) ([]*weirtype.Pause, error) {
	ps, err := c.ex.ListPauses(ctx, c.clock.Now())
	if err != nil {
		return nil, fmt.Errorf("weir: list pauses: %w", err)
	}
	return ps, nil
}

// holdKey names a hold this client wrote: a kind of a queue, and a cause.
type holdKey struct {
	queue, kind string
	cause       weirtype.PauseCause
}

// breakerOpen returns, when err is a refusal of the kind's open breaker,
// the snooze that replaces it: the job waits, its attempt given back,
// until the breaker's next probe (at least PollEvery).
func (c *Client) breakerOpen(reg *registration, err error) (error, bool) {
	if err == nil || reg.cfg.Breaker == nil {
		return err, false // no allocation of open on the common path
	}
	var open *breaker.OpenError
	if !errors.As(err, &open) {
		return err, false
	}
	return JobSnooze(max(open.RetryIn, c.cfg.PollEvery)), true
}

// holdAfter writes the holds the end of an attempt of j calls for, before
// the attempt's outcome is recorded: while the kind's breaker is open, a
// breaker pause of the kind until its next probe; when err carries a
// retry-after hint and the kind names a RateLimitKey, a retry_after pause,
// until the hint's end (at most the kind's MaxRetryAfter), of every kind
// of this client that names the key. A hold that fails to be written is
// logged: the job's own outcome is recorded all the same.
func (c *Client) holdAfter(log *slog.Logger, reg *registration, j *weirtype.Job, err error, now time.Time) {
	if b := reg.cfg.Breaker; b != nil {
		if s := b.Snapshot(); s.State == breaker.Open && s.NextProbeAt.After(now) {
			c.hold(log, store.PauseParams{Queue: j.Queue, Kind: j.Kind, Cause: weirtype.PauseBreaker, By: s.Name,
				Reason: "circuit breaker is open", Until: s.NextProbeAt, KnownKind: true}, now)
		}
	}
	key := reg.cfg.RateLimitKey
	if key == "" || err == nil {
		return
	}
	var snooze *snoozeError
	if errors.As(err, &snooze) {
		return
	}
	h, ok := retry.AfterHint(err)
	if !ok || h <= 0 {
		return
	}
	until := now.Add(min(h, reg.cfg.MaxRetryAfter))
	for kind, r := range c.kinds {
		if r.cfg.RateLimitKey == key {
			c.hold(log, store.PauseParams{Queue: r.cfg.Queue, Kind: kind, Cause: weirtype.PauseRetryAfter, By: key,
				Reason: fmt.Sprintf("retry-after %v from a job of kind %s", h, j.Kind), Until: until, KnownKind: true}, now)
		}
	}
}

// hold writes the pause p at now, unless this client wrote one of its
// queue, kind and cause lasting as long already.
func (c *Client) hold(log *slog.Logger, p store.PauseParams, now time.Time) {
	k := holdKey{p.Queue, p.Kind, p.Cause}
	c.holdsMu.Lock()
	if !c.holds[k].Before(p.Until) {
		c.holdsMu.Unlock()
		return
	}
	c.holds[k] = p.Until
	c.holdsMu.Unlock()
	ctx, cancel := c.storeCtx()
	_, err := c.ex.Pause(ctx, now, p)
	cancel()
	if err != nil {
		c.holdsMu.Lock()
		delete(c.holds, k)
		c.holdsMu.Unlock()
		log.Warn("hold the kind: write failed; its jobs are still claimed", "hold_kind", p.Kind, "cause", string(p.Cause), "err", err.Error())
		return
	}
	log.Warn("kind held: its jobs are not claimed until then", "hold_queue", p.Queue, "hold_kind", p.Kind,
		"cause", string(p.Cause), "by", p.By, "until", p.Until)
}
