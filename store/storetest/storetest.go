// Package storetest is the conformance suite every store driver runs against
// a real database. A driver is done when Run passes.
//
// A new store behaviour gets its case here first; each case opens a store of
// its own (a temporary file, a fresh schema), so cases run in parallel.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// Harness is what a driver gives the suite.
type Harness struct {
	// Open returns a store on a database of the calling test's own, not
	// yet migrated, and closes it when the test ends.
	Open func(t *testing.T) store.Store
	// Tx begins a transaction on s's database, calls fn with an Executor
	// bound to it and with exec, which runs a plain SQL statement in the
	// same transaction (the caller's own data), then commits if fn
	// returned nil and commit is true, and rolls back otherwise. It
	// returns fn's error.
	Tx func(t *testing.T, s store.Store, commit bool, fn func(ex store.Executor, exec func(sql string) error) error) error
	// QueryInt runs a query that returns one integer, outside any
	// transaction.
	QueryInt func(t *testing.T, s store.Store, sql string) int
	// SetVersion records in s's database that migration version v was
	// applied, as a newer weir would.
	SetVersion func(t *testing.T, s store.Store, v int)
	// SetState forces job id into state, with one attempt made, started at
	// attemptedAt, as a worker would leave it.
	SetState func(t *testing.T, s store.Store, id int64, state weirtype.State, attemptedAt time.Time)
	// SimSeed replays the simulation's fault schedule: a seed the
	// simulation printed, as the drivers' tests read it from SimSeedEnv.
	// Empty: a new seed each run.
	SimSeed string
}

type suiteCase struct {
	name string
	fn   func(*testing.T, Harness)
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// now is the suite's clock: whole microseconds, which every driver keeps.
var now = time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)

// Run runs every case of the suite.
func Run(t *testing.T, h Harness) {
	cases := []suiteCase{
		{"MigrateFreshAndAgain", testMigrate},
		{"MigrateRefusesNewerSchema", testSchemaTooNew},
		{"InsertDefaults", testInsertDefaults},
		{"InsertScheduledForLater", testInsertScheduled},
		{"InsertRefusesBadParamsAndWritesNothing", testInsertInvalid},
		{"BadParamsRefusedAlike", testBadParamsRefusedAlike},
		{"GetJobNotFound", testGetJobNotFound},
		{"IdempotentDuplicateOfPending", testDuplicatePending},
		{"IdempotentOutcomesByState", testDuplicateByState},
		{"IdempotentStuckBoundary", testStuckBoundary},
		{"IdempotentLiveLeaseIsNeverReclaimed", testLiveLeaseNotReclaimed},
		{"IdempotentConcurrentInserts", testConcurrentSameKey},
		{"IdempotentWithinOneBatch", testSameKeyInBatch},
		{"IdempotentBatchOfACompletedKey", testCompletedKeyTwiceInBatch},
		{"InsertInCallersTransaction", testTransactional},
	}
	cases = append(cases, lifecycleCases()...)
	cases = append(cases, deadlineCases()...)
	cases = append(cases, messagingCases()...)
	cases = append(cases, workflowCases()...)
	cases = append(cases, jobCases()...)
	cases = append(cases, historyCases()...)
	cases = append(cases, pauseCases()...)
	cases = append(cases, retentionCases()...)
	cases = append(cases, limitCases()...)
	cases = append(cases, suiteCase{"SimulatedLifecycleUnderFaults", testSimulation})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, h)
		})
	}
}

func migrated(t *testing.T, h Harness) store.Store {
	t.Helper()
	s := h.Open(t)
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return s
}

// migratedExecutor is the executor of a migrated store of h, for the cases
// that need nothing else of the store.
func migratedExecutor(t *testing.T, h Harness) store.Executor {
	t.Helper()
	return migrated(t, h).Executor()
}

func insertOne(t *testing.T, ex store.Executor, at time.Time, p store.InsertParams) store.InsertResult {
	t.Helper()
	res, err := ex.Insert(context.Background(), at, []store.InsertParams{p})
	if err != nil {
		t.Fatalf("insert %+v: %v", p, err)
	}
	if len(res) != 1 || res[0].Job == nil {
		t.Fatalf("insert returned %+v, want one result with its job", res)
	}
	return res[0]
}

func countJobs(t *testing.T, h Harness, s store.Store) int {
	t.Helper()
	return h.QueryInt(t, s, "SELECT count(*) FROM weir_jobs")
}

func testMigrate(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.Open(t)
	cur, latest, err := s.SchemaVersion(ctx)
	if err != nil || cur != 0 || latest < 1 {
		t.Fatalf("fresh SchemaVersion = %d, %d, %v; want 0 and at least 1", cur, latest, err)
	}
	n, err := s.Migrate(ctx)
	if err != nil || n != latest {
		t.Fatalf("Migrate = %d, %v; want %d", n, err, latest)
	}
	if n, err := s.Migrate(ctx); err != nil || n != 0 {
		t.Fatalf("second Migrate = %d, %v; want 0", n, err)
	}
	if cur, l2, err := s.SchemaVersion(ctx); err != nil || cur != latest || l2 != latest {
		t.Fatalf("SchemaVersion after Migrate = %d, %d, %v; want %d twice", cur, l2, err, latest)
	}
	if f := s.Features(); f.Name == "" {
		t.Fatal("Features().Name is empty")
	}
}

func testSchemaTooNew(t *testing.T, h Harness) {
	ctx := context.Background()
	s := migrated(t, h)
	_, latest, _ := s.SchemaVersion(ctx)
	h.SetVersion(t, s, latest+1)
	_, err := s.Migrate(ctx)
	if !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("Migrate on a newer schema = %v, want ErrSchemaTooNew", err)
	}
	if cur, _, err := s.SchemaVersion(ctx); err != nil || cur != latest+1 {
		t.Fatalf("SchemaVersion = %d, %v; want %d", cur, err, latest+1)
	}
}

func testInsertDefaults(t *testing.T, h Harness) {
	s := migrated(t, h)
	r := insertOne(t, s.Executor(), now, store.InsertParams{Kind: "extract", Payload: json.RawMessage(`{"path":"a.txt"}`), Source: "incoming/a.txt"})
	if r.Outcome != weirtype.Inserted {
		t.Fatalf("outcome %s, want inserted", r.Outcome)
	}
	got, err := s.Executor().GetJob(context.Background(), r.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := weirtype.Job{
		ID: r.Job.ID, Kind: "extract", Queue: store.DefaultQueue, State: weirtype.StateAvailable,
		MaxAttempts: store.DefaultMaxAttempts, Source: "incoming/a.txt",
		ScheduledAt: now, CreatedAt: now, UpdatedAt: now,
	}
	if err := sameJob(got, &want, `{"path":"a.txt"}`); err != nil {
		t.Fatal(err)
	}
	if err := sameJob(r.Job, &want, `{"path":"a.txt"}`); err != nil {
		t.Fatalf("the job Insert returned: %v", err)
	}
}

// sameJob compares the fields a fresh job has.
func sameJob(got, want *weirtype.Job, payload string) error {
	var a, b any
	if err := json.Unmarshal(got.Payload, &a); err != nil {
		return fmt.Errorf("payload %q: %v", got.Payload, err)
	}
	_ = json.Unmarshal([]byte(payload), &b)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		return fmt.Errorf("payload %s, want %s", got.Payload, payload)
	}
	switch {
	case got.ID != want.ID, got.Kind != want.Kind, got.Queue != want.Queue, got.State != want.State,
		got.Attempt != want.Attempt, got.MaxAttempts != want.MaxAttempts, got.Source != want.Source,
		got.IdempotencyKey != want.IdempotencyKey, got.Priority != want.Priority,
		!got.ScheduledAt.Equal(want.ScheduledAt), !got.CreatedAt.Equal(want.CreatedAt), !got.UpdatedAt.Equal(want.UpdatedAt),
		!got.AttemptedAt.IsZero(), !got.FinalizedAt.IsZero(), got.LeaseOwner != "", !got.LeaseExpiresAt.IsZero(),
		!got.DeadlineAt.Equal(want.DeadlineAt), len(got.Errors) != 0:
		return fmt.Errorf("job\n got %+v\nwant %+v", *got, *want)
	}
	return nil
}

func testInsertScheduled(t *testing.T, h Harness) {
	s := migrated(t, h)
	later := now.Add(time.Hour)
	deadline := now.Add(20 * time.Minute)
	r := insertOne(t, s.Executor(), now, store.InsertParams{Kind: "k", ScheduledAt: later, DeadlineAt: deadline, Priority: 3, MaxAttempts: 5, Queue: "q"})
	j := r.Job
	if j.State != weirtype.StateScheduled || !j.ScheduledAt.Equal(later) || !j.DeadlineAt.Equal(deadline) || j.Priority != 3 || j.MaxAttempts != 5 || j.Queue != "q" {
		t.Fatalf("job %+v", *j)
	}
	past := insertOne(t, s.Executor(), now, store.InsertParams{Kind: "k", ScheduledAt: now.Add(-time.Hour)})
	if past.Job.State != weirtype.StateAvailable {
		t.Fatalf("a job scheduled in the past is %s, want available", past.Job.State)
	}
}

func testInsertInvalid(t *testing.T, h Harness) {
	s := migrated(t, h)
	for _, bad := range []store.InsertParams{
		{Kind: ""},
		{Kind: "k", Payload: json.RawMessage(`{not json`)},
		{Kind: "k", MaxAttempts: -1},
	} {
		_, err := s.Executor().Insert(context.Background(), now, []store.InsertParams{{Kind: "good"}, bad})
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("insert of %+v = %v, want ErrInvalid", bad, err)
		}
	}
	if n := countJobs(t, h, s); n != 0 {
		t.Fatalf("%d jobs after refused batches, want 0: a batch is all or nothing", n)
	}
}

func testGetJobNotFound(t *testing.T, h Harness) {
	s := migrated(t, h)
	if _, err := s.Executor().GetJob(context.Background(), 424242); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetJob of a missing id = %v, want ErrNotFound", err)
	}
}

func testDuplicatePending(t *testing.T, h Harness) {
	s := migrated(t, h)
	key := weirtype.IdempotencyKey("incoming", "a.txt", "etag-1")
	first := insertOne(t, s.Executor(), now, store.InsertParams{Kind: "k", IdempotencyKey: key})
	again := insertOne(t, s.Executor(), now.Add(time.Second), store.InsertParams{Kind: "k", IdempotencyKey: key, Payload: json.RawMessage(`{"other":true}`)})
	if first.Outcome != weirtype.Inserted || again.Outcome != weirtype.DuplicatePending || again.Job.ID != first.Job.ID {
		t.Fatalf("outcomes %s then %s (ids %d, %d)", first.Outcome, again.Outcome, first.Job.ID, again.Job.ID)
	}
	if string(again.Job.Payload) == `{"other":true}` {
		t.Fatal("a duplicate insert overwrote the job's payload")
	}
	other := insertOne(t, s.Executor(), now, store.InsertParams{Kind: "k", IdempotencyKey: weirtype.IdempotencyKey("incoming", "a.txt", "etag-2")})
	plain1 := insertOne(t, s.Executor(), now, store.InsertParams{Kind: "k"})
	plain2 := insertOne(t, s.Executor(), now, store.InsertParams{Kind: "k"})
	if other.Outcome != weirtype.Inserted || plain1.Outcome != weirtype.Inserted || plain2.Outcome != weirtype.Inserted {
		t.Fatalf("distinct or empty keys collided: %s %s %s", other.Outcome, plain1.Outcome, plain2.Outcome)
	}
	if n := countJobs(t, h, s); n != 4 {
		t.Fatalf("%d jobs, want 4", n)
	}
}

func testDuplicateByState(t *testing.T, h Harness) {
	s := migrated(t, h)
	tests := []struct {
		state       weirtype.State
		attemptedAt time.Time
		want        weirtype.InsertOutcome
	}{
		{weirtype.StateScheduled, now.Add(-time.Hour), weirtype.DuplicatePending},
		{weirtype.StateRunning, now.Add(-5 * time.Minute), weirtype.DuplicateRunning},
		{weirtype.StateRunning, now.Add(-11 * time.Minute), weirtype.Reclaimed},
		{weirtype.StateCompleted, now.Add(-time.Hour), weirtype.DuplicateCompleted},
		{weirtype.StateCancelled, now.Add(-time.Hour), weirtype.DuplicateFinal},
		{weirtype.StateDead, now.Add(-time.Hour), weirtype.DuplicateFinal},
	}
	for i, tt := range tests {
		key := fmt.Sprintf("key-%d", i)
		first := insertOne(t, s.Executor(), now.Add(-2*time.Hour), store.InsertParams{Kind: "k", IdempotencyKey: key})
		h.SetState(t, s, first.Job.ID, tt.state, tt.attemptedAt)
		r := insertOne(t, s.Executor(), now, store.InsertParams{Kind: "k", IdempotencyKey: key})
		if r.Outcome != tt.want || r.Job.ID != first.Job.ID {
			t.Errorf("%s attempted %v ago: outcome %s (id %d), want %s (id %d)", tt.state, now.Sub(tt.attemptedAt), r.Outcome, r.Job.ID, tt.want, first.Job.ID)
			continue
		}
		got, err := s.Executor().GetJob(context.Background(), first.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if tt.want != weirtype.Reclaimed {
			if got.State != tt.state {
				t.Errorf("a %s duplicate changed the job to %s", tt.want, got.State)
			}
			continue
		}
		// Reclaimed: available now, lease gone, the stuck attempt recorded.
		if got.State != weirtype.StateAvailable || !got.ScheduledAt.Equal(now) || got.LeaseOwner != "" || !got.LeaseExpiresAt.IsZero() || !got.UpdatedAt.Equal(now) {
			t.Errorf("reclaimed job %+v", *got)
		}
		if len(got.Errors) != 1 || got.Errors[0].Type != weirtype.ErrorTypeStuck || !got.Errors[0].At.Equal(now) ||
			got.Errors[0].Attempt != 1 || got.Attempt != 1 || !strings.Contains(got.Errors[0].Message, "11m0s") {
			t.Errorf("reclaimed job's errors %+v, want one of type stuck at %v", got.Errors, now)
		}
		if r.Job.State != weirtype.StateAvailable {
			t.Errorf("Insert returned the job as %s, want it as reclaimed (available)", r.Job.State)
		}
	}
}

func testStuckBoundary(t *testing.T, h Harness) {
	s := migrated(t, h)
	first := insertOne(t, s.Executor(), now.Add(-time.Hour), store.InsertParams{Kind: "k", IdempotencyKey: "boundary"})
	// Running for exactly StuckAfter is not stuck; one microsecond more is.
	h.SetState(t, s, first.Job.ID, weirtype.StateRunning, now.Add(-10*time.Minute))
	if r := insertOne(t, s.Executor(), now, store.InsertParams{Kind: "k", IdempotencyKey: "boundary", StuckAfter: 10 * time.Minute}); r.Outcome != weirtype.DuplicateRunning {
		t.Fatalf("running exactly StuckAfter: %s, want duplicate_running", r.Outcome)
	}
	if r := insertOne(t, s.Executor(), now.Add(time.Microsecond), store.InsertParams{Kind: "k", IdempotencyKey: "boundary", StuckAfter: 10 * time.Minute}); r.Outcome != weirtype.Reclaimed {
		t.Fatalf("running StuckAfter + 1µs: %s, want reclaimed", r.Outcome)
	}
}

// An insert of the key of a running job whose lease is alive (its worker
// heartbeats) never reclaims it, however long it has run and whatever the
// inserter's StuckAfter: only once the lease has expired unrescued (or the
// job has none) is a job past StuckAfter reclaimed.
func testLiveLeaseNotReclaimed(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migratedExecutor(t, h)
	started := now.Add(-30 * time.Minute)
	insertOne(t, ex, started.Add(-time.Second), store.InsertParams{Kind: "k", Queue: "live", IdempotencyKey: "live"})
	got := claim(t, ex, started, "live", "w1", 1)
	if len(got) != 1 {
		t.Fatalf("claimed %v, want one job", ids(got))
	}
	j := got[0]
	// The worker's heartbeats keep the lease: it now ends at now+lease.
	if lost, err := ex.Heartbeat(ctx, now, []store.Lease{store.LeaseOf(j)}, lease); err != nil || len(lost) != 0 {
		t.Fatalf("heartbeat: lost %v, %v", lost, err)
	}
	for _, at := range []time.Time{now, now.Add(lease)} { // up to the lease's end: alive
		r := insertOne(t, ex, at, store.InsertParams{Kind: "k", IdempotencyKey: "live", StuckAfter: time.Minute})
		if r.Outcome != weirtype.DuplicateRunning || r.Job.ID != j.ID {
			t.Fatalf("insert at %v, %v after the attempt began, its lease alive: %s of job %d, want duplicate_running of %d",
				at, at.Sub(started), r.Outcome, r.Job.ID, j.ID)
		}
		cur := getJob(t, ex, j.ID)
		if cur.State != weirtype.StateRunning || cur.LeaseOwner != "w1" || cur.Attempt != 1 || len(cur.Errors) != 0 {
			t.Fatalf("the insert changed the running job: %+v", *cur)
		}
	}
	if _, err := ex.Complete(ctx, now, store.LeaseOf(j)); err != nil {
		t.Fatalf("the worker lost its job to the insert: %v", err)
	}

	// A job whose lease expired (its worker died) and that the rescue has
	// not reached yet is reclaimed, once past StuckAfter.
	insertOne(t, ex, started.Add(-time.Second), store.InsertParams{Kind: "k", Queue: "dead-worker", IdempotencyKey: "dead-worker"})
	got = claim(t, ex, started, "dead-worker", "w2", 1)
	if len(got) != 1 {
		t.Fatalf("claimed %v, want one job", ids(got))
	}
	if _, err := ex.Heartbeat(ctx, now, []store.Lease{store.LeaseOf(got[0])}, lease); err != nil {
		t.Fatal(err)
	}
	after := now.Add(lease + time.Microsecond)
	r := insertOne(t, ex, after, store.InsertParams{Kind: "k", IdempotencyKey: "dead-worker", StuckAfter: time.Minute})
	if r.Outcome != weirtype.Reclaimed || r.Job.ID != got[0].ID || r.Job.State != weirtype.StateAvailable {
		t.Fatalf("insert after the lease expired: %s of job %d (%s), want reclaimed of %d", r.Outcome, r.Job.ID, r.Job.State, got[0].ID)
	}
	// Within StuckAfter a job whose lease expired is still a duplicate: the
	// rescue takes it back.
	insertOne(t, ex, now.Add(-time.Minute), store.InsertParams{Kind: "k", Queue: "young", IdempotencyKey: "young"})
	got = claim(t, ex, now, "young", "w3", 1)
	if len(got) != 1 {
		t.Fatalf("claimed %v, want one job", ids(got))
	}
	r = insertOne(t, ex, now.Add(2*lease), store.InsertParams{Kind: "k", IdempotencyKey: "young", StuckAfter: 10 * time.Minute})
	if r.Outcome != weirtype.DuplicateRunning {
		t.Fatalf("insert within StuckAfter, the lease expired: %s, want duplicate_running", r.Outcome)
	}
}

func testConcurrentSameKey(t *testing.T, h Harness) {
	s := migrated(t, h)
	const n = 100
	outcomes := map[weirtype.InsertOutcome]int{}
	ids := map[int64]bool{}
	for _, r := range InsertAtOnce(t, s.Executor(), now, n, store.InsertParams{Kind: "k", IdempotencyKey: "one-key"}) {
		outcomes[r.Outcome]++
		ids[r.Job.ID] = true
	}
	if outcomes[weirtype.Inserted] != 1 || outcomes[weirtype.DuplicatePending] != n-1 || len(ids) != 1 {
		t.Fatalf("outcomes %v over %d ids, want 1 inserted and %d duplicates of one job", outcomes, len(ids), n-1)
	}
	if c := countJobs(t, h, s); c != 1 {
		t.Fatalf("%d jobs, want 1", c)
	}
}

// InsertAtOnce runs n inserts of p at once, at at, each a call of its
// own, and returns their results; it fails the test if any insert fails.
func InsertAtOnce(t *testing.T, ex store.Executor, at time.Time, n int, p store.InsertParams) []store.InsertResult {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		out  []store.InsertResult
		errs []error
	)
	for range n {
		wg.Go(func() {
			res, err := ex.Insert(context.Background(), at, []store.InsertParams{p})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			out = append(out, res[0])
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d concurrent inserts failed, first: %v", len(errs), n, errs[0])
	}
	return out
}

func testSameKeyInBatch(t *testing.T, h Harness) {
	s := migrated(t, h)
	res, err := s.Executor().Insert(context.Background(), now, []store.InsertParams{
		{Kind: "k", IdempotencyKey: "twice"},
		{Kind: "k"},
		{Kind: "k", IdempotencyKey: "twice"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 || res[0].Outcome != weirtype.Inserted || res[1].Outcome != weirtype.Inserted ||
		res[2].Outcome != weirtype.DuplicatePending || res[2].Job.ID != res[0].Job.ID {
		t.Fatalf("batch results %+v", res)
	}
	if c := countJobs(t, h, s); c != 2 {
		t.Fatalf("%d jobs, want 2", c)
	}
}

func testCompletedKeyTwiceInBatch(t *testing.T, h Harness) {
	s := migrated(t, h)
	first := insertOne(t, s.Executor(), now.Add(-time.Hour), store.InsertParams{Kind: "k", IdempotencyKey: "done"})
	h.SetState(t, s, first.Job.ID, weirtype.StateCompleted, now.Add(-time.Hour))
	res, err := s.Executor().Insert(context.Background(), now, []store.InsertParams{
		{Kind: "k", IdempotencyKey: "done"},
		{Kind: "k", IdempotencyKey: "done"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Outcome != weirtype.DuplicateCompleted || r.Job.ID != first.Job.ID {
			t.Errorf("insert %d: %s of job %d, want duplicate_completed of %d", i, r.Outcome, r.Job.ID, first.Job.ID)
		}
	}
}

func testTransactional(t *testing.T, h Harness) {
	s := migrated(t, h)
	errAbort := errors.New("abort")
	for _, commit := range []bool{false, true} {
		table := fmt.Sprintf("app_docs_%v", commit)
		err := h.Tx(t, s, commit, func(ex store.Executor, exec func(string) error) error {
			if err := exec("CREATE TABLE " + table + " (id TEXT PRIMARY KEY)"); err != nil {
				return err
			}
			if err := exec("INSERT INTO " + table + " (id) VALUES ('doc-1')"); err != nil {
				return err
			}
			if _, err := ex.Insert(context.Background(), now, []store.InsertParams{{Kind: "index", IdempotencyKey: "doc-1-" + table}}); err != nil {
				return err
			}
			if !commit {
				return errAbort
			}
			return nil
		})
		if commit && err != nil {
			t.Fatalf("committed transaction: %v", err)
		}
		if !commit && !errors.Is(err, errAbort) {
			t.Fatalf("rolled-back transaction returned %v", err)
		}
	}
	if n := h.QueryInt(t, s, "SELECT count(*) FROM app_docs_true"); n != 1 {
		t.Fatalf("%d committed docs, want 1", n)
	}
	if n := countJobs(t, h, s); n != 1 {
		t.Fatalf("%d jobs, want only the committed one", n)
	}
	if n := h.QueryInt(t, s, "SELECT count(*) FROM weir_jobs WHERE idempotency_key = 'doc-1-app_docs_false'"); n != 0 {
		t.Fatal("the rolled-back enqueue left a job")
	}
}
