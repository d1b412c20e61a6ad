package weir_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/teststore"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/sqlite"
	"github.com/weirhq/weir/weirtype"
)

var t0 = time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)

// task is the job kind of most tests.
type task struct {
	Name string `json:"name"`
}

func (task) Kind() string { return "task" }

// other is a second kind.
type other struct{}

func (other) Kind() string { return "other" }

func openSQLite(t *testing.T) *sqlite.Store {
	return teststore.SQLite(t, filepath.Join(t.TempDir(), "weir.db"))
}

// testLogger discards the client's logs, or writes them to stderr when
// WEIR_TEST_LOG is set (to debug a test).
func testLogger() *slog.Logger {
	if os.Getenv("WEIR_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// env is a test's store, fake clock and client.
type env struct {
	t  *testing.T
	s  *sqlite.Store
	fc *clock.Fake
	c  *weir.Client
}

// newEnv makes a client on a fresh SQLite store and a fake clock with one
// worker for task, and the config changed by mod. It does not start it.
func newEnv(t *testing.T, w weir.Worker[task], kc weir.KindConfig, mod func(*weir.Config)) *env {
	t.Helper()
	s := openSQLite(t)
	fc := clock.NewFake(t0)
	ws := weir.NewWorkers()
	if err := weir.AddWorker(ws, w, kc); err != nil {
		t.Fatal(err)
	}
	cfg := weir.Config{Store: s, Workers: ws, ID: "test", Clock: fc, Logger: testLogger()}
	if mod != nil {
		mod(&cfg)
	}
	c, err := weir.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		go func() {
			// A Stop with jobs running waits on the fake clock.
			for ctx.Err() == nil {
				fc.Advance(time.Minute)
				tick(ctx)
			}
		}()
		if err := c.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return &env{t: t, s: s, fc: fc, c: c}
}

func (e *env) start() *env {
	e.t.Helper()
	if err := e.c.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	return e
}

func (e *env) insert(args weir.JobArgs, opts *weir.InsertOpts) *weirtype.Job {
	e.t.Helper()
	r, err := e.c.Insert(context.Background(), args, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return r.Job
}

func (e *env) job(id int64) *weirtype.Job {
	e.t.Helper()
	j, err := e.s.Executor().GetJob(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

// waitState waits (in real time, with a deadline) for job id to reach
// state with attempt, without moving the clock.
func (e *env) waitState(id int64, state weirtype.State, attempt int) *weirtype.Job {
	e.t.Helper()
	var j *weirtype.Job
	waitFor(e.t, func() bool {
		j = e.job(id)
		return j.State == state && j.Attempt == attempt
	})
	return j
}

// advanceState moves the fake clock by step until job id reaches state
// with attempt.
func (e *env) advanceState(id int64, step time.Duration, state weirtype.State, attempt int) *weirtype.Job {
	e.t.Helper()
	var j *weirtype.Job
	advanceUntil(e.t, e.fc, step, func() bool {
		j = e.job(id)
		return j.State == state && j.Attempt == attempt
	})
	return j
}

func (e *env) deadLetter(jobID int64) *weirtype.DeadLetter {
	e.t.Helper()
	dls, err := e.s.Executor().ListDeadLetters(context.Background(), store.DeadLetterFilter{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, d := range dls {
		if d.JobID == jobID {
			return d
		}
	}
	e.t.Fatalf("no dead letter for job %d among %d", jobID, len(dls))
	return nil
}

const waitLimit = 10 * time.Second

// tick waits a moment of real time: the poll interval of waitFor.
func tick(ctx context.Context) {
	t := time.NewTimer(time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// waitFor polls cond until it holds, failing the test after waitLimit.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatal("condition not met within", waitLimit)
		}
		tick(ctx)
	}
}

// advanceUntil moves the fake clock by step, giving the client a few
// milliseconds of real time after each step, until cond holds.
func advanceUntil(t *testing.T, fc *clock.Fake, step time.Duration, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("condition not met within %v (fake clock at %v)", waitLimit, fc.Now().Sub(t0))
		}
		fc.Advance(step)
		for range 3 {
			if cond() {
				return
			}
			tick(ctx)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes, for logs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
