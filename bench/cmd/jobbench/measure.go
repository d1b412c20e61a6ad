package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/bench/internal/cpuprofile"
)

// noopArgs is the job both systems run: its handler does nothing but
// count. Latency marks the jobs of the latency phase, whose handler
// reports when it started.
type noopArgs struct {
	Latency bool `json:"l,omitempty"`
}

func (noopArgs) Kind() string { return "jobbench_noop" }

// sink is what the no-op handler reports to, the same for both systems.
type sink struct {
	want    int64
	done    atomic.Int64
	allDone chan struct{} // closed when done reaches want
	started chan time.Time
}

func newSink(want int) *sink {
	return &sink{want: int64(want), allDone: make(chan struct{}), started: make(chan time.Time, 1)}
}

// handle is the handler's whole body, for both systems.
func (s *sink) handle(args noopArgs) {
	if args.Latency {
		s.started <- time.Now()
		return
	}
	if s.done.Add(1) == s.want {
		close(s.allDone)
	}
}

// result is one system's measurements.
type result struct {
	system       string
	jobs         int
	insert       time.Duration // bulk insert of the n jobs
	handlersDone time.Duration // Start → the n-th handler returned
	elapsed      time.Duration // Start → the store shows n completed
	enqueue      []time.Duration
	pickup       []time.Duration
}

func (r result) rate() float64 { return float64(r.jobs) / r.elapsed.Seconds() }

// percentile returns the p-th percentile (nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// throughput starts the workers with start, waits until every handler has
// returned and the store, through countCompleted, shows n completed, and
// returns the two times from start.
func throughput(ctx context.Context, sk *sink, n int, start func(context.Context) error,
	countCompleted func(context.Context) (int, error), profile string) (handlersDone, elapsed time.Duration, err error) {
	stopProfile, err := cpuprofile.Start(profile)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if perr := stopProfile(); err == nil {
			err = perr
		}
	}()
	t0 := time.Now()
	if err := start(ctx); err != nil {
		return 0, 0, fmt.Errorf("start: %w", err)
	}
	select {
	case <-sk.allDone:
		handlersDone = time.Since(t0)
	case <-ctx.Done():
		return 0, 0, fmt.Errorf("%d of %d handlers ran: %w", sk.done.Load(), n, ctx.Err())
	}
	// The handlers are done; the last completions may still be on their
	// way to the store (River completes in batches, weir after the
	// handler returns). Poll the store for them.
	for {
		c, err := countCompleted(ctx)
		if err != nil {
			return 0, 0, fmt.Errorf("count completed jobs: %w", err)
		}
		if c == n {
			return handlersDone, time.Since(t0), nil
		}
		if c > n {
			return 0, 0, fmt.Errorf("the store shows %d completed jobs, want %d", c, n)
		}
		select {
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("the store shows %d of %d jobs completed: %w", c, n, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// latency inserts count jobs one at a time with insert, each after the
// previous one's handler started, and returns each insert call's duration
// and the time from its return to its handler's start.
func latency(ctx context.Context, sk *sink, count int, insert func(context.Context) error) (enqueue, pickup []time.Duration, err error) {
	for range count {
		t0 := time.Now()
		if err := insert(ctx); err != nil {
			return nil, nil, fmt.Errorf("latency insert: %w", err)
		}
		t1 := time.Now()
		select {
		case t2 := <-sk.started:
			enqueue = append(enqueue, t1.Sub(t0))
			pickup = append(pickup, t2.Sub(t1))
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("latency job not started: %w", ctx.Err())
		}
	}
	return enqueue, pickup, nil
}

// checkTotal checks that the store shows want completed jobs.
func checkTotal(ctx context.Context, system string, countCompleted func(context.Context) (int, error), want int) error {
	c, err := countCompleted(ctx)
	if err != nil {
		return fmt.Errorf("%s: count completed jobs: %w", system, err)
	}
	if c != want {
		return fmt.Errorf("%s: the store shows %d completed jobs at the end, want %d", system, c, want)
	}
	return nil
}

// calls are a system's client calls that measure makes.
type calls struct {
	system     string // the system's name in errors
	bulkInsert func(ctx context.Context, n int) error
	insert     func(ctx context.Context) error // inserts one latency job
	start      func(ctx context.Context) error
	stop       func(ctx context.Context) error
	count      func(ctx context.Context) (int, error) // counts the completed jobs
	profile    string                                 // -cpuprofile, or empty
}

// measure bulk-inserts -n jobs, -batch a call, then measures the
// workers' throughput and the latency of -latency-n jobs inserted one at
// a time, stops the client and checks that the store shows every job
// completed. It records the times in r.
func measure(ctx context.Context, s settings, sk *sink, r *result, c calls) error {
	t0 := time.Now()
	for i := 0; i < s.n; i += s.batch {
		if err := c.bulkInsert(ctx, min(s.batch, s.n-i)); err != nil {
			return fmt.Errorf("%s: bulk insert: %w", c.system, err)
		}
	}
	r.insert = time.Since(t0)

	var err error
	r.handlersDone, r.elapsed, err = throughput(ctx, sk, s.n, c.start, c.count, c.profile)
	if err != nil {
		return fmt.Errorf("%s: %w", c.system, err)
	}
	r.enqueue, r.pickup, err = latency(ctx, sk, s.latencyN, c.insert)
	if err != nil {
		return fmt.Errorf("%s: %w", c.system, err)
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.stop(sctx); err != nil {
		return fmt.Errorf("%s: stop: %w", c.system, err)
	}
	return checkTotal(ctx, c.system, c.count, s.n+s.latencyN)
}

// bulkInsert returns a client's bulk insert of n no-op jobs, each with
// the params p, in one insertMany call.
func bulkInsert[P, R any](batch int, p P, insertMany func(context.Context, []P) (R, error)) func(context.Context, int) error {
	params := make([]P, 0, batch)
	return func(ctx context.Context, n int) error {
		params = params[:0]
		for range n {
			params = append(params, p)
		}
		_, err := insertMany(ctx, params)
		return err
	}
}
