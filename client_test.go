package weir_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/internal/syncio"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/sqlite"
	"github.com/weirhq/weir/weirtype"
)

func ok(context.Context, *weir.Job[task]) error { return nil }

// sendJobs is a worker that sends each job it runs on ch and succeeds.
func sendJobs(ch chan<- *weir.Job[task]) weir.Worker[task] {
	return weir.WorkFunc(func(_ context.Context, j *weir.Job[task]) error {
		ch <- j
		return nil
	})
}

// An insert through the client wakes its producer: the job runs at once,
// without the clock moving, and completes.
func TestInsertRunsToCompletion(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		seen := make(chan *weir.Job[task], 1)
		e := newEnvOn(t, open, sendJobs(seen), weir.KindConfig{}, nil).start()
		j := e.insert(task{Name: "doc-1"}, &weir.InsertOpts{Source: "incoming/doc-1", Priority: 3})
		if j.Queue != weir.DefaultQueue || j.MaxAttempts != weir.DefaultMaxAttempts || j.Source != "incoming/doc-1" || j.Priority != 3 {
			t.Fatalf("inserted %+v", *j)
		}
		done := e.waitState(j.ID, weirtype.StateCompleted, 1)
		got := <-seen
		if got.Args.Name != "doc-1" || got.ID != j.ID || got.Attempt != 1 || got.Kind != "task" {
			t.Fatalf("worker got %+v args %+v", *got.Job, got.Args)
		}
		if len(done.Errors) != 0 || !done.FinalizedAt.Equal(t0) {
			t.Fatalf("completed job %+v", *done)
		}
	})
}

func TestIdempotentInsertOutcomePassesThrough(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := newEnvOn(t, open, weir.WorkFunc(ok), weir.KindConfig{}, nil)
		opts := &weir.InsertOpts{IdempotencyKey: "doc-7", DeadlineAt: t0.Add(time.Hour)}
		first, err := e.c.Insert(context.Background(), task{Name: "a"}, opts)
		if err != nil {
			t.Fatal(err)
		}
		second, err := e.c.Insert(context.Background(), task{Name: "b"}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if first.Outcome != weirtype.Inserted || second.Outcome != weirtype.DuplicatePending || first.Job.ID != second.Job.ID {
			t.Fatalf("outcomes %s (%d), %s (%d)", first.Outcome, first.Job.ID, second.Outcome, second.Job.ID)
		}
		if !first.Job.DeadlineAt.Equal(t0.Add(time.Hour)) {
			t.Fatalf("deadline %v not stored", first.Job.DeadlineAt)
		}
		e.start()
		e.waitState(first.Job.ID, weirtype.StateCompleted, 1)
		third, err := e.c.Insert(context.Background(), task{Name: "c"}, opts)
		if err != nil || third.Outcome != weirtype.DuplicateCompleted {
			t.Fatalf("insert after completion: %+v, %v", third, err)
		}
	})
}

func TestInsertMany(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		var runs atomic.Int32
		e := newEnvOn(t, open, weir.WorkFunc(func(context.Context, *weir.Job[task]) error {
			runs.Add(1)
			return nil
		}), weir.KindConfig{Queue: "docs", MaxAttempts: 4}, func(c *weir.Config) {
			c.Queues = map[string]weir.QueueConfig{"docs": {MaxWorkers: 2}}
		}).start()
		rs, err := e.c.InsertMany(context.Background(), []weir.InsertManyParams{
			{Args: task{Name: "a"}},
			{Args: task{Name: "b"}, Opts: &weir.InsertOpts{MaxAttempts: 9}},
			{Args: task{Name: "c"}},
		})
		if err != nil || len(rs) != 3 {
			t.Fatalf("insert many: %v, %v", rs, err)
		}
		if rs[0].Job.Queue != "docs" || rs[0].Job.MaxAttempts != 4 || rs[1].Job.MaxAttempts != 9 {
			t.Fatalf("kind config not applied: %+v %+v", *rs[0].Job, *rs[1].Job)
		}
		for _, r := range rs {
			e.waitState(r.Job.ID, weirtype.StateCompleted, 1)
		}
		if n := runs.Load(); n != 3 {
			t.Fatalf("%d runs, want 3", n)
		}
		if rs, err := e.c.InsertMany(context.Background(), nil); err != nil || rs != nil {
			t.Fatalf("empty insert many: %v, %v", rs, err)
		}
	})
}

// Two failures then a success: each retry waits the backoff from the time
// of the failure, each failure is recorded with its attempt and type.
func TestRetryWithBackoffThenSuccess(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		var calls atomic.Int32
		e := newEnvOn(t, open, weir.WorkFunc(func(_ context.Context, j *weir.Job[task]) error {
			if calls.Add(1) <= 2 {
				return fmt.Errorf("index timed out (attempt %d): %w", j.Attempt, &fs.PathError{Op: "open", Path: "x", Err: fs.ErrNotExist})
			}
			return nil
		}), weir.KindConfig{Backoff: backoff.Exponential(10*time.Second, 2, time.Hour).WithJitter(backoff.JitterNone)}, nil).start()
		id := e.insert(task{}, nil).ID

		j := e.waitState(id, weirtype.StateScheduled, 1)
		if len(j.Errors) != 1 || !j.ScheduledAt.Equal(j.Errors[0].At.Add(10*time.Second)) {
			t.Fatalf("after attempt 1: scheduled %v, errors %+v; want 10 s after the failure", j.ScheduledAt, j.Errors)
		}
		j = e.advanceState(id, time.Second, weirtype.StateScheduled, 2)
		if len(j.Errors) != 2 || !j.ScheduledAt.Equal(j.Errors[1].At.Add(20*time.Second)) {
			t.Fatalf("after attempt 2: scheduled %v, errors %+v; want 20 s after the failure", j.ScheduledAt, j.Errors)
		}
		if j.Errors[1].At.Before(j.Errors[0].At.Add(10 * time.Second)) {
			t.Fatalf("attempt 2 ran at %v, before its retry time", j.Errors[1].At)
		}
		j = e.advanceState(id, time.Second, weirtype.StateCompleted, 3)
		for i, ae := range j.Errors {
			if ae.Attempt != i+1 || ae.Type != "*fs.PathError" || !strings.Contains(ae.Message, fmt.Sprintf("index timed out (attempt %d)", i+1)) {
				t.Fatalf("error %d: %+v", i, ae)
			}
		}
	})
}

type decodeError struct{ line int }

func (e *decodeError) Error() string { return fmt.Sprintf("not UTF-8 at line %d", e.line) }

func TestPermanentErrorDeadLettersAtOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		logs := &syncio.Buffer{}
		e := newEnvOn(t, open, weir.WorkFunc(func(context.Context, *weir.Job[task]) error {
			return retry.Permanent(fmt.Errorf("extract: %w", &decodeError{line: 3}))
		}), weir.KindConfig{}, func(c *weir.Config) {
			c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}).start()
		id := e.insert(task{Name: "bad"}, &weir.InsertOpts{IdempotencyKey: "k", Source: "in/bad.txt"}).ID
		e.waitState(id, weirtype.StateDead, 1)
		dl := e.deadLetter(id)
		if dl.Reason != weirtype.AbandonPermanent || dl.Attempts != 1 || dl.ErrorType != "*weir_test.decodeError" ||
			dl.LastError != "extract: not UTF-8 at line 3" || dl.Source != "in/bad.txt" || dl.IdempotencyKey != "k" {
			t.Fatalf("dead letter %+v", *dl)
		}
		var args task
		if err := json.Unmarshal(dl.Payload, &args); err != nil || args.Name != "bad" {
			t.Fatalf("payload %s", dl.Payload)
		}
		waitFor(t, func() bool { return strings.Contains(logs.String(), `"level":"ERROR"`) })
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			if !strings.Contains(line, `"level":"ERROR"`) {
				continue
			}
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatal(err)
			}
			if rec["job_id"] != float64(id) || rec["kind"] != "task" || rec["attempt"] != float64(1) || rec["reason"] != "non_retryable" ||
				rec["err"] != "extract: not UTF-8 at line 3" {
				t.Fatalf("dead-letter log %s", line)
			}
		}
	})
}

func TestMaxAttemptsDeadLettersWithHistory(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := newEnvOn(t, open, weir.WorkFunc(func(_ context.Context, j *weir.Job[task]) error {
			return fmt.Errorf("boom %d", j.Attempt)
		}), weir.KindConfig{MaxAttempts: 3, Backoff: backoff.Constant(time.Second)}, nil).start()
		id := e.insert(task{}, nil).ID
		e.advanceState(id, time.Second, weirtype.StateDead, 3)
		dl := e.deadLetter(id)
		if dl.Reason != weirtype.AbandonMaxAttempts || dl.Attempts != 3 || len(dl.Errors) != 3 || dl.LastError != "boom 3" {
			t.Fatalf("dead letter %+v", *dl)
		}
		for i, ae := range dl.Errors {
			if ae.Attempt != i+1 || ae.Message != fmt.Sprintf("boom %d", i+1) || ae.Type != "*errors.errorString" {
				t.Fatalf("error %d: %+v", i, ae)
			}
		}
	})
}

// TTL 30 s, backoff 20 s: the first retry (at +20 s) is within it; the
// second (at +40 s or later) is not, so the job is abandoned instead.
func TestTTLAbandonsInsteadOfRetrying(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := newEnvOn(t, open, weir.WorkFunc(func(context.Context, *weir.Job[task]) error {
			return errors.New("unavailable")
		}), weir.KindConfig{TTL: 30 * time.Second, Backoff: backoff.Constant(20 * time.Second)}, nil).start()
		id := e.insert(task{}, nil).ID
		e.waitState(id, weirtype.StateScheduled, 1)
		e.advanceState(id, time.Second, weirtype.StateDead, 2)
		dl := e.deadLetter(id)
		if dl.Reason != weirtype.AbandonTTL || len(dl.Errors) != 2 {
			t.Fatalf("dead letter %+v", *dl)
		}
	})
}

// A retry-after hint raises the backoff's delay, past the backoff's cap.
func TestRetryAfterHintRaisesTheDelay(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := newEnvOn(t, open, weir.WorkFunc(func(_ context.Context, j *weir.Job[task]) error {
			d, _ := time.ParseDuration(j.Args.Name)
			return retry.After(errors.New("429 too many requests"), d)
		}), weir.KindConfig{Backoff: backoff.Exponential(time.Second, 2, 10*time.Minute).WithJitter(backoff.JitterNone)}, nil).start()
		for _, c := range []struct{ hint, want time.Duration }{
			{30 * time.Second, 30 * time.Second}, // raised to the hint
			{5 * time.Hour, 5 * time.Hour},       // the hint in full, past the cap
			{time.Millisecond, time.Second},      // a hint below the backoff changes nothing
		} {
			id := e.insert(task{Name: c.hint.String()}, nil).ID
			j := e.waitState(id, weirtype.StateScheduled, 1)
			if got := j.ScheduledAt.Sub(j.Errors[0].At); got != c.want {
				t.Errorf("hint %v: delay %v, want %v", c.hint, got, c.want)
			}
			if j.Errors[0].Type != "*errors.errorString" {
				t.Errorf("hint %v: recorded type %s", c.hint, j.Errors[0].Type)
			}
		}
	})
}

func TestSnoozeDoesNotUseAnAttempt(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		attempts := make(chan int, 2)
		var calls atomic.Int32
		e := newEnvOn(t, open, weir.WorkFunc(func(_ context.Context, j *weir.Job[task]) error {
			attempts <- j.Attempt
			if calls.Add(1) == 1 {
				return fmt.Errorf("not ready: %w", weir.JobSnooze(time.Minute))
			}
			return nil
		}), weir.KindConfig{MaxAttempts: 1}, nil).start()
		id := e.insert(task{}, nil).ID
		j := e.waitState(id, weirtype.StateScheduled, 0)
		if len(j.Errors) != 0 || j.ScheduledAt.Sub(j.UpdatedAt) != time.Minute {
			t.Fatalf("snoozed job %+v", *j)
		}
		j = e.advanceState(id, 10*time.Second, weirtype.StateCompleted, 1)
		if a1, a2 := <-attempts, <-attempts; len(j.Errors) != 0 || a1 != 1 || a2 != 1 {
			t.Fatalf("attempts %d, %d, errors %+v; want 1, 1 and none", a1, a2, j.Errors)
		}
	})
}

func TestPanicIsRecoveredAsAnError(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		var calls atomic.Int32
		e := newEnvOn(t, open, weir.WorkFunc(func(context.Context, *weir.Job[task]) error {
			if calls.Add(1) == 1 {
				panic("nil map")
			}
			return nil
		}), weir.KindConfig{Backoff: backoff.Constant(time.Second)}, nil).start()
		id := e.insert(task{}, nil).ID
		j := e.waitState(id, weirtype.StateScheduled, 1)
		ae := j.Errors[0]
		if ae.Type != "*weir.PanicError" || !strings.Contains(ae.Message, "worker panicked: nil map") || !strings.Contains(ae.Message, "goroutine") {
			t.Fatalf("recorded %+v", ae)
		}
		e.advanceState(id, time.Second, weirtype.StateCompleted, 2)
	})
}

// The kind's Timeout ends the attempt's context on the fake clock; the
// attempt fails with a *TimeoutError and is retried.
func TestTimeoutCancelsTheAttempt(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		causes := make(chan error, 1)
		e := newEnvOn(t, open, weir.WorkFunc(func(ctx context.Context, j *weir.Job[task]) error {
			if j.Attempt > 1 {
				return nil
			}
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return ctx.Err()
		}), weir.KindConfig{Timeout: 5 * time.Second, Backoff: backoff.Constant(time.Second)}, nil).start()
		id := e.insert(task{}, nil).ID
		first := e.waitState(id, weirtype.StateRunning, 1)
		// Wait for the first attempt's error, not for the scheduled state: with
		// a backoff of one step the retry may run before a poll sees it.
		var j *weirtype.Job
		e.advanceUntil(time.Second, func() bool {
			j = e.job(id)
			return len(j.Errors) > 0
		})
		var te *weir.TimeoutError
		if cause := <-causes; !errors.As(cause, &te) || te.Timeout != 5*time.Second {
			t.Fatalf("context cause %v", cause)
		}
		ae := j.Errors[0]
		if ae.Type != "*weir.TimeoutError" || ae.Message != "weir: attempt timed out after 5s: context canceled" ||
			ae.At.Sub(first.AttemptedAt) < 5*time.Second {
			t.Fatalf("recorded %+v (attempt started %v)", ae, first.AttemptedAt)
		}
		e.advanceState(id, time.Second, weirtype.StateCompleted, 2)
	})
}

func TestStopWaitsForInFlightJob(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		started, release := make(chan struct{}), make(chan struct{})
		logs := &syncio.Buffer{}
		e := newEnvOn(t, open, weir.WorkFunc(func(context.Context, *weir.Job[task]) error {
			close(started)
			<-release
			return nil
		}), weir.KindConfig{}, func(c *weir.Config) { c.Logger = slog.New(slog.NewTextHandler(logs, nil)) }).start()
		id := e.insert(task{}, nil).ID
		<-started
		stopped := make(chan error, 1)
		go func() { stopped <- e.c.Stop(context.Background()) }()
		// Stop is waiting on its shutdown timer, with the job running.
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		waitFor(t, func() bool { return strings.Contains(logs.String(), "stopping: waiting for the running jobs") })
		select {
		case err := <-stopped:
			t.Fatalf("Stop returned %v with the job running", err)
		default:
		}
		close(release)
		select {
		case err := <-stopped:
			if err != nil {
				t.Fatal(err)
			}
		case <-ctx.Done():
			t.Fatal("Stop did not return after the job finished")
		}
		if j := e.job(id); j.State != weirtype.StateCompleted {
			t.Fatalf("job %s after Stop, want completed", j.State)
		}
		if err := e.c.Stop(context.Background()); err != nil {
			t.Fatalf("second Stop: %v", err)
		}
		if err := e.c.Start(context.Background()); err == nil {
			t.Fatal("Start after Stop succeeded")
		}
	})
}

// Past the shutdown timeout Stop cancels the running job and gives it back:
// available again, its attempt returned, nothing recorded but the release.
func TestStopPastShutdownTimeoutReleasesTheJob(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		started := make(chan struct{})
		e := newEnvOn(t, open, weir.WorkFunc(func(ctx context.Context, j *weir.Job[task]) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		}), weir.KindConfig{}, func(c *weir.Config) { c.ShutdownTimeout = 5 * time.Second }).start()
		id := e.insert(task{}, nil).ID
		<-started
		stopped := make(chan error, 1)
		go func() { stopped <- e.c.Stop(context.Background()) }()
		e.advanceUntil(time.Second, func() bool { return len(stopped) == 1 })
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		j := e.job(id)
		if j.State != weirtype.StateAvailable || j.Attempt != 0 || len(j.Errors) != 1 || j.Errors[0].Type != weirtype.ErrorTypeReleased {
			t.Fatalf("job after Stop %+v", *j)
		}
	})
}

// A job left running by a previous run with the same ID is taken back at
// Start and run at once; one claimed with no attempt left is abandoned
// without running.
func TestRestartTakesBackItsJobs(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		ran := make(chan *weir.Job[task], 2)
		e := newEnvOn(t, open, sendJobs(ran), weir.KindConfig{}, func(c *weir.Config) { c.ID = "A" })
		ex := e.s.Executor()
		rs, err := ex.Insert(context.Background(), t0, []store.InsertParams{
			{Kind: "task", Payload: []byte(`{"name":"left"}`), MaxAttempts: 5},
			{Kind: "task", Payload: []byte(`{"name":"spent"}`), MaxAttempts: 1},
		})
		if err != nil {
			t.Fatal(err)
		}
		if claimed, err := ex.Claim(context.Background(), store.ClaimParams{Now: t0, Limit: 2, Owner: "A", LeaseFor: time.Hour}); err != nil || len(claimed) != 2 {
			t.Fatalf("claim as A: %v, %v", claimed, err)
		}
		e.start()
		left := e.waitState(rs[0].Job.ID, weirtype.StateCompleted, 2)
		if len(left.Errors) != 1 || left.Errors[0].Type != weirtype.ErrorTypeReleased {
			t.Fatalf("taken-back job %+v", *left)
		}
		if j := <-ran; j.Args.Name != "left" || j.Attempt != 2 {
			t.Fatalf("ran %+v", j.Args)
		}
		// The taken-back attempt of the other was its last: it is dead at once.
		e.waitState(rs[1].Job.ID, weirtype.StateDead, 1)
		dl := e.deadLetter(rs[1].Job.ID)
		if dl.Reason != weirtype.AbandonMaxAttempts || dl.ErrorType != weirtype.ErrorTypeReleased || len(dl.Errors) != 1 {
			t.Fatalf("dead letter %+v", *dl)
		}
		if len(ran) != 0 {
			t.Fatal("the job with no attempt left ran")
		}
	})
}

// A job cancelled in the store by someone else while its worker runs: the
// next heartbeat finds the lease lost and cancels the worker's context;
// nothing is recorded over the cancellation.
func TestLostLeaseCancelsTheWorker(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		started := make(chan struct{})
		causes := make(chan error, 1)
		e := newEnvOn(t, open, weir.WorkFunc(func(ctx context.Context, j *weir.Job[task]) error {
			close(started)
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return ctx.Err()
		}), weir.KindConfig{}, nil).start()
		id := e.insert(task{}, nil).ID
		<-started
		if _, err := e.s.Executor().Cancel(context.Background(), e.fc.Now(), id); err != nil {
			t.Fatal(err)
		}
		e.advanceUntil(5*time.Second, func() bool { return len(causes) == 1 })
		if cause := <-causes; !errors.Is(cause, store.ErrLeaseLost) {
			t.Fatalf("cause %v, want ErrLeaseLost", cause)
		}
		if j := e.job(id); j.State != weirtype.StateCancelled || len(j.Errors) != 0 {
			t.Fatalf("job %+v", *j)
		}
	})
}

func TestCancelStopsARunningJobAtOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		started := make(chan struct{})
		returned := make(chan struct{})
		e := newEnvOn(t, open, weir.WorkFunc(func(ctx context.Context, j *weir.Job[task]) error {
			close(started)
			<-ctx.Done()
			defer close(returned)
			return ctx.Err()
		}), weir.KindConfig{}, nil).start()
		id := e.insert(task{}, nil).ID
		<-started
		j, err := e.c.Cancel(context.Background(), id)
		if err != nil || j.State != weirtype.StateCancelled {
			t.Fatalf("cancel: %+v, %v", j, err)
		}
		<-returned // without the clock moving
		if _, err := e.c.Cancel(context.Background(), id); !errors.Is(err, store.ErrFinal) {
			t.Fatalf("second cancel: %v, want ErrFinal", err)
		}
		if _, err := e.c.Cancel(context.Background(), id+100); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("cancel of a missing job: %v, want ErrNotFound", err)
		}
		waitFor(t, func() bool { return e.job(id).State == weirtype.StateCancelled })
	})
}

func TestInsertTxCommitsAndRollsBackWithTheCallersData(t *testing.T) {
	t.Parallel()
	e := newEnv(t, weir.WorkFunc(ok), weir.KindConfig{}, nil)
	ctx := context.Background()
	s := e.s.(*sqlite.Store)
	db := s.DB()
	if _, err := db.ExecContext(ctx, "CREATE TABLE docs (name TEXT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	e.start()
	save := func(name string, commit bool) int64 {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.ExecContext(ctx, "INSERT INTO docs (name) VALUES (?)", name); err != nil {
			t.Fatal(err)
		}
		r, err := e.c.InsertTx(ctx, s.Tx(tx), task{Name: name}, nil)
		if err != nil || r.Outcome != weirtype.Inserted {
			t.Fatalf("insert tx: %+v, %v", r, err)
		}
		if commit {
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		return r.Job.ID
	}
	rolledBack := save("gone", false)
	if _, err := e.s.Executor().GetJob(ctx, rolledBack); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("job of a rolled-back tx: %v, want ErrNotFound", err)
	}
	kept := save("kept", true)
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM docs").Scan(&n); err != nil || n != 1 {
		t.Fatalf("docs: %d, %v; want the committed one", n, err)
	}
	// InsertTx does not wake the producer: the next poll finds the job.
	e.advanceState(kept, time.Second, weirtype.StateCompleted, 1)
	if _, err := e.c.InsertTx(ctx, nil, task{}, nil); err == nil {
		t.Fatal("InsertTx with a nil executor succeeded")
	}
}

// A job of a kind without a worker, and one whose payload does not decode,
// are abandoned at once with reason non_retryable.
func TestUnknownKindAndBadPayloadDeadLetter(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := newEnvOn(t, open, weir.WorkFunc(ok), weir.KindConfig{}, nil).start()
		nobody := e.insert(other{}, nil).ID
		bad, err := e.s.Executor().Insert(context.Background(), t0, []store.InsertParams{{Kind: "task", Payload: []byte(`{"name":7}`)}})
		if err != nil {
			t.Fatal(err)
		}
		e.advanceState(nobody, time.Second, weirtype.StateDead, 1)
		e.advanceState(bad[0].Job.ID, time.Second, weirtype.StateDead, 1)
		if dl := e.deadLetter(nobody); dl.Reason != weirtype.AbandonPermanent || dl.ErrorType != "no_worker" ||
			dl.LastError != `weir: no worker is registered for kind "other" in client test` {
			t.Fatalf("dead letter %+v", *dl)
		}
		if dl := e.deadLetter(bad[0].Job.ID); dl.Reason != weirtype.AbandonPermanent || dl.ErrorType != "*json.UnmarshalTypeError" {
			t.Fatalf("dead letter %+v", *dl)
		}
	})
}

func TestAddWorkerRefusesBadInput(t *testing.T) {
	t.Parallel()
	ws := weir.NewWorkers()
	if err := weir.AddWorker(ws, weir.WorkFunc(ok), weir.KindConfig{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, want string
		err        error
	}{
		{"duplicate", `kind "task" is registered already`, weir.AddWorker(ws, weir.WorkFunc(ok), weir.KindConfig{})},
		{"max attempts", "MaxAttempts -1 is negative", weir.AddWorker(weir.NewWorkers(), weir.WorkFunc(ok), weir.KindConfig{MaxAttempts: -1})},
		{"ttl", "TTL -1s is negative", weir.AddWorker(weir.NewWorkers(), weir.WorkFunc(ok), weir.KindConfig{TTL: -time.Second})},
		{"timeout", "Timeout -1s is negative", weir.AddWorker(weir.NewWorkers(), weir.WorkFunc(ok), weir.KindConfig{Timeout: -time.Second})},
		{"backoff", "Backoff: invalid backoff", weir.AddWorker(weir.NewWorkers(), weir.WorkFunc(ok), weir.KindConfig{Backoff: backoff.Backoff{Base: -1}})},
		{"nil registry", "NewWorkers", weir.AddWorker(nil, weir.WorkFunc(ok), weir.KindConfig{})},
		{"nil worker", "worker is nil", weir.AddWorker[task](weir.NewWorkers(), nil, weir.KindConfig{})},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, c.err, c.want)
		}
	}
}

func TestNewClientRefusesBadConfig(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	ws := weir.NewWorkers()
	if err := weir.AddWorker(ws, weir.WorkFunc(ok), weir.KindConfig{Queue: "docs"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, want string
		cfg        weir.Config
	}{
		{"no store", "Store is nil", weir.Config{}},
		{"unworked queue", `kind "task" uses queue "docs"`, weir.Config{Store: s, Workers: ws}},
		{"empty queue name", "empty queue name", weir.Config{Store: s, Queues: map[string]weir.QueueConfig{"": {}}}},
		{"negative workers", "MaxWorkers -1", weir.Config{Store: s, Queues: map[string]weir.QueueConfig{"q": {MaxWorkers: -1}}}},
		{"negative lease", "LeaseFor -1s", weir.Config{Store: s, LeaseFor: -time.Second}},
		{"heartbeat too slow", "HeartbeatEvery 1m0s must be positive and less than LeaseFor 1m0s", weir.Config{Store: s, HeartbeatEvery: time.Minute}},
		{"negative poll", "PollEvery -1s", weir.Config{Store: s, PollEvery: -time.Second}},
	} {
		if _, err := weir.NewClient(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
	// The zero value with a store works, and an insert-only client
	// inserts but cannot start.
	c, err := weir.NewClient(weir.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	if c.ID() == "" {
		t.Fatal("no default ID")
	}
	if _, err := c.Insert(context.Background(), task{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "no workers") {
		t.Fatalf("Start of an insert-only client: %v", err)
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Fatalf("Stop before Start: %v", err)
	}
}
