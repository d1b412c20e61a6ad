package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// lifecycleCases are the cases of the job lifecycle: claim, heartbeat,
// complete, fail, snooze, cancel, rescue, release and the dead letters.
func lifecycleCases() []suiteCase {
	return []suiteCase{
		{"ClaimOrderQueueAndLease", testClaimOrder},
		{"ClaimLimit", testClaimLimit},
		{"ClaimFromAHintLosesNothing", testClaimFrom},
		{"ClaimConcurrentTakesEachJobOnce", testClaimConcurrent},
		{"Heartbeat", testHeartbeat},
		{"CompleteNeedsTheLease", testComplete},
		{"CompleteManyReportsTheLost", testCompleteMany},
		{"CompleteAndClaimInOneTransaction", testCompleteAndClaim},
		{"FailSchedulesARetry", testFailRetry},
		{"FailAbandonsToDeadLetters", testFailAbandon},
		{"FailAbandonsForEveryReason", testFailEveryReason},
		{"SnoozeGivesTheAttemptBack", testSnooze},
		{"Cancel", testCancel},
		{"RescueExpiredLeases", testRescueExpired},
		{"StaleAttemptCannotFinish", testStaleAttempt},
		{"ReleaseOwned", testReleaseOwned},
		{"ReleaseOwnedExceptKeepsTheLeasesRunning", testReleaseOwnedExcept},
		{"DeadLetterListRequeuePurge", testDeadLetterOps},
		{"DeadLetterFilterByJobID", testDeadLetterByJobID},
	}
}

const lease = 30 * time.Second

func claim(t *testing.T, ex store.Executor, at time.Time, queue, owner string, limit int) []*weirtype.Job {
	t.Helper()
	jobs, err := ex.Claim(context.Background(), store.ClaimParams{Now: at, Queue: queue, Limit: limit, Owner: owner, LeaseFor: lease})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return jobs
}

func ids(jobs []*weirtype.Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func getJob(t *testing.T, ex store.Executor, id int64) *weirtype.Job {
	t.Helper()
	j, err := ex.GetJob(context.Background(), id)
	if err != nil {
		t.Fatalf("get job %d: %v", id, err)
	}
	return j
}

// claimOne inserts a job and claims it as owner at now.
func claimOne(t *testing.T, ex store.Executor, p store.InsertParams, owner string) *weirtype.Job {
	t.Helper()
	if p.Queue == "" {
		p.Queue = "q-" + owner + fmt.Sprint(time.Now().UnixNano())
	}
	r := insertOne(t, ex, now.Add(-time.Minute), p)
	got := claim(t, ex, now, p.Queue, owner, 1)
	if len(got) != 1 || got[0].ID != r.Job.ID {
		t.Fatalf("claimed %v, want job %d", ids(got), r.Job.ID)
	}
	return got[0]
}

func testClaimOrder(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	a := insertOne(t, ex, now, store.InsertParams{Kind: "k", ScheduledAt: now.Add(-2 * time.Minute)}).Job
	b := insertOne(t, ex, now, store.InsertParams{Kind: "k", Priority: 5, ScheduledAt: now.Add(-time.Minute)}).Job
	c := insertOne(t, ex, now, store.InsertParams{Kind: "k", ScheduledAt: now.Add(-3 * time.Minute)}).Job
	later := insertOne(t, ex, now, store.InsertParams{Kind: "k", ScheduledAt: now.Add(time.Hour)}).Job
	other := insertOne(t, ex, now, store.InsertParams{Kind: "k", Queue: "other"}).Job

	got := claim(t, ex, now, store.DefaultQueue, "w1", 10)
	if want := []int64{b.ID, c.ID, a.ID}; !slices.Equal(ids(got), want) {
		t.Fatalf("claimed %v, want %v: priority first, then scheduled time", ids(got), want)
	}
	for _, j := range got {
		if j.State != weirtype.StateRunning || j.Attempt != 1 || !j.AttemptedAt.Equal(now) || j.LeaseOwner != "w1" ||
			!j.LeaseExpiresAt.Equal(now.Add(lease)) || !j.UpdatedAt.Equal(now) {
			t.Fatalf("claimed job %+v", *j)
		}
		if stored := getJob(t, ex, j.ID); stored.State != weirtype.StateRunning || stored.LeaseOwner != "w1" {
			t.Fatalf("stored job %+v", *stored)
		}
	}
	if again := claim(t, ex, now, store.DefaultQueue, "w2", 10); len(again) != 0 {
		t.Fatalf("second claim took %v, want nothing", ids(again))
	}
	if due := claim(t, ex, now.Add(time.Hour), store.DefaultQueue, "w2", 10); !slices.Equal(ids(due), []int64{later.ID}) {
		t.Fatalf("claim at the scheduled time took %v, want %d", ids(due), later.ID)
	}
	if o := claim(t, ex, now, "other", "w3", 10); !slices.Equal(ids(o), []int64{other.ID}) {
		t.Fatalf("claim of queue other took %v", ids(o))
	}
}

func testClaimLimit(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	for range 5 {
		insertOne(t, ex, now, store.InsertParams{Kind: "k"})
	}
	var sizes []int
	for range 4 {
		sizes = append(sizes, len(claim(t, ex, now, store.DefaultQueue, "w", 2)))
	}
	if !slices.Equal(sizes, []int{2, 2, 1, 0}) {
		t.Fatalf("claims of 2 took %v, want [2 2 1 0]", sizes)
	}
	if _, err := ex.Claim(context.Background(), store.ClaimParams{Now: now, Limit: 0, Owner: "w", LeaseFor: lease}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("claim with limit 0: %v, want ErrInvalid", err)
	}
	if _, err := ex.Claim(context.Background(), store.ClaimParams{Now: now, Limit: 1, LeaseFor: lease}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("claim without an owner: %v, want ErrInvalid", err)
	}
}

// A claim from a hint (ClaimParams.From) may pass over the jobs ordered
// before it, never take one twice, and a claim from the head then takes
// those it passed over; a place without a job or a time is refused.
func testClaimFrom(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	var all []int64
	for i := range 6 {
		all = append(all, insertOne(t, ex, now, store.InsertParams{Kind: "k", Queue: "cf", ScheduledAt: now.Add(-time.Duration(6-i) * time.Second)}).Job.ID)
	}
	first := claim(t, ex, now, "cf", "w", 2)
	urgent := insertOne(t, ex, now, store.InsertParams{Kind: "k", Queue: "cf", Priority: 3}).Job.ID
	all = append(all, urgent)
	jobs, err := ex.Claim(ctx, store.ClaimParams{Now: now, Queue: "cf", Limit: 3, Owner: "w", LeaseFor: lease, From: store.ClaimFromJob(first[0])})
	if err != nil {
		t.Fatal(err)
	}
	// A job of a higher priority than the hint's, inserted since, is
	// taken first by the claim from the hint.
	if len(jobs) == 0 || jobs[0].ID != urgent {
		t.Fatalf("claim from a hint took %v, want the job of a higher priority %d first", ids(jobs), urgent)
	}
	rest := claim(t, ex, now, "cf", "w", 10)
	got := slices.Sorted(slices.Values(append(append(ids(first), ids(jobs)...), ids(rest)...)))
	if !slices.Equal(got, all) {
		t.Fatalf("claims from the head, from a hint and from the head again took %v, want each of %v once", got, all)
	}
	if _, err := ex.Claim(ctx, store.ClaimParams{Now: now, Queue: "cf", Limit: 1, Owner: "w", LeaseFor: lease, From: store.ClaimFrom{Priority: 1}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("claim from a place without a job: %v, want ErrInvalid", err)
	}
}

func testClaimConcurrent(t *testing.T, h Harness) {
	s := migrated(t, h)
	const jobs, workers = 200, 8
	batch := make([]store.InsertParams, jobs)
	for i := range batch {
		batch[i] = store.InsertParams{Kind: "k"}
	}
	if _, err := s.Executor().Insert(context.Background(), now, batch); err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		seen   = map[int64]string{}
		dupErr error
		wg     sync.WaitGroup
	)
	for w := range workers {
		owner := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			for {
				got, err := s.Executor().Claim(context.Background(), store.ClaimParams{Now: now, Limit: 7, Owner: owner, LeaseFor: lease})
				mu.Lock()
				if err != nil && dupErr == nil {
					dupErr = err
				}
				for _, j := range got {
					if prev, ok := seen[j.ID]; ok && dupErr == nil {
						dupErr = fmt.Errorf("job %d claimed by %s and %s", j.ID, prev, owner)
					}
					seen[j.ID] = owner
				}
				mu.Unlock()
				if err != nil || len(got) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if dupErr != nil {
		t.Fatal(dupErr)
	}
	if len(seen) != jobs {
		t.Fatalf("%d jobs claimed, want %d", len(seen), jobs)
	}
}

func testHeartbeat(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	j1 := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "hb"}, "w1")
	j2 := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "hb2"}, "w1")
	other := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "hb3"}, "w2")
	at := now.Add(10 * time.Second)
	lost, err := ex.Heartbeat(context.Background(), at, []store.Lease{
		store.LeaseOf(j1), store.LeaseOf(j2),
		{ID: other.ID, Owner: "w1", Attempt: other.Attempt}, // held by w2
		{ID: 999999, Owner: "w1", Attempt: 1},               // missing
	}, lease)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lost)
	if want := []int64{other.ID, 999999}; !slices.Equal(lost, want) {
		t.Fatalf("lost %v, want %v (held by another worker, and missing)", lost, want)
	}
	for _, id := range []int64{j1.ID, j2.ID} {
		if j := getJob(t, ex, id); !j.LeaseExpiresAt.Equal(at.Add(lease)) || j.LeaseOwner != "w1" {
			t.Fatalf("job %d lease %v by %q, want %v by w1", id, j.LeaseExpiresAt, j.LeaseOwner, at.Add(lease))
		}
	}
	if j := getJob(t, ex, other.ID); !j.LeaseExpiresAt.Equal(now.Add(lease)) {
		t.Fatalf("a heartbeat of w1 moved w2's lease to %v", j.LeaseExpiresAt)
	}
}

func testComplete(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	j := claimOne(t, ex, store.InsertParams{Kind: "k"}, "w1")
	if _, err := ex.Complete(context.Background(), now, store.Lease{ID: j.ID, Owner: "w2", Attempt: j.Attempt}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("complete by another worker: %v, want ErrLeaseLost", err)
	}
	done, err := ex.Complete(context.Background(), now.Add(time.Second), store.LeaseOf(j))
	if err != nil {
		t.Fatal(err)
	}
	if done.State != weirtype.StateCompleted || !done.FinalizedAt.Equal(now.Add(time.Second)) || done.LeaseOwner != "" || !done.LeaseExpiresAt.IsZero() {
		t.Fatalf("completed job %+v", *done)
	}
	if _, err := ex.Complete(context.Background(), now.Add(2*time.Second), store.LeaseOf(j)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("second complete: %v, want ErrLeaseLost", err)
	}
	if _, err := ex.Complete(context.Background(), now, store.Lease{ID: 999999, Owner: "w1", Attempt: 1}); !errors.Is(err, store.ErrLeaseLost) && !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("complete of a missing job: %v", err)
	}
}

func testCompleteMany(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	j1 := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "cm1"}, "w1")
	j2 := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "cm2"}, "w1")
	j3 := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "cm3"}, "w1")
	other := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "cm4"}, "w2")
	if lost, err := ex.CompleteMany(context.Background(), now, nil); err != nil || len(lost) != 0 {
		t.Fatalf("complete of no leases: lost %v, %v", lost, err)
	}
	if _, err := ex.CompleteMany(context.Background(), now, []store.Lease{store.LeaseOf(j1), {ID: j2.ID, Attempt: 1}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("complete of a lease without an owner: %v, want ErrInvalid", err)
	}
	if _, err := ex.CompleteMany(context.Background(), time.Time{}, []store.Lease{store.LeaseOf(j1)}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("complete at the zero time: %v, want ErrInvalid", err)
	}
	if j := getJob(t, ex, j1.ID); j.State != weirtype.StateRunning {
		t.Fatalf("an invalid CompleteMany changed job %d: %+v", j1.ID, *j)
	}

	at := now.Add(time.Second)
	lost, err := ex.CompleteMany(context.Background(), at, []store.Lease{
		store.LeaseOf(j1),
		{ID: other.ID, Owner: "w1", Attempt: other.Attempt}, // held by w2
		store.LeaseOf(j2),
		{ID: 999999, Owner: "w1", Attempt: 1}, // missing
		store.LeaseOf(j3),
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{other.ID, 999999}; !slices.Equal(lost, want) {
		t.Fatalf("lost %v, want %v (held by another worker, and missing, in input order)", lost, want)
	}
	for _, id := range []int64{j1.ID, j2.ID, j3.ID} {
		if j := getJob(t, ex, id); j.State != weirtype.StateCompleted || !j.FinalizedAt.Equal(at) || j.LeaseOwner != "" || !j.LeaseExpiresAt.IsZero() {
			t.Fatalf("completed job %+v", *j)
		}
	}
	if j := getJob(t, ex, other.ID); j.State != weirtype.StateRunning || j.LeaseOwner != "w2" || !j.LeaseExpiresAt.Equal(now.Add(lease)) || !j.FinalizedAt.IsZero() {
		t.Fatalf("a CompleteMany of w1 changed w2's job: %+v", *j)
	}
	again, err := ex.CompleteMany(context.Background(), at.Add(time.Second), []store.Lease{store.LeaseOf(j2), store.LeaseOf(j1)})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{j2.ID, j1.ID}; !slices.Equal(again, want) {
		t.Fatalf("second complete lost %v, want %v", again, want)
	}
	if j := getJob(t, ex, j1.ID); !j.FinalizedAt.Equal(at) {
		t.Fatalf("a second complete moved FinalizedAt to %v", j.FinalizedAt)
	}
}

// testCompleteAndClaim checks store.CompletingClaimer, where the
// executor has it: the completions are those of CompleteMany (the lost
// reported in order), the claim that of Claim, both at p.Now, and a call
// refused for a bad claim completes nothing.
func testCompleteAndClaim(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	cc, ok := ex.(store.CompletingClaimer)
	if !ok {
		t.Skip("the executor does not write completions with a claim")
	}
	ctx := context.Background()
	j1 := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "cc"}, "w1")
	j2 := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "cc"}, "w1")
	other := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "cc-other"}, "w2")
	insertOne(t, ex, now, store.InsertParams{Kind: "k", Queue: "cc", Priority: 1})
	insertOne(t, ex, now, store.InsertParams{Kind: "k", Queue: "cc"})
	insertOne(t, ex, now, store.InsertParams{Kind: "k", Queue: "cc-other"})

	at := now.Add(time.Second)
	claim := store.ClaimParams{Now: at, Queue: "cc", Limit: 5, Owner: "w1", LeaseFor: lease}
	bad := claim
	bad.Limit = 0
	if _, _, err := cc.CompleteAndClaim(ctx, []store.Lease{store.LeaseOf(j1)}, bad); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a claim of no jobs: %v, want ErrInvalid", err)
	}
	if j := getJob(t, ex, j1.ID); j.State != weirtype.StateRunning {
		t.Fatalf("a refused CompleteAndClaim completed job %d: %+v", j1.ID, *j)
	}

	lost, jobs, err := cc.CompleteAndClaim(ctx, []store.Lease{
		store.LeaseOf(j1),
		{ID: other.ID, Owner: "w1", Attempt: other.Attempt}, // held by w2
		{ID: 999999, Owner: "w1", Attempt: 1},               // missing
		store.LeaseOf(j2),
	}, claim)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{other.ID, 999999}; !slices.Equal(lost, want) {
		t.Fatalf("lost %v, want %v (held by another worker, and missing, in input order)", lost, want)
	}
	for _, id := range []int64{j1.ID, j2.ID} {
		if j := getJob(t, ex, id); j.State != weirtype.StateCompleted || !j.FinalizedAt.Equal(at) || j.LeaseOwner != "" {
			t.Fatalf("completed job %+v", *j)
		}
	}
	if j := getJob(t, ex, other.ID); j.State != weirtype.StateRunning || j.LeaseOwner != "w2" {
		t.Fatalf("w1's call changed w2's job: %+v", *j)
	}
	if len(jobs) != 2 || jobs[0].Priority != 1 || jobs[1].Priority != 0 {
		t.Fatalf("claimed %d jobs, want the queue's 2 in claim order: %+v", len(jobs), jobs)
	}
	for _, j := range jobs {
		if j.Queue != "cc" || j.State != weirtype.StateRunning || j.LeaseOwner != "w1" || !j.AttemptedAt.Equal(at) || !j.LeaseExpiresAt.Equal(at.Add(lease)) {
			t.Fatalf("claimed job %+v", *j)
		}
	}

	// No completions: a claim alone.
	lost, jobs, err = cc.CompleteAndClaim(ctx, nil, claim)
	if err != nil || len(lost) != 0 || len(jobs) != 0 {
		t.Fatalf("a call with nothing to complete on an empty queue: lost %v, claimed %d, %v", lost, len(jobs), err)
	}
}

func attemptErr(attempt int, msg string) weirtype.AttemptError {
	return weirtype.AttemptError{Attempt: attempt, At: now, Message: msg, Type: "*errors.errorString"}
}

func testFailRetry(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	j := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "retry"}, "w1")
	if _, err := ex.Fail(context.Background(), store.FailParams{Now: now, Lease: store.Lease{ID: j.ID, Owner: "w2", Attempt: 1}, Error: attemptErr(1, "x"), RetryAt: now}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("fail by another worker: %v, want ErrLeaseLost", err)
	}
	got, err := ex.Fail(context.Background(), store.FailParams{Now: now, Lease: store.LeaseOf(j), Error: attemptErr(1, "index timed out"), RetryAt: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != weirtype.StateScheduled || !got.ScheduledAt.Equal(now.Add(time.Minute)) || got.Attempt != 1 || got.LeaseOwner != "" ||
		len(got.Errors) != 1 || got.Errors[0] != attemptErr(1, "index timed out") {
		t.Fatalf("failed job %+v", *got)
	}
	if early := claim(t, ex, now.Add(59*time.Second), "retry", "w1", 1); len(early) != 0 {
		t.Fatal("a retry was claimed before its time")
	}
	again := claim(t, ex, now.Add(time.Minute), "retry", "w1", 1)
	if len(again) != 1 || again[0].Attempt != 2 {
		t.Fatalf("retry claim %+v, want the job at attempt 2", again)
	}
	// A retry due at once is available; a zero RetryAt means at once.
	got, err = ex.Fail(context.Background(), store.FailParams{Now: now.Add(time.Minute), Lease: store.LeaseOf(again[0]), Error: attemptErr(2, "again"), RetryAt: now})
	if err != nil || got.State != weirtype.StateAvailable || len(got.Errors) != 2 {
		t.Fatalf("fail with an immediate retry: %+v, %v", got, err)
	}
	third := claim(t, ex, now.Add(2*time.Minute), "retry", "w1", 1)
	if len(third) != 1 {
		t.Fatal("the job retried at once was not claimable")
	}
	got, err = ex.Fail(context.Background(), store.FailParams{Now: now.Add(2 * time.Minute), Lease: store.LeaseOf(third[0]), Error: attemptErr(3, "zero")})
	if err != nil || got.State != weirtype.StateAvailable || !got.ScheduledAt.Equal(now.Add(2*time.Minute)) {
		t.Fatalf("fail with a zero RetryAt: %+v, %v", got, err)
	}
}

func testFailAbandon(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	j := claimOne(t, ex, store.InsertParams{Kind: "extract", IdempotencyKey: "doc-7", Source: "incoming/doc-7.txt", Payload: []byte(`{"path":"doc-7.txt"}`)}, "w1")
	e := weirtype.AttemptError{Attempt: 1, At: now.Add(time.Second), Message: "not UTF-8", Type: "*pipeline.DecodeError"}
	got, err := ex.Fail(context.Background(), store.FailParams{Now: now.Add(time.Second), Lease: store.LeaseOf(j), Error: e, Abandon: weirtype.AbandonPermanent})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != weirtype.StateDead || !got.FinalizedAt.Equal(now.Add(time.Second)) || got.LeaseOwner != "" {
		t.Fatalf("abandoned job %+v", *got)
	}
	dls, err := ex.ListDeadLetters(context.Background(), store.DeadLetterFilter{})
	if err != nil || len(dls) != 1 {
		t.Fatalf("dead letters %v, %v; want one", dls, err)
	}
	dl := dls[0]
	if dl.JobID != j.ID || dl.Kind != "extract" || dl.Queue != j.Queue || dl.Source != "incoming/doc-7.txt" || dl.IdempotencyKey != "doc-7" ||
		dl.Attempts != 1 || dl.LastError != "not UTF-8" || dl.ErrorType != "*pipeline.DecodeError" || dl.Reason != weirtype.AbandonPermanent ||
		len(dl.Errors) != 1 || dl.Errors[0] != e || !dl.JobCreatedAt.Equal(j.CreatedAt) || !dl.FailedAt.Equal(now.Add(time.Second)) {
		t.Fatalf("dead letter %+v", *dl)
	}
	var payload map[string]string
	if err := jsonUnmarshal(dl.Payload, &payload); err != nil || payload["path"] != "doc-7.txt" {
		t.Fatalf("dead letter payload %s", dl.Payload)
	}
	byID, err := ex.GetDeadLetter(context.Background(), dl.ID)
	if err != nil || byID.JobID != j.ID {
		t.Fatalf("GetDeadLetter: %+v, %v", byID, err)
	}
	if _, err := ex.GetDeadLetter(context.Background(), dl.ID+1000); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetDeadLetter of a missing id: %v, want ErrNotFound", err)
	}
	// The dead job's key still absorbs a re-fired event.
	if r := insertOne(t, ex, now.Add(time.Hour), store.InsertParams{Kind: "extract", IdempotencyKey: "doc-7"}); r.Outcome != weirtype.DuplicateFinal {
		t.Fatalf("insert of a dead job's key: %s, want duplicate_final", r.Outcome)
	}
}

// Every abandon reason weirtype knows can be stored and filtered on: the
// dead letters' table was made with a closed list of reasons, which a new
// reason must be added to by a migration.
func testFailEveryReason(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	for i, reason := range weirtype.AbandonReasons() {
		j := claimOne(t, ex, store.InsertParams{Kind: "k", IdempotencyKey: fmt.Sprintf("reason-%d", i)}, "w1")
		e := weirtype.AttemptError{Attempt: 1, At: now, Message: string(reason), Type: "test"}
		if _, err := ex.Fail(ctx, store.FailParams{Now: now, Lease: store.LeaseOf(j), Error: e, Abandon: reason}); err != nil {
			t.Fatalf("abandon for %q: %v", reason, err)
		}
		dls, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{Reason: reason})
		if err != nil || len(dls) != 1 || dls[0].JobID != j.ID || dls[0].Reason != reason {
			t.Fatalf("dead letters of reason %q: %v, %v; want job %d's", reason, dls, err, j.ID)
		}
	}
	j := claimOne(t, ex, store.InsertParams{Kind: "k", IdempotencyKey: "unknown"}, "w1")
	_, err := ex.Fail(ctx, store.FailParams{Now: now, Lease: store.LeaseOf(j), Error: weirtype.AttemptError{Attempt: 1, At: now}, Abandon: "no_such_reason"})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("abandon for an unknown reason: %v, want ErrInvalid", err)
	}
}

func testSnooze(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	j := claimOne(t, ex, store.InsertParams{Kind: "k"}, "w1")
	if _, err := ex.Snooze(context.Background(), now, store.Lease{ID: j.ID, Owner: "w2", Attempt: j.Attempt}, now.Add(time.Hour)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("snooze by another worker: %v, want ErrLeaseLost", err)
	}
	got, err := ex.Snooze(context.Background(), now, store.LeaseOf(j), now.Add(5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got.State != weirtype.StateScheduled || got.Attempt != 0 || !got.ScheduledAt.Equal(now.Add(5*time.Minute)) || got.LeaseOwner != "" || len(got.Errors) != 0 {
		t.Fatalf("snoozed job %+v", *got)
	}
}

func testCancel(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	waiting := insertOne(t, ex, now, store.InsertParams{Kind: "k", Queue: "c1"}).Job
	running := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "c2"}, "w1")
	for _, j := range []*weirtype.Job{waiting, running} {
		got, err := ex.Cancel(context.Background(), now, j.ID)
		if err != nil || got.State != weirtype.StateCancelled || !got.FinalizedAt.Equal(now) || got.LeaseOwner != "" {
			t.Fatalf("cancel job %d: %+v, %v", j.ID, got, err)
		}
	}
	if _, err := ex.Complete(context.Background(), now, store.LeaseOf(running)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("complete of a cancelled job: %v, want ErrLeaseLost", err)
	}
	if _, err := ex.Cancel(context.Background(), now, waiting.ID); !errors.Is(err, store.ErrFinal) {
		t.Fatalf("second cancel: %v, want ErrFinal", err)
	}
	if _, err := ex.Cancel(context.Background(), now, 999999); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("cancel of a missing job: %v, want ErrNotFound", err)
	}
}

func testRescueExpired(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	retryable := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "r1", MaxAttempts: 3}, "w1")
	spent := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "r2", MaxAttempts: 1}, "w1")
	// A lease that ends exactly now has not expired.
	if rescued, dead, err := ex.RescueExpired(context.Background(), now.Add(lease), 100); err != nil || len(rescued)+len(dead) != 0 {
		t.Fatalf("rescue at the lease's end: %v %v %v, want nothing", rescued, dead, err)
	}
	at := now.Add(lease + time.Microsecond)
	rescued, dead, err := ex.RescueExpired(context.Background(), at, 100)
	if err != nil {
		t.Fatal(err)
	}
	// Each job comes with its kind and queue, so that the engine can
	// count and log it without reading it back.
	wantRescued, wantDead := []store.JobRef{{ID: retryable.ID, Kind: "k", Queue: "r1"}}, []store.JobRef{{ID: spent.ID, Kind: "k", Queue: "r2"}}
	if !slices.Equal(rescued, wantRescued) || !slices.Equal(dead, wantDead) {
		t.Fatalf("rescued %v dead %v, want %v and %v", rescued, dead, wantRescued, wantDead)
	}
	r := getJob(t, ex, retryable.ID)
	if r.State != weirtype.StateAvailable || r.Attempt != 1 || r.LeaseOwner != "" || len(r.Errors) != 1 ||
		r.Errors[0].Type != weirtype.ErrorTypeLeaseExpired || r.Errors[0].Attempt != 1 || !r.Errors[0].At.Equal(at) {
		t.Fatalf("rescued job %+v", *r)
	}
	d := getJob(t, ex, spent.ID)
	if d.State != weirtype.StateDead || !d.FinalizedAt.Equal(at) {
		t.Fatalf("spent job %+v", *d)
	}
	dls, err := ex.ListDeadLetters(context.Background(), store.DeadLetterFilter{Reason: weirtype.AbandonMaxAttempts})
	if err != nil || len(dls) != 1 || dls[0].JobID != spent.ID || dls[0].ErrorType != weirtype.ErrorTypeLeaseExpired {
		t.Fatalf("dead letters %+v, %v", dls, err)
	}
	if _, err := ex.Complete(context.Background(), at, store.LeaseOf(retryable)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the crashed worker completed a rescued job: %v", err)
	}
}

func testStaleAttempt(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	first := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "stale"}, "w1")
	// The lease runs out (the database was unreachable, say), the job is
	// rescued, and the same worker process claims it again.
	at := now.Add(lease + time.Second)
	if rescued, _, err := ex.RescueExpired(context.Background(), at, 10); err != nil || len(rescued) != 1 {
		t.Fatalf("rescue: %v, %v", rescued, err)
	}
	second := claim(t, ex, at, "stale", "w1", 1)
	if len(second) != 1 || second[0].Attempt != 2 {
		t.Fatalf("second claim %+v", second)
	}
	stale := store.LeaseOf(first)
	lost, err := ex.Heartbeat(context.Background(), at, []store.Lease{stale, store.LeaseOf(second[0])}, lease)
	if err != nil || !slices.Equal(lost, []int64{first.ID}) {
		t.Fatalf("heartbeat of the stale and the new attempt: lost %v, %v; want the stale one lost", lost, err)
	}
	if _, err := ex.Complete(context.Background(), at, stale); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the stale attempt completed the job: %v", err)
	}
	if _, err := ex.Fail(context.Background(), store.FailParams{Now: at, Lease: stale, Error: attemptErr(1, "late")}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the stale attempt failed the job: %v", err)
	}
	if _, err := ex.Snooze(context.Background(), at, stale, at.Add(time.Hour)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the stale attempt snoozed the job: %v", err)
	}
	if j, err := ex.Complete(context.Background(), at, store.LeaseOf(second[0])); err != nil || j.State != weirtype.StateCompleted {
		t.Fatalf("the current attempt could not complete: %+v, %v", j, err)
	}
}

func testReleaseOwned(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	a := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "ro1"}, "w1")
	b := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "ro2"}, "w1")
	c := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "ro3"}, "w2")
	released, err := ex.ReleaseOwned(context.Background(), now, "w1", true)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(released)
	if !slices.Equal(released, []int64{a.ID, b.ID}) {
		t.Fatalf("released %v, want %v", released, []int64{a.ID, b.ID})
	}
	for _, id := range released {
		j := getJob(t, ex, id)
		if j.State != weirtype.StateAvailable || j.Attempt != 0 || j.LeaseOwner != "" || len(j.Errors) != 1 || j.Errors[0].Type != weirtype.ErrorTypeReleased {
			t.Fatalf("released job %+v", *j)
		}
	}
	if j := getJob(t, ex, c.ID); j.State != weirtype.StateRunning || j.LeaseOwner != "w2" {
		t.Fatalf("w2's job was released: %+v", *j)
	}
	kept, err := ex.ReleaseOwned(context.Background(), now, "w2", false)
	if err != nil || !slices.Equal(kept, []int64{c.ID}) {
		t.Fatalf("release of w2: %v, %v", kept, err)
	}
	if j := getJob(t, ex, c.ID); j.Attempt != 1 || j.State != weirtype.StateAvailable {
		t.Fatalf("released without giving back: %+v", *j)
	}
}

// ReleaseOwnedExcept gives back the running jobs an owner holds but does
// not run (a claim whose reply it never received), keeping the leases it
// names: the attempt is given back, whatever attempt it was, and other
// owners' jobs, and an owner's job at another attempt than a kept lease's,
// are told apart.
func testReleaseOwnedExcept(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migratedExecutor(t, h)
	a := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "roe1"}, "w1")
	b := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "roe2"}, "w1")
	c := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "roe3", MaxAttempts: 1}, "w1") // its last attempt
	d := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "roe4"}, "w2")
	stale := store.LeaseOf(b)
	stale.Attempt++ // b at another attempt: not the lease w1 holds
	at := now.Add(time.Second)

	// A bad lease to keep, or no owner, is refused and changes nothing.
	for _, bad := range []struct {
		owner string
		keep  []store.Lease
	}{
		{"w1", []store.Lease{{ID: a.ID, Owner: "w1", Attempt: 0}}},
		{"w1", []store.Lease{{ID: a.ID, Attempt: 1}}},
		{"", nil},
	} {
		if ids, err := ex.ReleaseOwnedExcept(ctx, at, bad.owner, bad.keep); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("release by %q keeping %+v: %v, %v; want ErrInvalid", bad.owner, bad.keep, ids, err)
		}
	}
	if _, err := ex.ReleaseOwnedExcept(ctx, time.Time{}, "w1", nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("release at the zero time: %v, want ErrInvalid", err)
	}
	if j := getJob(t, ex, b.ID); j.State != weirtype.StateRunning {
		t.Fatalf("a refused release changed job %d: %+v", b.ID, *j)
	}

	released, err := ex.ReleaseOwnedExcept(ctx, at, "w1", []store.Lease{store.LeaseOf(a), stale, store.LeaseOf(d)})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{b.ID, c.ID}; !slices.Equal(released, want) {
		t.Fatalf("released %v, want %v (a kept, d another owner's)", released, want)
	}
	for _, id := range released {
		j := getJob(t, ex, id)
		if j.State != weirtype.StateAvailable || j.Attempt != 0 || j.LeaseOwner != "" || !j.LeaseExpiresAt.IsZero() ||
			!j.ScheduledAt.Equal(at) || len(j.Errors) != 1 || j.Errors[0].Type != weirtype.ErrorTypeReleased || j.Errors[0].Attempt != 1 {
			t.Fatalf("released job %+v, want it available at %v, its attempt given back, the release recorded", *j, at)
		}
	}
	if dls, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{}); err != nil || len(dls) != 0 {
		t.Fatalf("a given-back last attempt made dead letters: %+v, %v", dls, err)
	}
	if lost, err := ex.Heartbeat(ctx, at, []store.Lease{store.LeaseOf(a), store.LeaseOf(d)}, lease); err != nil || len(lost) != 0 {
		t.Fatalf("the kept leases: lost %v, %v", lost, err)
	}
	// The released jobs run again, at their first attempt.
	for _, j := range []*weirtype.Job{b, c} {
		again := claim(t, ex, at, j.Queue, "w3", 1)
		if len(again) != 1 || again[0].ID != j.ID || again[0].Attempt != 1 {
			t.Fatalf("claim after the release: %+v, want job %d at attempt 1", again, j.ID)
		}
	}
	// Keeping nothing releases all that the owner still holds.
	if released, err := ex.ReleaseOwnedExcept(ctx, at, "w1", nil); err != nil || !slices.Equal(released, []int64{a.ID}) {
		t.Fatalf("release keeping nothing: %v, %v; want [%d]", released, err, a.ID)
	}
	if j := getJob(t, ex, d.ID); j.State != weirtype.StateRunning || j.LeaseOwner != "w2" {
		t.Fatalf("w2's job was released: %+v", *j)
	}
}

func testDeadLetterOps(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	abandon := func(kind string, reason weirtype.AbandonReason, at time.Time) *weirtype.Job {
		j := claimOne(t, ex, store.InsertParams{Kind: kind, IdempotencyKey: fmt.Sprintf("%s-%s-%d", kind, reason, at.Unix())}, "w")
		if _, err := ex.Fail(context.Background(), store.FailParams{Now: at, Lease: store.LeaseOf(j), Error: attemptErr(1, "boom"), Abandon: reason}); err != nil {
			t.Fatal(err)
		}
		return j
	}
	a1 := abandon("a", weirtype.AbandonMaxAttempts, now.Add(1*time.Hour))
	a2 := abandon("a", weirtype.AbandonPermanent, now.Add(2*time.Hour))
	b1 := abandon("b", weirtype.AbandonDeadline, now.Add(3*time.Hour))

	list := func(f store.DeadLetterFilter) []int64 {
		t.Helper()
		dls, err := ex.ListDeadLetters(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]int64, len(dls))
		for i, d := range dls {
			out[i] = d.JobID
		}
		return out
	}
	checks := []struct {
		name string
		f    store.DeadLetterFilter
		want []int64
	}{
		{"all", store.DeadLetterFilter{}, []int64{a1.ID, a2.ID, b1.ID}},
		{"kind", store.DeadLetterFilter{Kind: "a"}, []int64{a1.ID, a2.ID}},
		{"reason", store.DeadLetterFilter{Reason: weirtype.AbandonDeadline}, []int64{b1.ID}},
		{"failed before", store.DeadLetterFilter{FailedBefore: now.Add(2 * time.Hour)}, []int64{a1.ID}},
		{"failed after", store.DeadLetterFilter{FailedAfter: now.Add(2 * time.Hour)}, []int64{a2.ID, b1.ID}},
		{"limit", store.DeadLetterFilter{Limit: 2}, []int64{a1.ID, a2.ID}},
	}
	for _, c := range checks {
		if got := list(c.f); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	all, _ := ex.ListDeadLetters(context.Background(), store.DeadLetterFilter{})
	if got := list(store.DeadLetterFilter{AfterID: all[0].ID}); !slices.Equal(got, []int64{a2.ID, b1.ID}) {
		t.Errorf("after id: %v", got)
	}
	if got := list(store.DeadLetterFilter{IDs: []int64{all[2].ID}}); !slices.Equal(got, []int64{b1.ID}) {
		t.Errorf("by ids: %v", got)
	}
	if n, err := ex.PurgeDeadLetters(context.Background(), store.DeadLetterFilter{IDs: []int64{}}); err != nil || n != 0 {
		t.Fatalf("purge of an empty selection: %d, %v; want nothing purged", n, err)
	}

	requeued, err := ex.RequeueDeadLetters(context.Background(), now.Add(4*time.Hour), store.DeadLetterFilter{Kind: "a"})
	slices.Sort(requeued)
	if err != nil || !slices.Equal(requeued, []int64{a1.ID, a2.ID}) {
		t.Fatalf("requeue: %v, %v", requeued, err)
	}
	for _, id := range requeued {
		j := getJob(t, ex, id)
		// The history is kept, with the requeue recorded after it.
		if j.State != weirtype.StateAvailable || j.Attempt != 0 || len(j.Errors) != 2 || j.Errors[1].Type != weirtype.ErrorTypeRequeued ||
			!j.ScheduledAt.Equal(now.Add(4*time.Hour)) || !j.FinalizedAt.IsZero() {
			t.Fatalf("requeued job %+v", *j)
		}
	}
	if got := list(store.DeadLetterFilter{}); !slices.Equal(got, []int64{b1.ID}) {
		t.Fatalf("after requeue the dead letters are %v, want only %d", got, b1.ID)
	}
	n, err := ex.PurgeDeadLetters(context.Background(), store.DeadLetterFilter{})
	if err != nil || n != 1 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	if _, err := ex.GetJob(context.Background(), b1.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the purged dead letter's job remains: %v", err)
	}
	if got := list(store.DeadLetterFilter{}); len(got) != 0 {
		t.Fatalf("dead letters after purge: %v", got)
	}
}

// A filter's JobID selects the dead letters of that job, for listing,
// requeueing and purging, alone or with the other fields; a negative one
// is ErrInvalid.
func testDeadLetterByJobID(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migratedExecutor(t, h)
	var jobs []*weirtype.Job
	for i := range 3 {
		j := claimOne(t, ex, store.InsertParams{Kind: "dj", Queue: fmt.Sprintf("dj-%d", i)}, "w")
		if _, err := ex.Fail(ctx, store.FailParams{Now: now, Lease: store.LeaseOf(j), Error: attemptErr(1, "boom"), Abandon: weirtype.AbandonPermanent}); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	list := func(f store.DeadLetterFilter) []int64 {
		t.Helper()
		dls, err := ex.ListDeadLetters(ctx, f)
		if err != nil {
			t.Fatalf("list %+v: %v", f, err)
		}
		var out []int64
		for _, d := range dls {
			out = append(out, d.JobID)
		}
		return out
	}
	a, b, c := jobs[0].ID, jobs[1].ID, jobs[2].ID
	for _, tc := range []struct {
		name string
		f    store.DeadLetterFilter
		want []int64
	}{
		{"job id", store.DeadLetterFilter{JobID: b}, []int64{b}},
		{"job id and kind", store.DeadLetterFilter{JobID: b, Kind: "dj"}, []int64{b}},
		{"job id and another kind", store.DeadLetterFilter{JobID: b, Kind: "other"}, nil},
		{"job id and another queue", store.DeadLetterFilter{JobID: b, Queue: "dj-0"}, nil},
		{"missing job", store.DeadLetterFilter{JobID: c + 1000}, nil},
	} {
		if got := list(tc.f); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{JobID: -1}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("list with job id -1: %v, want ErrInvalid", err)
	}
	if _, err := ex.PurgeDeadLetters(ctx, store.DeadLetterFilter{JobID: -1}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("purge with job id -1: %v, want ErrInvalid", err)
	}
	if got := list(store.DeadLetterFilter{}); !slices.Equal(got, []int64{a, b, c}) {
		t.Fatalf("a refused purge changed the dead letters: %v", got)
	}
	requeued, err := ex.RequeueDeadLetters(ctx, now, store.DeadLetterFilter{JobID: a})
	if err != nil || !slices.Equal(requeued, []int64{a}) {
		t.Fatalf("requeue by job id: %v, %v; want [%d]", requeued, err, a)
	}
	n, err := ex.PurgeDeadLetters(ctx, store.DeadLetterFilter{JobID: b})
	if err != nil || n != 1 {
		t.Fatalf("purge by job id: %d, %v; want 1", n, err)
	}
	if got := list(store.DeadLetterFilter{}); !slices.Equal(got, []int64{c}) {
		t.Fatalf("after requeueing %d and purging %d the dead letters are %v, want [%d]", a, b, got, c)
	}
	if j := getJob(t, ex, a); j.State != weirtype.StateAvailable {
		t.Fatalf("the requeued job is %s", j.State)
	}
	if _, err := ex.GetJob(ctx, b); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the purged job: %v, want ErrNotFound", err)
	}
}
