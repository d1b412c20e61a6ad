package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/bench/internal/benchdb"
	"github.com/weirhq/weir/bench/internal/cpuprofile"
	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/outbox"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// weirTopic is a topic declared through a weir broker driver for one run.
type weirTopic struct {
	broker broker.Broker
	topic  string
	// stored returns how many messages the broker holds on the topic.
	stored func(context.Context) (int, error)
	// remove deletes what Declare made for the topic, and closes the
	// broker and any connection of its own.
	remove func(context.Context) error
}

// runRelay measures weir's outbox relay: it fills a fresh SQLite outbox
// with the run's messages, untimed, then times an outbox.Relay publishing
// them through the topic that open declares.
func runRelay(ctx context.Context, s settings, msgs []message, logger *slog.Logger, open func(context.Context, settings, *slog.Logger) (*weirTopic, error)) (r result, err error) {
	r = result{system: "relay", messages: s.n}
	st, count, cleanup, err := benchdb.OpenWeir(ctx, "relaybench-", "SELECT (SELECT count(*) FROM weir_outbox) - (SELECT count(*) FROM weir_outbox_pending)")
	if err != nil {
		return r, fmt.Errorf("relay: open store: %w", err)
	}
	defer cleanup()
	wt, err := open(ctx, s, logger)
	if err != nil {
		return r, fmt.Errorf("relay: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if rerr := wt.remove(rctx); rerr != nil {
			err = errors.Join(err, fmt.Errorf("relay: remove topic %s: %w", wt.topic, rerr))
		}
	}()

	t0 := time.Now()
	for i := 0; i < len(msgs); i += s.insertBatch {
		batch := make([]store.OutboxMessage, 0, s.insertBatch)
		for _, m := range msgs[i:min(i+s.insertBatch, len(msgs))] {
			batch = append(batch, store.OutboxMessage{Topic: wt.topic, Key: m.key, Payload: m.body})
		}
		err := st.RunTx(ctx, func(_ *sql.Tx, ex store.Executor) error {
			_, err := outbox.Add(ctx, ex, time.Now(), batch...)
			return err
		})
		if err != nil {
			return r, fmt.Errorf("relay: fill the outbox: %w", err)
		}
	}
	insert := time.Since(t0)

	cb := &countingBroker{Broker: wt.broker, want: int64(s.n), all: make(chan struct{})}
	ts := &timingStore{Store: st, want: int64(s.n), all: make(chan struct{})}
	relay, err := outbox.New(outbox.Config{
		Store:     ts,
		Broker:    cb,
		ID:        "relaybench",
		Batch:     s.batch,
		PollEvery: s.poll,
		Logger:    logger,
	})
	if err != nil {
		return r, err
	}

	settle()
	stopProfile, err := cpuprofile.Start(s.CPUProfile)
	if err != nil {
		return r, err
	}
	relayCtx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan error, 1)
	cpu0, allocs0 := cpuTime(), mallocs()
	t0 = time.Now()
	go func() { relayDone <- relay.Run(relayCtx) }()
	confirmed, elapsed, err := waitPublished(ctx, cb, ts, s.n, t0)
	r.cpu, r.allocs = cpuTime()-cpu0, mallocs()-allocs0
	stopRelay()
	rerr := <-relayDone
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if err != nil {
		return r, fmt.Errorf("relay: %w", err)
	}
	if !errors.Is(rerr, context.Canceled) {
		return r, fmt.Errorf("relay: Run: %w", rerr)
	}
	r.elapsed = elapsed
	if c, err := count(ctx); err != nil || c != s.n {
		return r, fmt.Errorf("relay: the store shows %d of %d messages published at the end (%v)", c, s.n, err)
	}
	held, err := wt.stored(ctx)
	if err != nil {
		return r, fmt.Errorf("relay: count the messages on %s: %w", wt.topic, err)
	}
	if held < s.n {
		return r, fmt.Errorf("relay: %s holds %d messages, want %d", wt.topic, held, s.n)
	}
	r.note = fmt.Sprintf("outbox filled in %.2fs (untimed); last confirm at %.3fs; marks recorded %d published at %.3fs; %s holds %d\n"+
		"# relay phases: %d claims %.3fs, %d Publish calls (%d messages) %.3fs, %d marks %.3fs",
		insert.Seconds(), confirmed.Seconds(), s.n, elapsed.Seconds(), wt.topic, held,
		ts.claims.n.Load(), ts.claims.seconds(), cb.calls.n.Load(), cb.sent.Load(), cb.calls.seconds(), ts.marks.n.Load(), ts.marks.seconds())
	return r, nil
}

// waitPublished waits until cb has seen n messages confirmed and then
// until ts has seen the relay's marks record them published (each mark
// returns once its transaction has committed), and returns both times
// from t0. The caller checks the store's count afterwards, untimed: a
// count of the whole outbox polled in the timed phase would cost the
// relay the CPU of a scan of the table each time.
func waitPublished(ctx context.Context, cb *countingBroker, ts *timingStore, n int, t0 time.Time) (confirmed, elapsed time.Duration, err error) {
	select {
	case <-cb.all:
		confirmed = time.Since(t0)
	case <-ctx.Done():
		return 0, 0, fmt.Errorf("%d of %d messages confirmed: %w", cb.confirmed.Load(), n, ctx.Err())
	}
	// Confirmed; the relay marks them published after that.
	select {
	case <-ts.all:
		return confirmed, time.Since(t0), nil
	case <-ctx.Done():
		return 0, 0, fmt.Errorf("the relay marked %d of %d messages published: %w", ts.marked.Load(), n, ctx.Err())
	}
}

// phase counts the calls of one kind and their total time.
type phase struct {
	n     atomic.Int64
	total atomic.Int64 // nanoseconds
}

func (p *phase) add(t0 time.Time) {
	p.n.Add(1)
	p.total.Add(int64(time.Since(t0)))
}

func (p *phase) seconds() float64 { return time.Duration(p.total.Load()).Seconds() }

// timingStore times the relay's claims and marks: its Executor is the
// Store's, with ClaimOutbox and MarkPublished timed. It counts the
// messages the marks recorded published, closing all when they reach
// want.
type timingStore struct {
	store.Store
	claims, marks phase
	want          int64
	marked        atomic.Int64
	all           chan struct{}
}

func (s *timingStore) Executor() store.Executor {
	return timingExecutor{Executor: s.Store.Executor(), s: s}
}

type timingExecutor struct {
	store.Executor
	s *timingStore
}

func (e timingExecutor) ClaimOutbox(ctx context.Context, p store.OutboxClaimParams) ([]*weirtype.OutboxMessage, error) {
	defer e.s.claims.add(time.Now())
	return e.Executor.ClaimOutbox(ctx, p)
}

func (e timingExecutor) MarkPublished(ctx context.Context, now time.Time, owner string, ids []int64) (int, error) {
	defer e.s.marks.add(time.Now())
	n, err := e.Executor.MarkPublished(ctx, now, owner, ids)
	if n > 0 {
		if c := e.s.marked.Add(int64(n)); c >= e.s.want && c-int64(n) < e.s.want {
			close(e.s.all)
		}
	}
	return n, err
}

// countingBroker times its Broker's Publish calls and counts the messages
// it confirmed, closing all when they reach want. It adds a few atomic
// adds to each call.
type countingBroker struct {
	broker.Broker
	want      int64
	all       chan struct{}
	calls     phase
	sent      atomic.Int64
	confirmed atomic.Int64
}

func (b *countingBroker) Publish(ctx context.Context, msgs []broker.Message) error {
	t0 := time.Now()
	err := b.Broker.Publish(ctx, msgs)
	b.calls.add(t0)
	b.sent.Add(int64(len(msgs)))
	ok := int64(len(msgs))
	var pe *broker.PublishError
	switch {
	case err == nil:
	case errors.As(err, &pe):
		for _, e := range pe.Errs {
			if e != nil {
				ok--
			}
		}
	default:
		ok = 0
	}
	if ok > 0 {
		if c := b.confirmed.Add(ok); c >= b.want && c-ok < b.want {
			close(b.all)
		}
	}
	return err
}
