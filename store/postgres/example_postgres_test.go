package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/postgres"
)

// A program saves a document and enqueues the job that indexes it in one
// transaction: both commit, or neither does. The idempotency key makes a
// second enqueue of the same document find the first job.
//
// This example needs a PostgreSQL server, which an example cannot skip
// when there is none, so it has no Output comment: go test compiles it but
// does not run it. TestConformance runs the same steps (its
// InsertInCallersTransaction case) against the real server.
func Example() {
	ctx := context.Background()
	s, err := postgres.Open(ctx, postgres.Config{
		URL:    "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
		Schema: "weir",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx) // a no-op after Commit
	if _, err := tx.Exec(ctx, "INSERT INTO documents (id, body) VALUES ($1, $2)", "doc-1", "…"); err != nil {
		log.Fatal(err)
	}
	res, err := s.Tx(tx).Insert(ctx, time.Now(), []store.InsertParams{{
		Kind:           "index",
		Payload:        json.RawMessage(`{"doc":"doc-1"}`),
		IdempotencyKey: "index/doc-1",
	}})
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(res[0].Outcome, res[0].Job.ID)
}
