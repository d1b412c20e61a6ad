package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"

	"github.com/weirhq/weir/internal/tempstore"
	"github.com/weirhq/weir/ledger"
	"github.com/weirhq/weir/store"
)

// An upload through the ledger happens once per key, however often the
// step that makes it runs. The first try lands but its reply is lost:
// the retry asks the effect's Check, finds the blob, and records it
// without uploading again; a third run returns the recorded result.
func Example() {
	ctx := context.Background()
	s := tempstore.MustOpen(ctx) // sqlite.Open and Migrate, in a temporary directory
	defer s.Close()
	l := ledger.New(s.Executor(), nil, slog.New(slog.DiscardHandler))

	blobs := map[string]bool{} // the blob store
	uploads := 0
	const path = "docs/P001/page-1.txt"
	upload := ledger.Effect{
		Run: func(context.Context) (string, error) {
			uploads++
			blobs[path] = true
			if uploads == 1 {
				return "", errors.New("upload: reply lost (the blob was written)")
			}
			return path, nil
		},
		Check: func(context.Context) (string, bool, error) {
			return path, blobs[path], nil
		},
	}
	k := store.EffectKey{Txn: "P001", Series: "page", Ordinal: 1}
	for run := 1; run <= 3; run++ {
		result, err := l.Do(ctx, k, upload)
		fmt.Printf("run %d: %q, err: %v\n", run, result, err)
	}
	counts, err := l.Count(ctx, "P001")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("uploads:", uploads, "pages done:", counts["page"])
	// Output:
	// run 1: "", err: ledger: effect P001/page/1: upload: reply lost (the blob was written)
	// run 2: "docs/P001/page-1.txt", err: <nil>
	// run 3: "docs/P001/page-1.txt", err: <nil>
	// uploads: 1 pages done: 1
}
