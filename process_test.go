package weir_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/internal/crashpoint"
	"github.com/weirhq/weir/internal/syncio"
	"github.com/weirhq/weir/internal/testenv"
	"github.com/weirhq/weir/store/postgres"
	"github.com/weirhq/weir/weirtype"
)

// The multi-process tests run the test binary itself as the worker
// processes. These variables tell a child what to do; they are read here,
// by the test binary, never by the library.
const (
	// childEnv, set to 1, makes TestMain run a worker process instead of
	// the tests.
	childEnv = "WEIR_PROCESS_CHILD"
	// childURLEnv, childSchemaEnv and childIDEnv give the child its
	// database, its schema and its client ID.
	childURLEnv    = "WEIR_PROCESS_URL"
	childSchemaEnv = "WEIR_PROCESS_SCHEMA"
	childIDEnv     = "WEIR_PROCESS_ID"
	// jobsEnv overrides defaultProcessJobs (the kill variant works a
	// quarter as many), e.g. WEIR_PROCESS_JOBS=5000 on a slow machine.
	jobsEnv = "WEIR_PROCESS_JOBS"
)

const (
	// defaultProcessJobs is how many jobs TestTwoProcessesCompleteEachJobOnce
	// inserts unless WEIR_PROCESS_JOBS says otherwise: the full proof of
	// two processes working 20,000 jobs. On a 2-core machine it takes
	// about 10 s, and 22-30 s under -race.
	defaultProcessJobs = 20000
	// childWorkers is each child's MaxWorkers.
	childWorkers = 8
	// insertBatch is how many jobs one InsertMany inserts.
	insertBatch = 1000
	// pollTick is how often the parent reads the job counts.
	pollTick = 20 * time.Millisecond
	// childStopLimit bounds a child's graceful stop.
	childStopLimit = 30 * time.Second
)

// TestMain runs the tests, or, in a child process started by
// startChild, a worker process.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

// ledgerJob is the kind the child processes work: its worker writes a
// ledger row for the attempt.
type ledgerJob struct {
	N int `json:"n"`
}

func (ledgerJob) Kind() string { return "process_ledger" }

// runChild is a worker process: a weir client with ID $WEIR_PROCESS_ID and
// childWorkers workers for ledgerJob on the schema $WEIR_PROCESS_SCHEMA,
// whose handler inserts (job id, attempt, client ID) into the schema's
// ledger table in a transaction of its own. After SIGUSR1 the handler,
// once its ledger row is committed, holds its job until the process dies:
// that parks the process's jobs in the gap between the effect and the
// completion, for a test to kill it there. It runs until SIGTERM or
// SIGINT, or until its standard input closes (the parent test died), then
// stops the client and returns the exit code: 0 after a clean stop.
func runChild() int {
	id := os.Getenv(childIDEnv)
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("process", id)
	fail := func(err error) int {
		logger.Error("child failed", "err", err.Error())
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	var hold atomic.Bool
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		<-usr1
		hold.Store(true)
	}()

	s, err := postgres.Open(ctx, postgres.Config{
		URL: os.Getenv(childURLEnv), Schema: os.Getenv(childSchemaEnv), MaxConns: childWorkers + 4,
	})
	if err != nil {
		return fail(err)
	}
	defer func() { _ = s.Close() }()
	insertLedger := "INSERT INTO " + pgx.Identifier{s.Schema(), "ledger"}.Sanitize() +
		" (job_id, attempt, process) VALUES ($1, $2, $3)"

	ws := weir.NewWorkers()
	if err := weir.AddWorker(ws, weir.WorkFunc(func(ctx context.Context, j *weir.Job[ledgerJob]) error {
		if err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, insertLedger, j.ID, j.Attempt, id)
			return err
		}); err != nil {
			return err
		}
		if hold.Load() {
			<-ctx.Done()
			return context.Cause(ctx)
		}
		return nil
	}), weir.KindConfig{}); err != nil {
		return fail(err)
	}
	c, err := weir.NewClient(weir.Config{
		Store: s, Workers: ws, ID: id, PollEvery: 50 * time.Millisecond,
		Queues: map[string]weir.QueueConfig{weir.DefaultQueue: {MaxWorkers: childWorkers}},
		Logger: logger,
	})
	if err != nil {
		return fail(err)
	}
	if err := c.Start(ctx); err != nil {
		return fail(err)
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), childStopLimit)
	defer cancel()
	if err := c.Stop(sctx); err != nil {
		return fail(err)
	}
	return 0
}

// Two OS processes with eight workers each on one PostgreSQL schema work
// the same jobs (defaultProcessJobs, 20,000; WEIR_PROCESS_JOBS overrides
// it), and the ledger their handlers write shows each job completed
// exactly once, at its first attempt, with both processes doing work.
func TestTwoProcessesCompleteEachJobOnce(t *testing.T) {
	n := processJobs(t)
	h := newProcessHarness(t)
	h.insert(n)

	start := time.Now()
	children := []*child{h.startChild("proc-0"), h.startChild("proc-1")}
	h.waitCompleted(n, children...)
	elapsed := time.Since(start)
	stopChildren(t, children...)

	var rows, jobs int
	h.queryRow("SELECT count(*), count(DISTINCT job_id) FROM ledger", &rows, &jobs)
	if rows != n || jobs != n {
		t.Errorf("ledger: %d rows for %d distinct jobs, want %d of each", rows, jobs, n)
	}
	h.expectZero("ledger rows of an attempt other than the first",
		"SELECT count(*) FROM ledger WHERE attempt <> 1")
	h.expectZero("jobs completed at an attempt other than the first",
		"SELECT count(*) FROM weir_jobs WHERE attempt <> 1")
	h.expectZero("jobs without the ledger row of their last attempt",
		"SELECT count(*) FROM weir_jobs j WHERE NOT EXISTS (SELECT 1 FROM ledger l WHERE l.job_id = j.id AND l.attempt = j.attempt)")
	h.expectAllCompleted(n)
	split := h.split(children)
	t.Logf("%d jobs in %v by two processes of %d workers: %.0f jobs/s; split %v",
		n, elapsed.Round(time.Millisecond), childWorkers, float64(n)/elapsed.Seconds(), split)
}

// Two worker processes, one of which is killed (SIGKILL) after about a
// third of the jobs completed, with all its workers parked after their
// ledger row committed and before their job completed, and restarted with
// the same ID. The restart takes back at once the jobs the killed run held
// (ReleaseOwned at Start, the attempt counted, not a rescue after the
// lease expired), and every job is completed. The handlers of exactly those
// jobs ran twice, once per attempt (at-least-once); no handler ran twice
// for one attempt, and the attempt that completed each job committed its
// ledger row.
func TestTwoProcessesKillAndRestartCompleteEveryJob(t *testing.T) {
	n := max(processJobs(t)/4, 100)
	h := newProcessHarness(t)
	h.insert(n)

	start := time.Now()
	p0, p1 := h.startChild("proc-0"), h.startChild("proc-1")
	h.waitCompleted(n/3, p0, p1)
	// Park proc-0's workers after their effect, wait until all of them
	// are parked (its producer claims no more), and kill it there.
	if err := p0.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	const heldSQL = `SELECT j.id FROM weir_jobs j JOIN ledger l ON l.job_id = j.id AND l.attempt = j.attempt
		WHERE j.state = 'running' AND j.lease_owner = 'proc-0' ORDER BY j.id`
	// A job whose handler returned just before SIGUSR1 is counted while
	// its completion is being written, and its slot then takes a job
	// that parks: wait until the same jobs are held twice in a row.
	for prev := []int64(nil); ; {
		h.waitCount("jobs proc-0 holds after their ledger row", childWorkers,
			"SELECT count(*) FROM ("+heldSQL+") held", p0, p1)
		now := h.ids(heldSQL)
		if slices.Equal(now, prev) {
			break
		}
		prev = now
		time.Sleep(100 * time.Millisecond)
	}
	p0.kill()
	held := h.ids(heldSQL)
	if len(held) != childWorkers {
		t.Fatalf("proc-0 held %d jobs at the kill, want %d: %v", len(held), childWorkers, held)
	}
	// Beside them it may hold jobs claimed ahead, which no worker took:
	// the restart takes those back too, their attempt counted.
	owned := h.ids("SELECT id FROM weir_jobs WHERE state = 'running' AND lease_owner = 'proc-0' ORDER BY id")
	p0 = h.startChild("proc-0")
	h.waitCompleted(n, p0, p1)
	elapsed := time.Since(start)
	stopChildren(t, p0, p1)

	h.expectAllCompleted(n)
	var rows, jobs int
	h.queryRow("SELECT count(*), count(DISTINCT job_id) FROM ledger", &rows, &jobs)
	if jobs != n || rows != n+len(held) {
		t.Errorf("ledger: %d rows for %d distinct jobs, want %d rows (one per job and one more per held job) for %d",
			rows, jobs, n+len(held), n)
	}
	h.expectZero("jobs without the ledger row of their last attempt",
		"SELECT count(*) FROM weir_jobs j WHERE NOT EXISTS (SELECT 1 FROM ledger l WHERE l.job_id = j.id AND l.attempt = j.attempt)")
	h.expectZero("ledger rows of an attempt the job never reached",
		"SELECT count(*) FROM ledger l JOIN weir_jobs j ON j.id = l.job_id WHERE l.attempt > j.attempt")

	// The jobs the killed run held, and only they, took a second attempt:
	// the restart released them (an error of type released), none waited
	// for its lease to expire.
	retried := h.ids("SELECT id FROM weir_jobs WHERE attempt <> 1 ORDER BY id")
	if !slices.Equal(retried, owned) {
		t.Errorf("jobs past their first attempt: %v, want the jobs proc-0 held: %v (%v parked in their handler)", retried, owned, held)
	}
	for _, id := range retried {
		j, err := h.s.Executor().GetJob(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Attempt != 2 || !releasedBy(j, "proc-0") {
			t.Errorf("job %d: attempt %d, errors %+v; want attempt 2 after a release by proc-0", id, j.Attempt, j.Errors)
		}
	}
	split := h.split([]*child{p0, p1})
	t.Logf("%d jobs in %v; proc-0 killed after %d completed, holding %d jobs past their ledger row and %d claimed ahead, and restarted; split %v",
		n, elapsed.Round(time.Millisecond), n/3, len(held), len(owned)-len(held), split)
}

// releasedBy reports whether j's errors record a release by owner at
// Start (store.Executor.ReleaseOwned), and no expired lease.
func releasedBy(j *weirtype.Job, owner string) bool {
	released := false
	for _, e := range j.Errors {
		switch e.Type {
		case weirtype.ErrorTypeLeaseExpired:
			return false
		case weirtype.ErrorTypeReleased:
			released = released || strings.Contains(e.Message, owner)
		}
	}
	return released
}

// processJobs returns how many jobs to work: WEIR_PROCESS_JOBS, or
// defaultProcessJobs.
func processJobs(t *testing.T) int {
	t.Helper()
	return testenv.Int(t, jobsEnv, defaultProcessJobs, 1)
}

// processHarness is one test's schema, with weir's tables and the ledger,
// and a client that only inserts.
type processHarness struct {
	t      *testing.T
	url    string
	s      *postgres.Store
	client *weir.Client
}

// newProcessHarness opens a fresh schema, dropped at cleanup, migrates it
// and creates the ledger table. It skips the test, loudly, without
// PostgreSQL (fails it under WEIR_REQUIRE_SERVICES=1).
func newProcessHarness(t *testing.T) *processHarness {
	t.Helper()
	ctx := context.Background()
	s, url := migratedPostgres(t, "weirtest_proc_", 4)
	if _, err := s.Pool().Exec(ctx, "CREATE TABLE "+pgx.Identifier{s.Schema(), "ledger"}.Sanitize()+
		" (job_id bigint, attempt int, process text, PRIMARY KEY (job_id, attempt))"); err != nil {
		t.Fatal(err)
	}
	c, err := weir.NewClient(weir.Config{Store: s, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return &processHarness{t: t, url: url, s: s, client: c}
}

// insert inserts n ledger jobs with InsertMany, insertBatch at a time.
func (h *processHarness) insert(n int) {
	h.t.Helper()
	start := time.Now()
	for i := 0; i < n; i += insertBatch {
		params := make([]weir.InsertManyParams, min(insertBatch, n-i))
		for k := range params {
			params[k] = weir.InsertManyParams{Args: ledgerJob{N: i + k}}
		}
		if _, err := h.client.InsertMany(context.Background(), params); err != nil {
			h.t.Fatal(err)
		}
	}
	h.t.Logf("inserted %d jobs in %v", n, time.Since(start).Round(time.Millisecond))
}

// queryRow runs a query on the test's schema (table names resolve through
// the store's search_path) and scans its one row into dest.
func (h *processHarness) queryRow(sql string, dest ...any) {
	h.t.Helper()
	if err := h.s.Pool().QueryRow(context.Background(), sql).Scan(dest...); err != nil {
		h.t.Fatalf("%s: %v", sql, err)
	}
}

// expectZero fails the test unless the count query returns 0.
func (h *processHarness) expectZero(what, sql string) {
	h.t.Helper()
	var n int
	h.queryRow(sql, &n)
	if n != 0 {
		h.t.Errorf("%d %s", n, what)
	}
}

// ids returns the ids the query selects.
func (h *processHarness) ids(sql string) []int64 {
	h.t.Helper()
	rows, err := h.s.Pool().Query(context.Background(), sql)
	if err != nil {
		h.t.Fatalf("%s: %v", sql, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		h.t.Fatalf("%s: %v", sql, err)
	}
	return ids
}

// expectAllCompleted fails the test unless all n jobs are completed, with
// no dead letters.
func (h *processHarness) expectAllCompleted(n int) {
	h.t.Helper()
	rows, err := h.s.Pool().Query(context.Background(), "SELECT state, count(*) FROM weir_jobs GROUP BY state ORDER BY state")
	if err != nil {
		h.t.Fatal(err)
	}
	states := map[string]int{}
	var state string
	var count int
	if _, err := pgx.ForEachRow(rows, []any{&state, &count}, func() error {
		states[state] = count
		return nil
	}); err != nil {
		h.t.Fatal(err)
	}
	if len(states) != 1 || states[string(weirtype.StateCompleted)] != n {
		h.t.Errorf("jobs by state: %v, want all %d %s", states, n, weirtype.StateCompleted)
	}
	h.expectZero("dead letters", "SELECT count(*) FROM weir_dead_letters")
}

// split returns the ledger rows of each child's ID, and fails the test
// unless each did work.
func (h *processHarness) split(children []*child) map[string]int {
	h.t.Helper()
	split := map[string]int{}
	for _, c := range children {
		var n int
		if err := h.s.Pool().QueryRow(context.Background(), "SELECT count(*) FROM ledger WHERE process = $1", c.id).Scan(&n); err != nil {
			h.t.Fatal(err)
		}
		split[c.id] = n
		if n == 0 {
			h.t.Errorf("%s did no work: split %v", c.id, split)
		}
	}
	return split
}

// waitCompleted waits until at least want jobs are completed (waitCount).
func (h *processHarness) waitCompleted(want int, children ...*child) {
	h.t.Helper()
	h.waitCount("jobs completed", want, "SELECT count(*) FROM weir_jobs WHERE state = 'completed'", children...)
}

// waitCount polls the count query, every pollTick until a deadline that
// grows with want, until it returns at least want. It fails the test at
// once if one of children exits meanwhile.
func (h *processHarness) waitCount(what string, want int, sql string, children ...*child) {
	h.t.Helper()
	limit := time.Minute + time.Duration(want)*5*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	tick := time.NewTicker(pollTick)
	defer tick.Stop()
	for {
		var got int
		h.queryRow(sql, &got)
		if got >= want {
			return
		}
		select {
		case <-ctx.Done():
			h.t.Fatalf("%d of %d %s within %v", got, want, what, limit)
		case <-tick.C:
		}
		for _, c := range children {
			select {
			case <-c.exited:
				h.t.Fatalf("%s exited early (%v) with %d of %d %s", c.id, c.err, got, want, what)
			default:
			}
		}
	}
}

// child is a worker process started by startChild.
type child struct {
	t      *testing.T
	id     string
	cmd    *exec.Cmd
	stderr *syncio.Buffer
	exited chan struct{} // closed when the process has exited; err is set
	err    error
}

// startChild starts the test binary as a worker process (runChild) with
// the client ID id, on h's schema. At cleanup a child still running is
// killed, and a failed test logs every child's stderr.
func (h *processHarness) startChild(id string) *child {
	h.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		childEnv+"=1", childURLEnv+"="+h.url, childSchemaEnv+"="+h.s.Schema(), childIDEnv+"="+id)
	c := &child{t: h.t, id: id, cmd: cmd, stderr: &syncio.Buffer{}, exited: make(chan struct{})}
	cmd.Stderr = c.stderr
	// The child reads its stdin until EOF: if this process dies, the
	// pipe closes and the child stops instead of working on.
	if _, err := cmd.StdinPipe(); err != nil {
		h.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	h.t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			_ = cmd.Process.Kill()
			<-c.exited
		}
		if h.t.Failed() {
			h.t.Logf("%s (pid %d) stderr:\n%s", id, cmd.Process.Pid, c.stderr.String())
		}
	})
	return c
}

// stopChildren stops the children gracefully, all at once (SIGTERM: the
// client's Stop), and fails the test unless each exits 0 within
// childStopLimit.
func stopChildren(t *testing.T, children ...*child) {
	t.Helper()
	for _, c := range children {
		if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("stop %s: %v", c.id, err)
		}
	}
	deadline := time.After(childStopLimit)
	for _, c := range children {
		select {
		case <-c.exited:
		case <-deadline:
			t.Fatalf("%s did not stop within %v", c.id, childStopLimit)
		}
		if c.err != nil {
			t.Errorf("%s exited with %v; stderr:\n%s", c.id, c.err, c.stderr.String())
		}
	}
}

// kill kills the child (SIGKILL) and waits for it to exit.
func (c *child) kill() {
	c.t.Helper()
	if err := c.cmd.Process.Kill(); err != nil {
		c.t.Fatalf("kill %s: %v", c.id, err)
	}
	<-c.exited
	if !crashpoint.Killed(c.err) {
		c.t.Fatalf("%s: want death by SIGKILL, got %v", c.id, c.err)
	}
}
