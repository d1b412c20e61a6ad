package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

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
