package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/weirhq/weir/internal/tempstore"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/sqlite"
	"github.com/weirhq/weir/weirtype"
)

// Open a store, migrate it, and enqueue the same document twice: the
// idempotency key makes one job.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "weir-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "weir.db")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	if _, err := s.Migrate(ctx); err != nil {
		fmt.Println(err)
		return
	}

	job := store.InsertParams{
		Kind:           "extract",
		Payload:        []byte(`{"path":"incoming/P001/session.txt"}`),
		IdempotencyKey: weirtype.IdempotencyKey("incoming", "P001/session.txt", `"0x8DC1"`),
	}
	now := time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)
	first, err := s.Executor().Insert(ctx, now, []store.InsertParams{job})
	if err != nil {
		fmt.Println(err)
		return
	}
	second, err := s.Executor().Insert(ctx, now.Add(time.Minute), []store.InsertParams{job})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("first: ", first[0].Outcome)
	fmt.Println("second:", second[0].Outcome)
	fmt.Println("same job:", first[0].Job.ID == second[0].Job.ID)
	// Output:
	// first:  inserted
	// second: duplicate_pending
	// same job: true
}

// A worker claims a job and abandons it for good; an operator finds it
// among the dead letters and requeues it, its error history kept.
func Example_deadLetters() {
	ctx := context.Background()
	s := tempstore.MustOpen(ctx) // sqlite.Open and Migrate, in a temporary directory
	defer s.Close()
	ex := s.Executor()
	now := time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)
	if _, err := ex.Insert(ctx, now, []store.InsertParams{{Kind: "extract", Source: "incoming/P001/session.txt"}}); err != nil {
		fmt.Println(err)
		return
	}

	jobs, err := ex.Claim(ctx, store.ClaimParams{Now: now, Limit: 10, Owner: "worker-1", LeaseFor: 30 * time.Second})
	if err != nil || len(jobs) != 1 {
		fmt.Println(jobs, err)
		return
	}
	fmt.Println("claimed:", jobs[0].Kind, "attempt", jobs[0].Attempt, "held by", jobs[0].LeaseOwner)
	_, err = ex.Fail(ctx, store.FailParams{
		Now: now.Add(time.Second), Lease: store.LeaseOf(jobs[0]),
		Error:   weirtype.AttemptError{Attempt: 1, Message: "not UTF-8", Type: "*pipeline.DecodeError"},
		Abandon: weirtype.AbandonPermanent,
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	dls, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{Reason: weirtype.AbandonPermanent})
	if err != nil || len(dls) != 1 {
		fmt.Println(dls, err)
		return
	}
	fmt.Println("dead letter:", dls[0].Source, dls[0].Reason, dls[0].LastError)
	ids, err := ex.RequeueDeadLetters(ctx, now.Add(time.Hour), store.DeadLetterFilter{IDs: []int64{dls[0].ID}})
	if err != nil {
		fmt.Println(err)
		return
	}
	job, err := ex.GetJob(ctx, ids[0])
	if err != nil {
		fmt.Println(err)
		return
	}
	last := job.Errors[len(job.Errors)-1]
	fmt.Println("requeued:", job.State, "attempt", job.Attempt, "errors", len(job.Errors), "last", last.Type)
	// Output:
	// claimed: extract attempt 1 held by worker-1
	// dead letter: incoming/P001/session.txt non_retryable not UTF-8
	// requeued: available attempt 0 errors 2 last requeued
}
