package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/postgres"
	"github.com/weirhq/weir/weirtype"
)

// wakeWithin is how long a test waits for a wake. PostgreSQL delivers a
// notification as the transaction commits; a second is ample.
const wakeWithin = time.Second

// listen runs s.Listen until the test ends, and returns the queues it
// wakes, in order. It returns once Listen is ready, and checks at the end
// that Listen returned the context's error.
func listen(t *testing.T, s *postgres.Store) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	woken := make(chan string, 100)
	ready := make(chan struct{})
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = s.Listen(ctx, func() { close(ready) }, func(queue string) { woken <- queue })
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Listen returned %v, want context.Canceled", err)
		}
	})
	select {
	case <-ready:
	case <-done:
		t.Fatalf("Listen returned before it was ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Listen was not ready after 10s")
	}
	return woken
}

// nextWake returns the next queue woken, failing the test when none comes
// within wakeWithin.
func nextWake(t *testing.T, woken <-chan string) string {
	t.Helper()
	select {
	case q := <-woken:
		return q
	case <-time.After(wakeWithin):
		t.Fatalf("no wake within %v", wakeWithin)
		return ""
	}
}

// wantWake fails the test unless the next wake is of queue: whatever was
// announced before it would come first.
func wantWake(t *testing.T, woken <-chan string, queue string) {
	t.Helper()
	if got := nextWake(t, woken); got != queue {
		t.Fatalf("woken for %q, want %q", got, queue)
	}
}

// wakesUntil returns the wakes before the one of queue end, which it
// consumes: an insert into end marks where the writes under test stop.
func wakesUntil(t *testing.T, woken <-chan string, end string) []string {
	t.Helper()
	var got []string
	for {
		q := nextWake(t, woken)
		if q == end {
			return got
		}
		got = append(got, q)
	}
}

func TestListenWakesOnInsert(t *testing.T) {
	t.Parallel()
	s := migrated(t)
	woken := listen(t, s)
	errc := make(chan error, 1)
	go func() {
		_, err := s.Executor().Insert(context.Background(), now, []store.InsertParams{{Kind: "k", Queue: "mail"}})
		errc <- err
	}()
	wantWake(t, woken, "mail")
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if f := s.Features(); !f.Notify {
		t.Fatalf("Features %+v: Notify is false", f)
	}
}

// An insert in a caller's transaction wakes when the transaction commits,
// and never when it rolls back.
func TestListenWakesAtCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migrated(t)
	woken := listen(t, s)

	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	insert(t, s.Tx(tx), store.InsertParams{Kind: "k", Queue: "rolled-back"})
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err = s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	insert(t, s.Tx(tx), store.InsertParams{Kind: "k", Queue: "committed"})
	insert(t, s.Executor(), store.InsertParams{Kind: "k", Queue: "outside"})
	// The transaction that committed first is announced first; the one
	// rolled back never is.
	wantWake(t, woken, "outside")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wantWake(t, woken, "committed")
}

func TestListenIgnoresOtherSchemas(t *testing.T) {
	t.Parallel()
	a, b := migrated(t), migrated(t)
	if a.NotifyChannel() == b.NotifyChannel() {
		t.Fatalf("schemas %s and %s share channel %s", a.Schema(), b.Schema(), a.NotifyChannel())
	}
	woken := listen(t, a)
	insert(t, b.Executor(), store.InsertParams{Kind: "k", Queue: "of-b"})
	insert(t, a.Executor(), store.InsertParams{Kind: "k", Queue: "of-a"})
	wantWake(t, woken, "of-a")
}

// A batch announces each queue it made a job available in once, however
// many jobs it inserts, and none for a job it scheduled or a duplicate.
func TestListenWakesOncePerQueue(t *testing.T) {
	t.Parallel()
	s := migrated(t)
	woken := listen(t, s)
	const n = 10000
	batch := make([]store.InsertParams, 0, n+1)
	for i := range n {
		p := store.InsertParams{Kind: "k", Queue: fmt.Sprintf("q%d", i%2)}
		if i%3 == 0 {
			p.IdempotencyKey = fmt.Sprintf("key-%d", i)
		}
		batch = append(batch, p)
	}
	batch = append(batch, store.InsertParams{Kind: "k", Queue: "later", ScheduledAt: now.Add(time.Hour)})
	if _, err := s.Executor().Insert(context.Background(), now, batch); err != nil {
		t.Fatal(err)
	}
	insert(t, s.Executor(), store.InsertParams{Kind: "k", Queue: "end"})
	got := wakesUntil(t, woken, "end")
	if len(got) != 2 || !(got[0] == "q0" && got[1] == "q1" || got[0] == "q1" && got[1] == "q0") {
		t.Fatalf("wakes %v, want q0 and q1 once each", got)
	}
}

// A reclaim makes the job it finds available in that job's queue, which
// is the one announced.
func TestListenWakesOnReclaim(t *testing.T) {
	t.Parallel()
	s := migrated(t)
	first := insertAt(t, s.Executor(), now.Add(-time.Hour), store.InsertParams{Kind: "k", Queue: "old", IdempotencyKey: "stuck"})
	setState(t, s, first.Job.ID, weirtype.StateRunning, now.Add(-time.Hour))
	woken := listen(t, s)
	r := insert(t, s.Executor(), store.InsertParams{Kind: "k", Queue: "new", IdempotencyKey: "stuck", ScheduledAt: now.Add(time.Hour)})
	if r.Outcome != weirtype.Reclaimed {
		t.Fatalf("outcome %s, want reclaimed", r.Outcome)
	}
	wantWake(t, woken, "old")
}

// The writes after an insert that make a job available announce its queue
// too: an immediate retry, a rescue, a release (of all an owner holds, or
// of those it does not run) and a requeue. A retry later does not.
func TestListenWakesOnLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migrated(t)
	ex := s.Executor()
	for _, q := range []string{"retry", "later", "rescue", "release", "requeue", "lost"} {
		insert(t, ex, store.InsertParams{Kind: "k", Queue: q})
	}
	lease := map[string]store.Lease{}
	for _, q := range []string{"retry", "later", "requeue", "release"} {
		lease[q] = store.LeaseOf(claimAt(t, ex, now, q, "w1", 1, time.Hour)[0])
	}
	claimAt(t, ex, now, "rescue", "w2", 1, time.Minute)
	claimAt(t, ex, now, "lost", "w3", 1, time.Hour)
	woken := listen(t, s)

	if _, err := ex.Fail(ctx, store.FailParams{Now: now, Lease: lease["later"], Error: weirtype.AttemptError{Attempt: 1, At: now, Message: "x"}, RetryAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.Fail(ctx, store.FailParams{Now: now, Lease: lease["retry"], Error: weirtype.AttemptError{Attempt: 1, At: now, Message: "x"}}); err != nil {
		t.Fatal(err)
	}
	wantWake(t, woken, "retry")
	if _, _, err := ex.RescueExpired(ctx, now.Add(2*time.Minute), 10); err != nil {
		t.Fatal(err)
	}
	wantWake(t, woken, "rescue")
	if _, err := ex.Fail(ctx, store.FailParams{Now: now, Lease: lease["requeue"], Error: weirtype.AttemptError{Attempt: 1, At: now, Message: "x"}, Abandon: weirtype.AbandonPermanent}); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.RequeueDeadLetters(ctx, now, store.DeadLetterFilter{Queue: "requeue"}); err != nil {
		t.Fatal(err)
	}
	wantWake(t, woken, "requeue")
	if _, err := ex.ReleaseOwned(ctx, now, "w1", true); err != nil {
		t.Fatal(err)
	}
	wantWake(t, woken, "release")
	if _, err := ex.ReleaseOwnedExcept(ctx, now, "w3", nil); err != nil {
		t.Fatal(err)
	}
	wantWake(t, woken, "lost")
}

// A queue too long for a notification's payload is not announced, and
// its jobs are inserted, retried and released all the same.
func TestLongQueueNameIsNotAnnounced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migrated(t)
	woken := listen(t, s)
	long := strings.Repeat("q", 8000)
	ex := s.Executor()
	insert(t, ex, store.InsertParams{Kind: "k", Queue: long})
	insert(t, ex, store.InsertParams{Kind: "k", Queue: long, IdempotencyKey: "long"})
	j := claimAt(t, ex, now, long, "w1", 1, time.Hour)[0]
	if _, err := ex.Fail(ctx, store.FailParams{Now: now, Lease: store.LeaseOf(j), Error: weirtype.AttemptError{Attempt: 1, At: now, Message: "x"}}); err != nil {
		t.Fatal(err)
	}
	claimAt(t, ex, now, long, "w1", 2, time.Hour)
	if _, err := ex.ReleaseOwned(ctx, now, "w1", false); err != nil {
		t.Fatal(err)
	}
	insert(t, ex, store.InsertParams{Kind: "k", Queue: "end"})
	if got := wakesUntil(t, woken, "end"); len(got) != 0 {
		t.Fatalf("%d wakes for a queue too long to announce", len(got))
	}
}
