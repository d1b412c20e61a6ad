package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/pipeline"
)

// With an events topic, each saved document and each failure adds one
// event to the outbox, in the transaction that saves or fails it; without
// one, none.
func TestEventsGoToTheOutbox(t *testing.T) {
	const topic = "weir.documents"
	h := newHarness(t, func(c *pipeline.Config) { c.EventsTopic = topic })
	drop(t, h.dir, "notes/a.txt", []byte("The hive swarmed in May."))
	drop(t, h.dir, "notes/b.md", []byte("# Bread\n\nThe levain rose overnight."))
	drop(t, h.dir, "notes/bad.txt", []byte("\x00\x00"))
	h.start()
	ctx := context.Background()
	type row struct{ typ, path, key string }
	read := func() []row {
		rows, err := h.db.SQL.QueryContext(ctx, `SELECT payload, key FROM weir_outbox WHERE topic = $1 ORDER BY id`, topic)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []row
		for rows.Next() {
			var (
				payload []byte
				key     string
				e       pipeline.Event
			)
			if err := rows.Scan(&payload, &key); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(payload, &e); err != nil {
				t.Fatal(err)
			}
			if key != e.Document || e.File == "" || e.At.IsZero() {
				t.Fatalf("event %+v under key %q: want the document's id as its key, a file and a time", e, key)
			}
			out = append(out, row{e.Type, e.Path, e.Key})
		}
		return out
	}
	waitFor(t, "three events", 10*time.Second, func() (bool, string) {
		got := read()
		return len(got) == 3, fmt.Sprint(got)
	})
	got := read()
	slices.SortFunc(got, func(a, b row) int { return strings.Compare(a.path, b.path) })
	want := []row{{pipeline.EventSaved, "notes/a.txt", ""}, {pipeline.EventSaved, "notes/b.md", ""}, {pipeline.EventFailed, "notes/bad.txt", ""}}
	if !slices.Equal(got, want) {
		t.Fatalf("events %+v, want %+v", got, want)
	}
	// A sweep finding the failure written already tells of it no more.
	if err := h.svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(read()); n != 3 {
		t.Fatalf("%d events after another sweep, want still 3", n)
	}
}
