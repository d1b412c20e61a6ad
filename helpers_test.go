package weir_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/eventually"
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

// opener opens a migrated store of the calling test's own: a SQLite file,
// or a PostgreSQL schema, dropped when the test ends.
type opener func(t *testing.T) store.Store

func sqliteStore(t *testing.T) store.Store { return openSQLite(t) }

func postgresStore(t *testing.T) store.Store {
	s, _ := teststore.PostgresStore(t, "weirtest_engine_", 8)
	return s
}

// eachStore runs test once on each store driver, in parallel subtests
// named sqlite and postgres. Without PostgreSQL the postgres subtest
// skips, saying so (it fails under WEIR_REQUIRE_SERVICES=1).
func eachStore(t *testing.T, test func(t *testing.T, open opener)) {
	t.Helper()
	for _, d := range []struct {
		name string
		open opener
	}{{"sqlite", sqliteStore}, {"postgres", postgresStore}} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			test(t, d.open)
		})
	}
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
	s  store.Store
	fc *clock.Fake
	c  *weir.Client
	// calls are the client's store calls in flight.
	calls *inflight
}

// newEnv makes a client on a fresh SQLite store and a fake clock with one
// worker for task, and the config changed by mod. It does not start it.
func newEnv(t *testing.T, w weir.Worker[task], kc weir.KindConfig, mod func(*weir.Config)) *env {
	t.Helper()
	return newEnvOn(t, sqliteStore, w, kc, mod)
}

// newEnvOn is newEnv on a store that open makes.
func newEnvOn(t *testing.T, open opener, w weir.Worker[task], kc weir.KindConfig, mod func(*weir.Config)) *env {
	t.Helper()
	s := open(t)
	fc := clock.NewFake(t0)
	ws := weir.NewWorkers()
	if err := weir.AddWorker(ws, w, kc); err != nil {
		t.Fatal(err)
	}
	calls := &inflight{idle: make(chan struct{})}
	cfg := weir.Config{Store: counted{s, calls}, Workers: ws, ID: "test", Clock: fc, Logger: testLogger()}
	if mod != nil {
		mod(&cfg)
	}
	c, err := weir.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stopOnFakeClock(c, fc); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return &env{t: t, s: s, fc: fc, c: c, calls: calls}
}

// stopOnFakeClock stops c, within waitLimit. A Stop with jobs running
// waits on the fake clock (for the shutdown timeout, a write's retry):
// each time the client arms or stops a timer, the clock moves a minute.
func stopOnFakeClock(c *weir.Client, fc *clock.Fake) error {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	stopped := make(chan error, 1)
	changed := fc.Changed()
	go func() { stopped <- c.Stop(ctx) }()
	fc.Advance(time.Minute)
	for {
		select {
		case err := <-stopped:
			return err
		case <-changed:
			changed = fc.Changed()
			fc.Advance(time.Minute)
		}
	}
}

// startClient starts c and stops it at the test's end.
func startClient(t *testing.T, c *weir.Client) {
	t.Helper()
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopClient(t, c) })
}

// stopClient stops c. Its workers return at once, so Stop does not wait
// on the fake clock.
func stopClient(t *testing.T, c *weir.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		t.Errorf("stop %s: %v", c.ID(), err)
	}
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
	e.advanceUntil(step, func() bool {
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

// settleLimit bounds how long advanceUntil waits, after moving the clock,
// for the client to wait on it again.
const settleLimit = 250 * time.Millisecond

// callsLimit bounds how long advance waits for the client's store calls.
const callsLimit = 2 * time.Second

// waitFor waits, in real time, until cond holds, failing the test after
// waitLimit.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	eventually.True(t, "the condition", waitLimit, func() (bool, string) { return cond(), "not met" })
}

// advanceUntil moves the fake clock by step until cond holds, failing the
// test after waitLimit of real time; see advance.
func (e *env) advanceUntil(step time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("condition not met within %v (fake clock at %v)", waitLimit, e.fc.Now().Sub(t0))
		}
		e.advance(step)
	}
}

// advance moves the fake clock by d, then lets the client catch up before
// it moves again: it waits, up to settleLimit, until the timers are as
// many as before (the loops whose timers fired have done their work and
// wait on the clock again), and until none of the client's store calls is
// in flight (a write the clock outran could find its lease expired).
func (e *env) advance(d time.Duration) {
	n := e.fc.Timers()
	e.fc.Advance(d)
	ctx, cancel := context.WithTimeout(context.Background(), settleLimit)
	defer cancel()
	_ = e.fc.WaitForTimers(ctx, n)
	ctx, cancel = context.WithTimeout(context.Background(), callsLimit)
	defer cancel()
	e.calls.wait(ctx)
}

// inflight counts store calls in flight and says when none is.
type inflight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to zero, then replaced
}

// enter counts a call in; the function it returns counts it out.
func (f *inflight) enter() func() {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.n--; f.n == 0 {
			close(f.idle)
			f.idle = make(chan struct{})
		}
	}
}

// wait returns once no call is in flight, or when ctx ends.
func (f *inflight) wait(ctx context.Context) {
	f.mu.Lock()
	n, idle := f.n, f.idle
	f.mu.Unlock()
	if n > 0 {
		select {
		case <-idle:
		case <-ctx.Done():
		}
	}
}

// counted is a store whose executor counts, in calls, the calls the
// client makes on its own (its loops, and the writes of its attempts'
// outcomes), so that a test can wait for them. It is a store.Notifier
// when its store is one.
type counted struct {
	store.Store
	calls *inflight
}

func (s counted) Executor() store.Executor { return countedEx{s.Store.Executor(), s.calls} }

func (s counted) Listen(ctx context.Context, ready func(), wake func(queue string)) error {
	n, ok := s.Store.(store.Notifier)
	if !ok {
		return errors.New("the store does not notify")
	}
	return n.Listen(ctx, ready, wake)
}

type countedEx struct {
	store.Executor
	calls *inflight
}

func (e countedEx) Insert(ctx context.Context, now time.Time, ps []store.InsertParams) ([]store.InsertResult, error) {
	defer e.calls.enter()()
	return e.Executor.Insert(ctx, now, ps)
}

func (e countedEx) Claim(ctx context.Context, p store.ClaimParams) ([]*weirtype.Job, error) {
	defer e.calls.enter()()
	return e.Executor.Claim(ctx, p)
}

func (e countedEx) Heartbeat(ctx context.Context, now time.Time, ls []store.Lease, d time.Duration) ([]int64, error) {
	defer e.calls.enter()()
	return e.Executor.Heartbeat(ctx, now, ls, d)
}

func (e countedEx) CompleteMany(ctx context.Context, now time.Time, ls []store.Lease) ([]int64, error) {
	defer e.calls.enter()()
	return e.Executor.CompleteMany(ctx, now, ls)
}

func (e countedEx) Fail(ctx context.Context, p store.FailParams) (*weirtype.Job, error) {
	defer e.calls.enter()()
	return e.Executor.Fail(ctx, p)
}

func (e countedEx) Snooze(ctx context.Context, now time.Time, l store.Lease, until time.Time) (*weirtype.Job, error) {
	defer e.calls.enter()()
	return e.Executor.Snooze(ctx, now, l, until)
}

func (e countedEx) CompleteLate(ctx context.Context, now time.Time, l store.Lease) (*weirtype.LateResult, bool, error) {
	defer e.calls.enter()()
	return e.Executor.CompleteLate(ctx, now, l)
}

func (e countedEx) RescueExpired(ctx context.Context, now time.Time, limit int) ([]store.JobRef, []store.JobRef, error) {
	defer e.calls.enter()()
	return e.Executor.RescueExpired(ctx, now, limit)
}

func (e countedEx) ExpireDeadlines(ctx context.Context, now time.Time, limit int) ([]store.JobRef, error) {
	defer e.calls.enter()()
	return e.Executor.ExpireDeadlines(ctx, now, limit)
}

func (e countedEx) ReleaseOwnedExcept(ctx context.Context, now time.Time, owner string, keep []store.Lease) ([]int64, error) {
	defer e.calls.enter()()
	return e.Executor.ReleaseOwnedExcept(ctx, now, owner, keep)
}

// compactJSON is b without insignificant white space: a payload as the
// caller wrote it, whether the store kept its bytes (SQLite) or its
// value (PostgreSQL's jsonb).
func compactJSON(t *testing.T, b []byte) string {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("payload %q: %v", b, err)
	}
	return out.String()
}
