package fts_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/weirhq/weir/ingest/search"
	"github.com/weirhq/weir/ingest/search/fts"
)

func Example() {
	dir, err := os.MkdirTemp("", "weir-search")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	ix, err := fts.Open(ctx, fts.Config{Path: filepath.Join(dir, "search.db")})
	if err != nil {
		panic(err)
	}
	defer ix.Close()
	if ix.Rebuilt() {
		fmt.Println("reindex everything") // not for a new file
	}

	at := time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)
	err = ix.Put(ctx,
		search.Doc{ID: "a1", Title: "Disk full on the primary", Body: "The primary database ran out of disk; replicas lagged.",
			Source: "lists/ops.mbox#3", UpdatedAt: at},
		search.Doc{ID: "b2", Title: "Weekly notes", Body: "Planning, and a short note about the disk budget.",
			Source: "incoming/notes/week23.txt", UpdatedAt: at},
	)
	if err != nil {
		panic(err)
	}

	hits, err := ix.Search(ctx, "disk", 10)
	if err != nil {
		panic(err)
	}
	for _, h := range hits {
		fmt.Printf("%s %s: %s\n", h.ID, h.Source, h.Snippet)
	}

	hits, err = ix.Search(ctx, `"disk budget" (`, 10)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(hits), "hit for the phrase")

	entries, err := ix.Entries(ctx, "", 100)
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		fmt.Println(e.ID, e.UpdatedAt.Format(time.RFC3339Nano))
	}
	// Output:
	// a1 lists/ops.mbox#3: «Disk» full on the primary
	// b2 incoming/notes/week23.txt: Planning, and a short note about the «disk» budget.
	// 1 hit for the phrase
	// a1 2025-06-01T09:00:00Z
	// b2 2025-06-01T09:00:00Z
}
