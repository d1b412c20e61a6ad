package searchtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/search"
)

func testPutGet(t *testing.T, h Harness) {
	ix := h.Open(t)
	ctx := context.Background()
	at := time.Date(2025, 3, 1, 12, 30, 0, 123456789, time.FixedZone("CET", 3600))
	d := search.Doc{
		ID: "a1", Title: "Release <notes> & plans", Body: "The body, with 'quotes', \"double quotes\", \\backslashes\\ and ünïcödé.",
		Summary: "Lead.", Source: "incoming/notes/a.txt", Language: "en",
		Terms:     []string{"release", "<b>plans</b>", "café, au lait", `"quoted"`},
		UpdatedAt: at,
	}
	put(t, ix, d)
	got, err := ix.Get(ctx, "a1")
	if err != nil {
		t.Fatal(err)
	}
	want := d
	want.UpdatedAt = at.Truncate(time.Microsecond).UTC()
	if !docsEqual(got, want) {
		t.Fatalf("Get = %+v, want %+v", got, want)
	}
	if got.UpdatedAt.Location() != time.UTC || got.UpdatedAt.Nanosecond() != 123456000 {
		t.Errorf("UpdatedAt = %v, want UTC to the microsecond", got.UpdatedAt)
	}
	if _, err := ix.Get(ctx, "missing"); !errors.Is(err, search.ErrNotFound) {
		t.Errorf("Get of a missing id: %v, want ErrNotFound", err)
	}
	// Times far from now, to the microsecond, either side of the epoch.
	for i, at := range []time.Time{time.UnixMicro(-1), time.UnixMicro(1), time.Date(-4000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(200000, 1, 1, 0, 0, 0, 1000, time.UTC)} {
		id := fmt.Sprintf("t%d", i)
		put(t, ix, search.Doc{ID: id, UpdatedAt: at})
		got, err := ix.Get(ctx, id)
		if err != nil || !got.UpdatedAt.Equal(at) {
			t.Errorf("updated at %v: Get = %v, %v", at, got.UpdatedAt, err)
		}
	}
}

// Terms nil or empty come back nil, with the zero time.
func testZeroTimeNoTerms(t *testing.T, h Harness) {
	ix := h.Open(t)
	put(t, ix, search.Doc{ID: "y", Body: "text"}, search.Doc{ID: "z", Body: "text", Terms: []string{}})
	for _, id := range []string{"y", "z"} {
		got, err := ix.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if !got.UpdatedAt.IsZero() || got.Terms != nil {
			t.Errorf("Get = %+v, want the zero UpdatedAt and nil Terms", got)
		}
	}
	es, err := ix.Entries(context.Background(), "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].ID != "y" || es[1].ID != "z" || !es[0].UpdatedAt.IsZero() || !es[1].UpdatedAt.IsZero() {
		t.Errorf("Entries = %v, want y and z with the zero time", es)
	}
}

func testPutInvalid(t *testing.T, h Harness) {
	ix := h.Open(t)
	ctx := context.Background()
	err := ix.Put(ctx, search.Doc{ID: "ok", Body: "fine"}, search.Doc{Body: "no id"})
	if !errors.Is(err, search.ErrInvalid) {
		t.Fatalf("Put with an empty id: %v, want ErrInvalid", err)
	}
	if !strings.Contains(err.Error(), "document 1") {
		t.Errorf("error %q does not name the document", err)
	}
	far := search.Doc{ID: "far", UpdatedAt: time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if err := ix.Put(ctx, search.Doc{ID: "ok2"}, far); !errors.Is(err, search.ErrInvalid) {
		t.Errorf("Put with updated at year 300000: %v, want ErrInvalid", err)
	}
	if n := count(t, ix); n != 0 {
		t.Errorf("Count = %d after failed Puts, want 0", n)
	}
	if err := ix.Put(ctx); err != nil {
		t.Errorf("Put() = %v, want nil", err)
	}
}

func testRepeatedID(t *testing.T, h Harness) {
	ix := h.Open(t)
	put(t, ix, search.Doc{ID: "x", Title: "first"}, search.Doc{ID: "y", Title: "other"},
		search.Doc{ID: "x", Title: "second"}, search.Doc{ID: "x", Title: "third"})
	got, err := ix.Get(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if got.Title != "third" || count(t, ix) != 2 {
		t.Errorf("Get = %q with %d docs, want title third and 2 docs", got.Title, count(t, ix))
	}
	for _, q := range []string{"first", "second"} {
		finds(t, ix, q, nil)
	}
	finds(t, ix, "third", []string{"x"})
}

func testReplace(t *testing.T, h Harness) {
	ix := h.Open(t)
	ctx := context.Background()
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	put(t, ix, search.Doc{ID: "a1", Title: "Release plans", Body: "Shipping the spring release.", Terms: []string{"roadmap"}, UpdatedAt: at})
	d2 := search.Doc{ID: "a1", Title: "Budget", Body: "Numbers only.", UpdatedAt: at.Add(time.Hour)}
	put(t, ix, d2)
	got, err := ix.Get(ctx, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if !docsEqual(got, d2) {
		t.Fatalf("Get after replace = %+v, want %+v", got, d2)
	}
	for _, q := range []string{"release", "shipping", "roadmap"} {
		finds(t, ix, q, nil)
	}
	finds(t, ix, "budget numbers", []string{"a1"})
	if n := count(t, ix); n != 1 {
		t.Errorf("Count = %d after a replace, want 1", n)
	}
	es, err := ix.Entries(ctx, "", 10)
	if err != nil || len(es) != 1 || !es[0].UpdatedAt.Equal(d2.UpdatedAt) {
		t.Errorf("Entries = %v, %v; want a1 at %v", es, err, d2.UpdatedAt)
	}
}

// A Put that changes only updated_at and the stored fields leaves the
// text as it was (an index may skip indexing it again): the document must
// stay searchable, and its hit and entry must move.
func testOnlyUpdatedAt(t *testing.T, h Harness) {
	ix := h.Open(t)
	d := search.Doc{ID: "u", Title: "Kernel", Body: "scheduler latency", UpdatedAt: time.UnixMicro(1000)}
	put(t, ix, d)
	d.UpdatedAt = time.UnixMicro(2000)
	d.Summary, d.Source = "changed summary", "moved/source.txt"
	put(t, ix, d)
	hs := hits(t, ix, "scheduler kernel")
	if len(hs) != 1 || hs[0].ID != "u" {
		t.Fatalf("hits %+v, want u", hs)
	}
	if hs[0].Summary != "changed summary" || hs[0].Source != "moved/source.txt" || !hs[0].UpdatedAt.Equal(time.UnixMicro(2000)) {
		t.Errorf("hit %+v, want the new summary, source and updated at", hs[0])
	}
	es, err := ix.Entries(context.Background(), "", 10)
	if err != nil || len(es) != 1 || !es[0].UpdatedAt.Equal(time.UnixMicro(2000)) {
		t.Errorf("Entries = %v, %v; want u at 2000 µs", es, err)
	}
}

func testDelete(t *testing.T, h Harness) {
	ix := h.Open(t)
	ctx := context.Background()
	put(t, ix, search.Doc{ID: "a", Title: "Budget", Body: "numbers"}, search.Doc{ID: "b", Title: "Budget", Body: "more numbers"})
	n, err := ix.Delete(ctx, "a", "missing", "a")
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("Delete(a, missing, a) = %d, want 1", n)
	}
	if _, err := ix.Get(ctx, "a"); !errors.Is(err, search.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	finds(t, ix, "budget", []string{"b"})
	es, err := ix.Entries(ctx, "", 10)
	if err != nil || len(es) != 1 || es[0].ID != "b" {
		t.Errorf("Entries after Delete = %v, %v; want [b]", es, err)
	}
	if n, err := ix.Delete(ctx); n != 0 || err != nil {
		t.Errorf("Delete() = %d, %v; want 0, nil", n, err)
	}
	if n, err := ix.Delete(ctx, "b", ""); n != 1 || err != nil {
		t.Errorf("Delete(b, \"\") = %d, %v; want 1, nil", n, err)
	}
	if n := count(t, ix); n != 0 {
		t.Errorf("Count = %d, want 0", n)
	}
	finds(t, ix, "budget", nil)
}

func testEntries(t *testing.T, h Harness) {
	ix := h.Open(t)
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[string]time.Time{}
	var docs []search.Doc
	for range 257 {
		id := fmt.Sprintf("%016x", rng.Uint64())
		at := time.UnixMicro(rng.Int64N(1 << 50)).UTC()
		want[id] = at
		docs = append(docs, search.Doc{ID: id, Body: "x", UpdatedAt: at})
	}
	// Ids in byte order, not as a human (or a collation) would sort
	// them: upper case before lower, control characters first,
	// multi-byte last.
	for _, id := range []string{"A", "a", "Z", "é", "e", "\x01", "a b", "a-b", "ab", "日本", "😀"} {
		want[id] = time.Time{}
		docs = append(docs, search.Doc{ID: id, Body: "x"})
	}
	put(t, ix, docs...)

	for _, page := range []int{1, 7, 100, search.MaxLimit} {
		var got []string
		after := ""
		for {
			es, err := ix.Entries(context.Background(), after, page)
			if err != nil {
				t.Fatal(err)
			}
			if es == nil {
				t.Fatal("Entries returned nil, want an empty slice at the end")
			}
			if len(es) > page {
				t.Fatalf("page of %d entries, limit %d", len(es), page)
			}
			for _, e := range es {
				if at, ok := want[e.ID]; !ok || !at.Equal(e.UpdatedAt) {
					t.Fatalf("entry %q at %v: want %v (known %v)", e.ID, e.UpdatedAt, at, ok)
				}
				got = append(got, e.ID)
			}
			if len(es) < page {
				break
			}
			after = es[len(es)-1].ID
		}
		if len(got) != len(want) {
			t.Errorf("page %d: %d entries, want %d", page, len(got), len(want))
		}
		if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Errorf("page %d: entries not strictly in byte order: %q", page, got)
		}
	}
	// after need not be an id of the index.
	es, err := ix.Entries(context.Background(), "Zz", 3)
	if err != nil || len(es) != 3 || es[0].ID != "a" || es[1].ID != "a b" || es[2].ID != "a-b" {
		t.Errorf(`Entries after "Zz" = %v, %v; want [a, a b, a-b]`, es, err)
	}
	es, err = ix.Entries(context.Background(), "\U0010FFFF", 3)
	if err != nil || len(es) != 0 {
		t.Errorf("Entries after the last rune = %v, %v; want none", es, err)
	}
}

func testCount(t *testing.T, h Harness) {
	ix := h.Open(t)
	if n := count(t, ix); n != 0 {
		t.Fatalf("Count of a new index = %d", n)
	}
	put(t, ix, search.Doc{ID: "a"}, search.Doc{ID: "b"}, search.Doc{ID: "c"})
	put(t, ix, search.Doc{ID: "a", Title: "again"})
	if n := count(t, ix); n != 3 {
		t.Errorf("Count = %d, want 3", n)
	}
	if _, err := ix.Delete(context.Background(), "b"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, ix); n != 2 {
		t.Errorf("Count after a Delete = %d, want 2", n)
	}
}

func testBadText(t *testing.T, h Harness) {
	ix := h.Open(t)
	ctx := context.Background()
	put(t, ix, search.Doc{ID: "fine", Body: "fine text"})
	for _, d := range []search.Doc{
		{ID: "nul-body", Title: "NUL", Body: "before\x00after"},
		{ID: "bad-title", Title: "caf\xe9", Body: "Latin-1"},
		{ID: "bad-term", Body: "text", Terms: []string{"ok", "\xff\xfe"}},
		{ID: "nul\x00id", Body: "text"},
	} {
		err := ix.Put(ctx, search.Doc{ID: "with-it", Body: "stored with it"}, d)
		if !h.Features.StoresAnyText {
			if !errors.Is(err, search.ErrInvalid) {
				t.Errorf("Put of %q: %v, want ErrInvalid (Features.StoresAnyText is false)", d.ID, err)
			} else if !strings.Contains(err.Error(), fmt.Sprintf("%q", d.ID)) {
				t.Errorf("Put of %q: error %q does not name the document", d.ID, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Put of %q: %v", d.ID, err)
			continue
		}
		want := d
		if h.Features.KeyTermsReplaceInvalidUTF8 {
			want.Terms = nil
			for _, term := range d.Terms {
				want.Terms = append(want.Terms, string([]rune(term)))
			}
		}
		got, err := ix.Get(ctx, d.ID)
		if err != nil || !docsEqual(got, want) {
			t.Errorf("Get(%q) = %+v, %v; want %+v", d.ID, got, err, want)
		}
	}
	if !h.Features.StoresAnyText {
		if n := count(t, ix); n != 1 {
			t.Errorf("Count = %d after refused Puts, want 1", n)
		}
		if _, err := ix.Get(ctx, "nul\x00id"); !errors.Is(err, search.ErrNotFound) {
			t.Errorf("Get of an id with NUL: %v, want ErrNotFound", err)
		}
		if n, err := ix.Delete(ctx, "nul\x00id", "\xff"); n != 0 || err != nil {
			t.Errorf("Delete of ids with NUL and invalid UTF-8 = %d, %v; want 0, nil", n, err)
		}
	}
	// Queries with such bytes are read as spaces, whatever the index.
	if got := ids(t, ix, "fine\x00text\xff"); !slices.Contains(got, "fine") {
		t.Errorf("query with NUL and invalid UTF-8: hits %v, want fine among them", got)
	}
}

func testConcurrent(t *testing.T, h Harness) {
	ix := h.Open(t)
	ctx := context.Background()
	const writers, readers, rounds = 4, 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers+readers)
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				id := fmt.Sprintf("w%d-%03d", w, r)
				if err := ix.Put(ctx, search.Doc{ID: id, Title: "shared topic", Body: fmt.Sprintf("writer w%dr%d round", w, r)}); err != nil {
					errs <- err
					return
				}
				if r%2 == 1 { // every other one is deleted again
					if n, err := ix.Delete(ctx, id); err != nil || n != 1 {
						errs <- fmt.Errorf("delete %s = %d, %v", id, n, err)
						return
					}
				}
			}
		})
	}
	for range readers {
		wg.Go(func() {
			for range rounds {
				if _, err := ix.Search(ctx, "shared topic", 50); err != nil {
					errs <- err
					return
				}
				if _, err := ix.Entries(ctx, "", 50); err != nil {
					errs <- err
					return
				}
				if _, err := ix.Count(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	kept := writers * ((rounds + 1) / 2)
	if n := count(t, ix); n != kept {
		t.Errorf("Count = %d, want %d", n, kept)
	}
	if got := ids(t, ix, "shared topic"); len(got) != kept {
		t.Errorf("%d hits for the shared title, want %d", len(got), kept)
	}
	for w := range writers {
		for r := range rounds {
			got := ids(t, ix, fmt.Sprintf("w%dr%d", w, r))
			if want := r%2 == 0; (len(got) == 1) != want {
				t.Errorf("writer %d round %d: hits %v, want found %v", w, r, got, want)
			}
		}
	}
}

func testClosed(t *testing.T, h Harness) {
	ix := h.Open(t)
	ctx := context.Background()
	put(t, ix, search.Doc{ID: "a", Body: "text"})
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := ix.Put(ctx, search.Doc{ID: "b"}); err == nil {
		t.Error("Put after Close succeeded")
	}
	if _, err := ix.Get(ctx, "a"); err == nil {
		t.Error("Get after Close succeeded")
	}
	if _, err := ix.Search(ctx, "text", 10); err == nil {
		t.Error("Search after Close succeeded")
	}
	if _, err := ix.Entries(ctx, "", 10); err == nil {
		t.Error("Entries after Close succeeded")
	}
	if _, err := ix.Count(ctx); err == nil {
		t.Error("Count after Close succeeded")
	}
	if _, err := ix.Delete(ctx, "a"); err == nil {
		t.Error("Delete after Close succeeded")
	}
}

func testCanceled(t *testing.T, h Harness) {
	ix := h.Open(t)
	put(t, ix, search.Doc{ID: "a", Body: "text"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ix.Search(ctx, "text", 10); !errors.Is(err, context.Canceled) {
		t.Errorf("Search with a canceled context: %v, want context.Canceled", err)
	}
	if err := ix.Put(ctx, search.Doc{ID: "b", Body: "text"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a canceled context: %v, want context.Canceled", err)
	}
	if n := count(t, ix); n != 1 {
		t.Errorf("Count = %d, want 1: a canceled Put stores nothing", n)
	}
}
