package deadletter_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/deadletter"
	"github.com/weirhq/weir/internal/tempstore"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// abandon inserts a job at at and abandons it at once, as a worker would on
// a non-retryable error, making one dead letter.
func abandon(ctx context.Context, ex store.Executor, at time.Time, source string) error {
	if _, err := ex.Insert(ctx, at, []store.InsertParams{{Kind: "extract", Source: source, Payload: []byte(`{"path":"` + source + `"}`)}}); err != nil {
		return err
	}
	jobs, err := ex.Claim(ctx, store.ClaimParams{Now: at, Limit: 1, Owner: "worker-1", LeaseFor: time.Minute})
	if err != nil {
		return err
	}
	_, err = ex.Fail(ctx, store.FailParams{
		Now: at, Lease: store.LeaseOf(jobs[0]), Abandon: weirtype.AbandonPermanent,
		Error: weirtype.AttemptError{Attempt: 1, At: at, Message: "not UTF-8", Type: "*pipeline.DecodeError"},
	})
	return err
}

// Export the dead letters as JSON Lines, then enforce the retention
// policy: the letter older than seven days is archived to a file and only
// then purged; the recent one stays.
func Example() {
	ctx := context.Background()
	s := tempstore.MustOpen(ctx) // sqlite.Open and Migrate, in a temporary directory
	defer s.Close()
	ex := s.Executor()
	now := time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)
	if err := abandon(ctx, ex, now.Add(-8*24*time.Hour), "incoming/P001.txt"); err != nil {
		fmt.Println(err)
		return
	}
	if err := abandon(ctx, ex, now.Add(-time.Hour), "incoming/P002.txt"); err != nil {
		fmt.Println(err)
		return
	}

	n, err := deadletter.Export(ctx, ex, store.DeadLetterFilter{Limit: 1}, os.Stdout)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("exported:", n)

	archives := filepath.Join(s.Dir, "archive")
	if err := os.Mkdir(archives, 0o700); err != nil {
		fmt.Println(err)
		return
	}
	ret := deadletter.Retention{ArchiveDir: archives, Clock: clock.NewFake(now)} // 7 days, 10,000
	res, err := ret.Enforce(ctx, ex)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("archived:", res.Archived, "purged:", res.Purged, "to", filepath.Base(res.File))
	left, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("left:", len(left), left[0].Source)
	// Output:
	// {"id":1,"job_id":1,"kind":"extract","queue":"default","source":"incoming/P001.txt","idempotency_key":"","original_event":{"path":"incoming/P001.txt"},"attempt_count":1,"last_error":"not UTF-8","error_type":"*pipeline.DecodeError","abandoned_reason":"non_retryable","error_history":[{"attempt":1,"at":"2026-01-13T15:30:00Z","message":"not UTF-8","type":"*pipeline.DecodeError"}],"job_created_at":"2026-01-13T15:30:00Z","failed_at":"2026-01-13T15:30:00Z","timestamp":"2026-01-13T15:30:00Z"}
	// exported: 1
	// archived: 1 purged: 1 to dead-letters-20260121T153000.000000Z.jsonl
	// left: 1 incoming/P002.txt
}
