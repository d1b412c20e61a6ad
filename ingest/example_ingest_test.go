package ingest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/weirhq/weir/ingest"
)

// A program embeds the ingestion service: it opens it on a data
// directory, hands it a file, and searches once the file is indexed.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "weir-example-")
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "bees.md")
	_ = os.WriteFile(src, []byte("# Bees\n\nA hive of bees makes honey."), 0o644)

	svc, err := ingest.New(ctx, ingest.Config{DataDir: filepath.Join(dir, "data"), Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer svc.Stop(ctx)
	if err := svc.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	if _, _, err := svc.Pipeline().Ingest(ctx, "notes", []string{src}); err != nil {
		fmt.Println(err)
		return
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		hits, err := svc.Pipeline().Search(ctx, "honey", 5)
		if err == nil && len(hits) > 0 {
			fmt.Println(hits[0].Title, hits[0].Source)
			return
		}
	}
	fmt.Println("not indexed in time")
	// Output: Bees notes/bees.md
}
