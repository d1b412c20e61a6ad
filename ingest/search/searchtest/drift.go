package searchtest

import (
	"context"
	"fmt"
	"time"

	"github.com/weirhq/weir/ingest/search"
)

// Drift is what MakeDrift did to an index.
type Drift struct {
	// Missing are the ids deleted, Stale those rewritten older, and Stray
	// the id of the document added that no source holds.
	Missing, Stale []string
	Stray          string
}

// MakeDrift damages ix as a crash or a lost write would, for a
// reconciliation to repair: of its entries in id order it deletes the
// first missing, rewrites the next stale with the body "an older text"
// and an updated time an hour older, and adds a document with the id
// stray whose body holds the word stray. It fails when ix holds fewer
// than missing+stale entries.
func MakeDrift(ctx context.Context, ix search.Index, missing, stale int, stray string) (Drift, error) {
	es, err := ix.Entries(ctx, "", missing+stale)
	if err != nil {
		return Drift{}, err
	}
	if len(es) < missing+stale {
		return Drift{}, fmt.Errorf("searchtest: the index holds %d entries, fewer than %d missing and %d stale", len(es), missing, stale)
	}
	d := Drift{Stray: stray}
	for _, e := range es[:missing] {
		d.Missing = append(d.Missing, e.ID)
	}
	if n, err := ix.Delete(ctx, d.Missing...); err != nil || n != missing {
		return d, fmt.Errorf("searchtest: delete %d entries: %d deleted, %v", missing, n, err)
	}
	for _, e := range es[missing:] {
		doc, err := ix.Get(ctx, e.ID)
		if err != nil {
			return d, err
		}
		doc.Body, doc.UpdatedAt = "an older text", doc.UpdatedAt.Add(-time.Hour)
		if err := ix.Put(ctx, doc); err != nil {
			return d, err
		}
		d.Stale = append(d.Stale, e.ID)
	}
	err = ix.Put(ctx, search.Doc{ID: stray, Title: "Stray", Body: "a stray document no source holds", Source: "nowhere", UpdatedAt: time.Now()})
	return d, err
}
