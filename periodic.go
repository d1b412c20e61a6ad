package weir

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/schedule"
	"github.com/weirhq/weir/store"
)

// PeriodicJob is a job that a started client inserts at every tick of its
// schedule. Each tick t is inserted with the idempotency key
// "periodic/<Name>/<t in UTC, RFC 3339>" (for example
// "periodic/cleanup/2026-01-21T02:00:00Z") and ScheduledAt t, so any number
// of clients with the same periodic job make one job per tick between
// them, and a restarted client never makes a tick's job twice. A re-insert
// of a tick never reclaims its job, however long it has been running: a
// periodic job whose worker died is rescued through its lease, like any
// other.
//
// At Start the client inserts the schedule's most recent tick at or before
// the current time (a duplicate, doing nothing, when the job of that tick
// was made already), so a process restarted just after a tick does not lose
// it. Ticks before that one are not inserted: the client keeps no record of
// when it last ran, so there is no catch-up of a longer outage. While
// running, a client that finds several ticks passed at once (its process
// was paused, or its clock jumped) inserts only the latest and logs at Warn
// how many it skipped.
type PeriodicJob struct {
	// Name identifies the periodic job in its idempotency keys, so keep it
	// stable across releases: renaming a job makes a restarted client
	// insert its current tick again. Required; unique among
	// Config.Periodic.
	Name string
	// Schedule is the schedule's spec, as schedule.Parse reads it: "every
	// 15 minutes", "daily at 02:00", "30 9 * * MON-FRI",
	// "CRON_TZ=Europe/Paris 0 2 * * *". A spec rather than a
	// schedule.Schedule, so that every process reads the same text from
	// its configuration and computes the same whole-second ticks, which
	// the idempotency keys depend on. Required.
	Schedule string
	// Args is the job inserted at each tick. Required. Its kind need not
	// be registered with this client, as with Insert (another process may
	// run it), unless this client works the job's queue: it would claim
	// the job and abandon it for want of a worker, so NewClient refuses
	// that.
	Args JobArgs
	// Opts are the options of each tick's insert. IdempotencyKey,
	// ScheduledAt and DeadlineAt must be zero: the client sets the first
	// two for each tick, and a fixed deadline cannot suit every tick.
	// Source defaults to "periodic/<Name>". Nil takes every default.
	Opts *InsertOpts
}

// periodicJob is a checked PeriodicJob: its parsed schedule and the
// insert of its ticks, without the key and the time.
type periodicJob struct {
	name   string
	sched  schedule.Schedule
	params store.InsertParams
}

// periodicStuckAfter is the InsertParams.StuckAfter of a tick's insert: a
// re-insert of a tick (by a client starting while the tick's job runs)
// must never reclaim it and run it a second time at once.
const periodicStuckAfter = 100 * 365 * 24 * time.Hour

// maxTickWalk bounds how many ticks the client walks through when it
// finds that several passed at once, which also bounds the count it logs.
const maxTickWalk = 10_000

// periodicKey is the idempotency key of the tick at of the periodic job
// name.
func periodicKey(name string, at time.Time) string {
	return "periodic/" + name + "/" + at.UTC().Format(time.RFC3339)
}

// newPeriodic checks the periodic jobs of c's config.
func (c *Client) newPeriodic(jobs []PeriodicJob) ([]*periodicJob, error) {
	var out []*periodicJob
	seen := map[string]bool{}
	for i, pj := range jobs {
		bad := func(format string, args ...any) ([]*periodicJob, error) {
			return nil, fmt.Errorf("weir: Config.Periodic[%d] %q: "+format, append([]any{i, pj.Name}, args...)...)
		}
		if pj.Name == "" {
			return nil, fmt.Errorf("weir: Config.Periodic[%d]: Name is empty", i)
		}
		if seen[pj.Name] {
			return bad("Name is used by an earlier periodic job")
		}
		seen[pj.Name] = true
		sched, err := schedule.Parse(pj.Schedule)
		if err != nil {
			return bad("Schedule: %w", err)
		}
		if pj.Args == nil {
			return bad("Args is nil")
		}
		kind := pj.Args.Kind()
		if kind == "" {
			return bad("%T.Kind() is empty", pj.Args)
		}
		var opts InsertOpts
		if pj.Opts != nil {
			opts = *pj.Opts
		}
		switch {
		case opts.IdempotencyKey != "":
			return bad("Opts.IdempotencyKey is set; the client sets it for each tick")
		case !opts.ScheduledAt.IsZero():
			return bad("Opts.ScheduledAt is set; the client sets it for each tick")
		case !opts.DeadlineAt.IsZero():
			return bad("Opts.DeadlineAt is set; a fixed deadline cannot suit every tick")
		}
		if opts.Source == "" {
			opts.Source = "periodic/" + pj.Name
		}
		params, err := c.insertParams(time.Time{}, pj.Args, &opts)
		if err != nil {
			return bad("%w", err)
		}
		params.StuckAfter = periodicStuckAfter
		params.DeadlineAt = time.Time{} // set for each tick, from its time
		if _, err := params.Normalize(); err != nil {
			return bad("%w", err)
		}
		if _, works := c.cfg.Queues[queueOf(params)]; works && len(c.kinds) > 0 && c.kinds[kind] == nil {
			return bad("kind %q has no worker in this client, which works its queue %q and would abandon its jobs; register the kind or insert it in a queue another process works", kind, queueOf(params))
		}
		out = append(out, &periodicJob{name: pj.Name, sched: sched, params: params})
	}
	return out, nil
}

func queueOf(p store.InsertParams) string {
	if p.Queue == "" {
		return store.DefaultQueue
	}
	return p.Queue
}

// runPeriodic inserts p's ticks until Stop: at first its most recent tick
// at or before start, then each tick when it comes. A failed insert is
// retried every PollEvery until the next tick, which replaces it.
func (c *Client) runPeriodic(p *periodicJob, start time.Time) {
	defer c.periodicWG.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	log := c.log.With(slog.String("periodic", p.name), slog.String("kind", p.params.Kind))

	due := prevTick(p.sched, start) // the tick to insert; zero for none
	last := due                     // the latest tick handled
	if last.IsZero() {
		last = start
	}
	for {
		if !due.IsZero() && c.insertTick(ctx, log, p, due) {
			due = time.Time{}
		}
		now := c.clock.Now()
		next := p.sched.Next(last)
		var wait time.Duration
		switch {
		case next.IsZero() && due.IsZero():
			log.Warn("the periodic job's schedule has no tick in the next ten years", "schedule", p.sched.String())
			<-c.stopping
			return
		case next.IsZero():
			wait = c.cfg.PollEvery
		case !due.IsZero():
			wait = min(next.Sub(now), c.cfg.PollEvery)
		default:
			wait = next.Sub(now)
		}
		if !clock.Sleep(c.clock, wait, c.stopping) {
			return
		}
		now = c.clock.Now()
		if next.IsZero() || next.After(now) {
			continue // retry the failed insert of due
		}
		latest, n := lastTick(p.sched, next, now)
		skipped := n - 1
		if !due.IsZero() {
			skipped++
		}
		if skipped > 0 {
			log.Warn("periodic ticks passed while the client could not insert them; inserting only the latest",
				"skipped", skipped, "tick", latest)
		}
		due, last = latest, latest
	}
}

// insertTick inserts p's job of the tick at, and reports whether the
// insert was done (or found done).
func (c *Client) insertTick(ctx context.Context, log *slog.Logger, p *periodicJob, at time.Time) bool {
	ip := p.params
	ip.IdempotencyKey = periodicKey(p.name, at)
	ip.ScheduledAt = at
	if r := c.kinds[ip.Kind]; r != nil && r.cfg.SLA > 0 {
		ip.DeadlineAt = at.Add(r.cfg.SLA)
	}
	rs, err := c.ex.Insert(ctx, c.clock.Now(), []store.InsertParams{ip})
	if err != nil {
		if !errors.Is(err, context.Canceled) || ctx.Err() == nil {
			log.Error("insert the periodic job", "tick", at, "err", err.Error())
		}
		return false
	}
	r := rs[0]
	c.cfg.Metrics.Enqueued(r.Job.Kind, r.Job.Queue, r.Outcome)
	if r.Outcome.Runs() {
		c.wake(r.Job.Queue)
		log.Info("periodic job inserted", "job_id", r.Job.ID, "tick", at)
	} else {
		log.Debug("periodic job of the tick exists", "job_id", r.Job.ID, "tick", at, "outcome", string(r.Outcome))
	}
	return true
}

// prevTick returns the last tick of s at or before now, or the zero time
// if s had none in about the eleven years before now. It relies on ticks
// being whole seconds, as those of schedule.Parse are.
func prevTick(s schedule.Schedule, now time.Time) time.Time {
	const lookBack = 11 * 366 * 24 * time.Hour
	// has reports whether s has a tick in (a, now].
	has := func(a time.Time) bool {
		t := s.Next(a)
		return !t.IsZero() && !t.After(now)
	}
	w := time.Second
	for !has(now.Add(-w)) {
		if w > lookBack {
			return time.Time{}
		}
		w *= 2
	}
	// A tick lies in (lo, now] and none in (hi, now]: narrow (lo, hi] to
	// a second, which holds one whole-second instant, the last tick.
	lo, hi := now.Add(-w), now
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2)
		if has(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return s.Next(lo)
}

// lastTick returns the last tick of s from first (a tick at or before now)
// to now, and how many ticks there are from first to it, counted up to
// maxTickWalk.
func lastTick(s schedule.Schedule, first, now time.Time) (time.Time, int) {
	last, n := first, 1
	for n < maxTickWalk {
		t := s.Next(last)
		if t.IsZero() || t.After(now) || !t.After(last) {
			return last, n
		}
		last, n = t, n+1
	}
	return prevTick(s, now), n
}
