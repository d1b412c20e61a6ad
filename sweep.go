package weir

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// sweepLimit is how many stuck jobs one sweep considers.
const sweepLimit = 1000

// SweepResult is what one stuck sweep did, by kind.
type SweepResult struct {
	// Requeued are the stuck running jobs taken back and made available
	// again, the stuck attempt counted, with an error of type stuck.
	Requeued map[string]int
	// SkippedBackoff are the stuck attempts left alone because they
	// started less than their kind's backoff for that attempt ago.
	SkippedBackoff map[string]int
	// MaxRetriesExceeded are the jobs whose stuck attempt was their last,
	// abandoned to the dead-letter store (reason max_attempts_exceeded:
	// spec 04's failed_max_retries).
	MaxRetriesExceeded map[string]int
	// Waiting are the stuck jobs due to run that no worker has taken: their
	// queue is not worked, or is far behind. The sweep leaves them queued.
	Waiting map[string]int
}

func (r SweepResult) kinds() map[string]bool {
	out := map[string]bool{}
	for _, m := range []map[string]int{r.Requeued, r.SkippedBackoff, r.MaxRetriesExceeded, r.Waiting} {
		for k := range m {
			out[k] = true
		}
	}
	return out
}

// stuckAfter is how long an attempt of kind may run before it is stuck.
func (c *Client) stuckAfter(kind string) time.Duration {
	if r := c.kinds[kind]; r != nil && r.cfg.StuckAfter > 0 {
		return r.cfg.StuckAfter
	}
	return c.cfg.StuckAfter
}

// minStuckAfter is the shortest StuckAfter of Config and the kinds the
// client registers.
func (c *Client) minStuckAfter() time.Duration {
	d := c.cfg.StuckAfter
	for kind := range c.kinds {
		d = min(d, c.stuckAfter(kind))
	}
	return d
}

// SweepStuck runs the stuck sweep once (a started client runs it every
// Config.SweepEvery). For the kinds this client registers (another
// process's kinds may allow their attempts longer), it looks at the
// attempts running longer than Config.StuckAfter, or their kind's
// KindConfig.StuckAfter, whose handler has not finished (it hangs, or
// ignores its context, while heartbeats keep its lease):
//
//   - once the kind's backoff for the attempt has also passed since it
//     started, the attempt is taken back: on the job's last attempt it is
//     abandoned (max_attempts_exceeded), otherwise the job is made
//     available again, the attempt counted; the handler has its context
//     cancelled, at once in this process, at its next heartbeat in
//     another;
//   - before that, it is skipped for backoff.
//
// It also counts, for every kind, the jobs due longer ago than StuckAfter
// that no worker has taken (their queue is not worked, or is far behind),
// and leaves them queued. A count that fails does not stop the sweep: the
// stuck attempts are still taken back, and the count's error is returned
// with the result. Sweeps by several processes at once are safe: an
// attempt is taken back by at most one of them.
func (c *Client) SweepStuck(ctx context.Context) (SweepResult, error) {
	start := c.clock.Now()
	res, err := c.sweepStuck(ctx, start)
	m := c.cfg.Metrics
	for kind := range res.kinds() {
		m.Swept(kind, res.Requeued[kind], res.SkippedBackoff[kind], res.MaxRetriesExceeded[kind])
	}
	m.SweepRun(c.clock.Now().Sub(start), err)
	return res, err
}

func (c *Client) sweepStuck(ctx context.Context, now time.Time) (SweepResult, error) {
	res := SweepResult{
		Requeued:           map[string]int{},
		SkippedBackoff:     map[string]int{},
		MaxRetriesExceeded: map[string]int{},
		Waiting:            map[string]int{},
	}
	// A count that fails (it reads every job kept, finished ones too)
	// does not keep the stuck attempts from being taken back: the sweep
	// goes on and reports the error with the rest.
	var errs []error
	before := now.Add(-c.cfg.StuckAfter)
	counts, err := c.ex.CountJobs(ctx, before)
	if err != nil {
		errs = append(errs, fmt.Errorf("count: %w", err))
	}
	for _, n := range counts {
		if n.State != weirtype.StateRunning && n.Stuck > 0 {
			res.Waiting[n.Kind] += n.Stuck
			c.log.Warn("stuck sweep: jobs due but not taken by any worker; is their queue worked?",
				"kind", n.Kind, "queue", n.Queue, "state", string(n.State), "jobs", n.Stuck, "waiting_longer_than", c.cfg.StuckAfter)
		}
	}
	// The running attempts are listed from the shortest threshold of the
	// kinds this client registers, so that a kind stuck sooner than
	// Config.StuckAfter is swept at its own threshold.
	jobs, err := c.ex.ListStuck(ctx, now.Add(-c.minStuckAfter()), sweepLimit)
	if err != nil {
		errs = append(errs, fmt.Errorf("list: %w", err))
	}
	for _, j := range jobs {
		stuckFor := now.Sub(j.AttemptedAt)
		if c.kinds[j.Kind] == nil || stuckFor <= c.stuckAfter(j.Kind) {
			continue // another process's kind, or its kind allows longer
		}
		log := c.log.With("job_id", j.ID, "kind", j.Kind, "attempt", j.Attempt, "stuck_for", stuckFor)
		if j.AttemptedAt.Add(c.nominalBackoff(j)).After(now) {
			res.SkippedBackoff[j.Kind]++
			continue
		}
		last := j.Attempt >= j.MaxAttempts
		lease := store.Lease{ID: j.ID, Owner: j.LeaseOwner, Attempt: j.Attempt}
		p := store.FailParams{
			Now:   now,
			Lease: lease,
			Error: weirtype.AttemptError{
				Attempt: j.Attempt, At: now, Type: weirtype.ErrorTypeStuck,
				Message: fmt.Sprintf("weir: attempt running for %v without finishing (worker %s); taken back by the stuck sweep", stuckFor.Round(time.Second), j.LeaseOwner),
			},
			RetryAt: now,
		}
		if last {
			p.Abandon, p.RetryAt = weirtype.AbandonMaxAttempts, time.Time{}
		}
		// The attempt, if this process runs it, may write nothing more:
		// its lease may come back equal, after a requeue.
		c.mu.Lock()
		r := c.running[j.ID]
		c.mu.Unlock()
		sctx, cancel := context.WithTimeout(ctx, c.storeTimeout())
		_, err := c.ex.Fail(sctx, p)
		cancel()
		switch {
		case errors.Is(err, store.ErrLeaseLost):
			continue // it finished, or another sweep took it
		case err != nil:
			errs = append(errs, fmt.Errorf("job %d: %w", j.ID, err))
			continue
		}
		if r != nil && r.lease == lease {
			c.supersede(r)
		}
		if last {
			res.MaxRetriesExceeded[j.Kind]++
			c.cfg.Metrics.DeadLettered(j.Kind, j.Queue, weirtype.AbandonMaxAttempts)
			log.Error("stuck sweep: job on its last attempt abandoned to the dead-letter store", "reason", string(weirtype.AbandonMaxAttempts), "attempted_at", j.AttemptedAt)
			continue
		}
		res.Requeued[j.Kind]++
		c.wake(j.Queue)
		log.Warn("stuck sweep: job taken back and requeued")
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("weir: stuck sweep: %w", err)
	}
	return res, nil
}

// nominalBackoff is the backoff, before jitter, of j's kind for the retry
// after its current attempt: the stuck sweep takes a running job back only
// once that long has passed since the attempt started, as spec 04 checks
// lastAttemptTime + delay < now. A kind this client does not register uses
// the default backoff.
func (c *Client) nominalBackoff(j *weirtype.Job) time.Duration {
	b := KindConfig{}.Backoff
	if r := c.kinds[j.Kind]; r != nil {
		b = r.cfg.Backoff
	}
	return b.Scheduled(j.Attempt)
}

// sweepLoop runs the stuck sweep every SweepEvery until Stop.
func (c *Client) sweepLoop() {
	defer c.loopsWG.Done()
	for {
		if !clock.Sleep(c.clock, c.cfg.SweepEvery, c.loopsStop) {
			return
		}
		ctx, cancel := c.untilStop()
		res, err := c.SweepStuck(ctx)
		c.loopFailed(ctx, "stuck sweep", err)
		cancel()
		if n := sum(res.Requeued) + sum(res.MaxRetriesExceeded) + sum(res.SkippedBackoff) + sum(res.Waiting); n > 0 {
			c.log.Info("stuck sweep done", "requeued", sum(res.Requeued), "skipped_backoff", sum(res.SkippedBackoff),
				"max_retries_exceeded", sum(res.MaxRetriesExceeded), "waiting", sum(res.Waiting))
		}
	}
}

// loopFailed logs err, what a run of a loop's work (what) on ctx, a
// context of untilStop not yet cancelled, returned: at Error, or at Info
// when Stop ended ctx, since a sweep interrupted by a shutdown has not
// failed (a vacuum of minutes, say: the next start sweeps again).
func (c *Client) loopFailed(ctx context.Context, what string, err error) {
	switch {
	case err == nil:
	case ctx.Err() != nil:
		c.log.Info(what+": interrupted by Stop", "err", err.Error())
	default:
		c.log.Error(what, "err", err.Error())
	}
}

// untilStop is the context of one run of a loop's work (a sweep, a
// listen): it ends when Stop begins (Stop does not wait for it) or when
// cancel is called.
func (c *Client) untilStop() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(c.loopsCtx)
	go func() {
		select {
		case <-c.loopsStop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// listenLoop wakes the producers when the store's database says a job
// became available (PostgreSQL LISTEN/NOTIFY), until Stop. A failed
// listen is logged and tried again after a doubling wait (polling covers
// the gap).
//
// A listen that ended after it had listened for writeRetryBase or more
// (its connection killed, a failover) is made again at once; failures
// after it back off. Once listening again, it wakes every producer: the
// jobs made available while no connection listened were announced to
// none, and would otherwise wait for the poll.
func (c *Client) listenLoop(n store.Notifier) {
	defer c.loopsWG.Done()
	var listening time.Time // when the last listen began to listen; zero for none
	missed := false         // announcements may have been lost since the last listen
	for failures := 0; ; {
		ctx, cancel := c.untilStop()
		listening = time.Time{}
		err := n.Listen(ctx, func() {
			failures, listening = 0, c.clock.Now()
			if missed {
				missed = false
				for q := range c.producers {
					c.wake(q)
				}
			}
		}, c.announced)
		stopped := ctx.Err() != nil
		cancel()
		if stopped {
			return
		}
		missed = true
		if !listening.IsZero() && c.clock.Now().Sub(listening) >= writeRetryBase {
			c.log.Warn("listen for new jobs: the connection ended; listening again", "err", fmt.Sprint(err))
			continue
		}
		failures++
		d := listenBackoff(failures)
		c.log.Warn("listen for new jobs failed; polling meanwhile", "retry_in", d, "err", fmt.Sprint(err))
		if !clock.Sleep(c.clock, d, c.loopsStop) {
			return
		}
	}
}

// listenBackoff is the wait before the listen that follows failures
// failed ones in a row: doubling from writeRetryBase up to listenRetryCap.
func listenBackoff(failures int) time.Duration {
	return backoff.Exponential(writeRetryBase, 2, listenRetryCap).Scheduled(failures)
}

// LateResults returns the late results that match f: successes of
// attempts that finished after their job's deadline had abandoned it.
func (c *Client) LateResults(ctx context.Context, f weirtype.LateResultFilter) ([]*weirtype.LateResult, error) {
	rs, err := c.ex.ListLateResults(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("weir: late results: %w", err)
	}
	return rs, nil
}

// AcceptLateResult applies the late result with the id: its job, abandoned
// past its deadline, becomes completed and its dead letter is deleted.
// It fails with store.ErrNotFound, store.ErrFinal (accepted already) or
// store.ErrConflict (the job was requeued, completed or purged since).
func (c *Client) AcceptLateResult(ctx context.Context, id int64) (*weirtype.LateResult, error) {
	lr, err := c.ex.AcceptLateResult(ctx, c.clock.Now(), id)
	if err != nil {
		return nil, fmt.Errorf("weir: accept late result %d: %w", id, err)
	}
	c.log.Info("late result accepted; the job is completed", "late_result_id", id, "job_id", lr.JobID, "kind", lr.Kind)
	return lr, nil
}
