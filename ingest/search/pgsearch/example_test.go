package pgsearch_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weirhq/weir/ingest/search"
	"github.com/weirhq/weir/ingest/search/pgsearch"
)

// A service keeps its search index in the schema of its store, on the
// store's pool; after a schema change it reindexes everything.
//
// This example needs a PostgreSQL server, which an example cannot skip
// when there is none, so it has no Output comment: go test compiles it but
// does not run it. TestExampleSteps runs the same steps against the real
// server and checks what they print.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := exampleSteps(ctx, pool, "weir"); err != nil {
		log.Fatal(err)
	}
}

func exampleSteps(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	ix, err := pgsearch.Open(ctx, pgsearch.Config{Pool: pool, Schema: schema})
	if err != nil {
		return err
	}
	defer ix.Close()
	if ix.Rebuilt() {
		fmt.Println("reindex everything") // not for a new schema
	}

	at := time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)
	err = ix.Put(ctx,
		search.Doc{ID: "a1", Title: "Disk full on the primary", Body: "The primary database ran out of disk; replicas lagged.",
			Source: "lists/ops.mbox#3", UpdatedAt: at},
		search.Doc{ID: "b2", Title: "Weekly notes", Body: "Planning, and a short note about the disk budget at café Zoë.",
			Source: "incoming/notes/week23.txt", UpdatedAt: at},
	)
	if err != nil {
		return err
	}
	for _, q := range []string{"disk", `"disk budget" (`, "cafe zoe"} {
		hits, err := ix.Search(ctx, q, 10)
		if err != nil {
			return err
		}
		for _, h := range hits {
			fmt.Printf("%s %s: %s\n", h.ID, h.Source, h.Snippet)
		}
	}
	entries, err := ix.Entries(ctx, "", 100)
	if err != nil {
		return err
	}
	for _, e := range entries {
		fmt.Println(e.ID, e.UpdatedAt.Format(time.RFC3339Nano))
	}
	return nil
}
