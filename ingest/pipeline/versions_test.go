package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/ingest/parse"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/ingest/search"
)

// searchIDs returns the ids a search finds.
func searchIDs(t *testing.T, svc *pipeline.Service, query string) []string {
	t.Helper()
	hits, err := svc.Search(context.Background(), query, 100)
	if err != nil {
		t.Fatalf("Search(%q): %v", query, err)
	}
	var ids []string
	for _, h := range hits {
		ids = append(ids, h.ID)
	}
	return ids
}

// mbox is an archive of messages, one per subject, each body the subject
// repeated.
func mbox(subjects ...string) []byte {
	var b strings.Builder
	for _, s := range subjects {
		fmt.Fprintf(&b, "From list@example.org Tue Feb  4 09:08:00 2025\nFrom: list@example.org\nSubject: %s\n\nAbout %s, and more about %s.\n\n", s, s, s)
	}
	return []byte(b.String())
}

// TestUpdatedFileReplacesItsDocument drops a file, lets it be processed,
// then drops a new version at the same path: the new version replaces
// the document (one document, whose id is its path's, pointing at the new
// version), the old text is no longer searchable, and processed/ holds
// the new version. An archive updated without one of its messages loses
// that message's document, in SQL and in the index. On both stores.
func TestUpdatedFileReplacesItsDocument(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		h.start()
		const note, list = "notes/kettle.txt", "lists/club.mbox"
		v1, v2 := []byte("The kettle whistles with bergamot tea."), []byte("The kettle now brews chamomile.")
		a1, a2 := mbox("Saturn", "Jupiter", "Andromeda"), mbox("Saturn", "Jupiter")
		drop(t, h.dir, note, v1)
		drop(t, h.dir, list, a1)
		waitFor(t, "the first versions", waitTimeout, func() (bool, string) { return settled(t, h.db, 2) })
		if got := searchIDs(t, h.svc, "andromeda"); !slices.Equal(got, []string{pipeline.DocumentID(list, "#3")}) {
			t.Fatalf("andromeda finds %v before the update, want the third message", got)
		}

		drop(t, h.dir, note, v2)
		drop(t, h.dir, list, a2)
		waitFor(t, "the second versions", waitTimeout, func() (bool, string) {
			ok, state := settled(t, h.db, 4)
			n, err := h.ix.Count(ctx)
			return ok && err == nil && n == 3, fmt.Sprintf("%s, %d index entries (%v)", state, n, err)
		})
		if got := docIDs(t, h.db, ""); len(got) != 3 {
			t.Fatalf("%d documents, want 3: the note and the archive's two messages", len(got))
		}
		d, err := h.svc.Document(ctx, pipeline.DocumentID(note, ""))
		if err != nil || d.Status != "saved" || d.Body != string(v2) || d.FileID != pipeline.FileID(note, pipeline.ETag(v2)) {
			t.Fatalf("the note's document = %+v, %v; want the second version, saved", d, err)
		}
		for q, want := range map[string][]string{
			"bergamot":  nil,
			"chamomile": {pipeline.DocumentID(note, "")},
			"andromeda": nil,
			"jupiter":   {pipeline.DocumentID(list, "#2")},
		} {
			if got := searchIDs(t, h.svc, q); !slices.Equal(got, want) {
				t.Errorf("%s finds %v, want %v", q, got, want)
			}
		}
		if _, err := h.ix.Get(ctx, pipeline.DocumentID(list, "#3")); !errors.Is(err, search.ErrNotFound) {
			t.Errorf("the lost message is still in the index: %v", err)
		}
		m, err := h.svc.Document(ctx, pipeline.DocumentID(list, "#1"))
		if err != nil || m.FileID != pipeline.FileID(list, pipeline.ETag(a2)) {
			t.Errorf("the first message = file %s, %v; want the second version's", m.FileID, err)
		}
		for rel, want := range map[string][]byte{note: v2, list: a2} {
			if b, err := os.ReadFile(filepath.Join(h.dir, pipeline.ProcessedDir, rel)); err != nil || string(b) != string(want) {
				t.Errorf("processed/%s holds %q (%v), want the second version", rel, b, err)
			}
		}
		// Reconciliation finds nothing to repair or remove.
		run, err := h.svc.Reindex(ctx, pipeline.TriggerCLI, nil)
		if err != nil || run.Missing+run.Stale+run.Extra != 0 || run.Checked != 3 {
			t.Errorf("Reindex = %+v, %v; want 3 checked, nothing to repair", run, err)
		}
	})
}

// holdParser parses as parse.File does, but holds the parse of any file
// whose content holds hold until release is closed, and says on held
// when it is holding.
type holdParser struct {
	hold    string
	held    chan struct{}
	release chan struct{}
	once    sync.Once
}

func newHoldParser(hold string) *holdParser {
	return &holdParser{hold: hold, held: make(chan struct{}), release: make(chan struct{})}
}

func (p *holdParser) parse(name string, data []byte) ([]parse.Doc, error) {
	if strings.Contains(string(data), p.hold) {
		p.once.Do(func() { close(p.held) })
		<-p.release
	}
	return parse.File(name, data)
}

// TestStaleParseDoesNotReplaceNewerVersion holds the parse of a file's
// first version until a second version has been parsed, saved and
// indexed: the first version's parse, finishing last, changes nothing
// (its file is superseded), and the document keeps the second version.
// The first archive's third message, which the second version lacks, is
// not brought back. On both stores.
func TestStaleParseDoesNotReplaceNewerVersion(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		hp := newHoldParser("Andromeda")
		pipeline.SetParser(h.svc, hp.parse)
		const list = "lists/club.mbox"
		a1, a2 := mbox("Saturn", "Jupiter", "Andromeda"), mbox("Saturn", "Venus")
		drop(t, h.dir, list, a1)
		h.start()
		select {
		case <-hp.held:
		case <-time.After(waitTimeout):
			t.Fatal("the first version was never parsed")
		}
		// The first version is read and being parsed; the second
		// replaces it on disk and goes all the way.
		drop(t, h.dir, list, a2)
		waitFor(t, "the second version to be saved and indexed", waitTimeout, func() (bool, string) {
			n := count(t, h.db, `SELECT count(*) FROM ingest_documents WHERE status = 'saved' AND indexed_at > 0`)
			return n == 2, fmt.Sprintf("%d saved and indexed", n)
		})
		close(hp.release)
		first := pipeline.FileID(list, pipeline.ETag(a1))
		waitFor(t, "the first version's parse to end", waitTimeout, func() (bool, string) {
			n := count(t, h.db, `SELECT count(*) FROM ingest_files WHERE id = $1 AND status = 'superseded'`, first)
			return n == 1, "not superseded yet"
		})
		waitFor(t, "everything to settle", waitTimeout, func() (bool, string) { return settled(t, h.db, 2) })
		if got := docIDs(t, h.db, ""); len(got) != 2 {
			t.Fatalf("%d documents, want the second version's 2", len(got))
		}
		for _, key := range []string{"#1", "#2"} {
			d, err := h.svc.Document(ctx, pipeline.DocumentID(list, key))
			if err != nil || d.Status != "saved" || d.FileID != pipeline.FileID(list, pipeline.ETag(a2)) {
				t.Errorf("message %s = %+v, %v; want the second version's, saved", key, d, err)
			}
		}
		for q, want := range map[string]int{"venus": 1, "jupiter": 0, "andromeda": 0} {
			if got := searchIDs(t, h.svc, q); len(got) != want {
				t.Errorf("%s finds %v, want %d", q, got, want)
			}
		}
		if n := len(jobsOf(t, h.db, pipeline.KindExtract)); n != 2 {
			t.Errorf("%d extract jobs, want the second version's 2 only", n)
		}
	})
}

// gate holds what reaches it until it is released, and says when
// something has reached it.
type gate struct {
	held, release chan struct{}
	once          sync.Once
}

func newGate() *gate { return &gate{held: make(chan struct{}), release: make(chan struct{})} }

func (g *gate) wait(ctx context.Context) error {
	g.once.Do(func() { close(g.held) })
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitHeld waits until something has reached g.
func (g *gate) waitHeld(t *testing.T, what string) {
	t.Helper()
	select {
	case <-g.held:
	case <-time.After(waitTimeout):
		t.Fatalf("%s never reached its gate", what)
	}
}

// gatedExtractor extracts as Local does, but holds a text holding one of
// its words at that word's gate until the gate is released.
type gatedExtractor map[string]*gate

func (g gatedExtractor) Extract(ctx context.Context, in extract.Input) (extract.Result, error) {
	for word, gt := range g {
		if strings.Contains(in.Text, word) {
			if err := gt.wait(ctx); err != nil {
				return extract.Result{}, err
			}
		}
	}
	return extract.NewLocal().Extract(ctx, in)
}

// TestStaleSaveDoesNotReplaceNewerVersion holds the extraction of a
// file's first version until a second version has been parsed, then lets
// the first version's extraction be saved before the second's: the first
// version's extraction is dropped, and the document ends with the second
// version's text and extraction, in SQL and in the index.
func TestStaleSaveDoesNotReplaceNewerVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	first, second := newGate(), newGate()
	h := newHarness(t, func(c *pipeline.Config) { c.Extractor = gatedExtractor{"bergamot": first, "chamomile": second} })
	const note = "notes/kettle.txt"
	v1, v2 := []byte("The kettle whistles with bergamot tea."), []byte("The kettle now brews chamomile.")
	drop(t, h.dir, note, v1)
	h.start()
	first.waitHeld(t, "the first version's extraction")
	drop(t, h.dir, note, v2)
	second.waitHeld(t, "the second version's extraction")
	// The second version is parsed and being extracted: the first
	// version's extraction goes to its save now.
	close(first.release)
	waitFor(t, "the first version's save to end", waitTimeout, func() (bool, string) {
		n := 0
		for _, j := range jobsOf(t, h.db, pipeline.KindSave) {
			if j.State == "completed" {
				n++
			}
		}
		return n == 1, fmt.Sprintf("%d save jobs completed", n)
	})
	close(second.release)
	waitFor(t, "everything to settle", waitTimeout, func() (bool, string) { return settled(t, h.db, 2) })
	if n := len(jobsOf(t, h.db, pipeline.KindSave)); n != 2 {
		t.Fatalf("%d save jobs, want one per version", n)
	}
	id := pipeline.DocumentID(note, "")
	d, err := h.svc.Document(ctx, id)
	if err != nil || d.Body != string(v2) || d.FileID != pipeline.FileID(note, pipeline.ETag(v2)) || d.Status != "saved" {
		t.Fatalf("Document = %+v, %v; want the second version", d, err)
	}
	// The extraction is the second version's too, not the first's saved
	// over it.
	if strings.Contains(d.Summary+d.Title+strings.Join(d.KeyTerms, " "), "bergamot") || !slices.Contains(d.KeyTerms, "chamomile") {
		t.Fatalf("the document holds the first version's extraction: title %q, summary %q, terms %v", d.Title, d.Summary, d.KeyTerms)
	}
	if ix, err := h.ix.Get(ctx, id); err != nil || ix.Body != string(v2) || !ix.UpdatedAt.Equal(d.UpdatedAt) || !slices.Equal(ix.Terms, d.KeyTerms) {
		t.Fatalf("the index holds %q, terms %v, updated %v (%v); want the second version's, updated %v", ix.Body, ix.Terms, ix.UpdatedAt, err, d.UpdatedAt)
	}
	if got := searchIDs(t, h.svc, "bergamot"); len(got) != 0 {
		t.Errorf("the first version is searchable: %v", got)
	}
}

// TestContentBackAfterNewerVersion drops a file, a new version of it,
// then the first version's content again: the content that came back is
// the newest version, and the document holds it again.
func TestContentBackAfterNewerVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, nil)
	h.start()
	const note = "notes/kettle.txt"
	v1, v2 := []byte("The kettle whistles with bergamot tea."), []byte("The kettle now brews chamomile.")
	id := pipeline.DocumentID(note, "")
	for i, v := range [][]byte{v1, v2, v1} {
		drop(t, h.dir, note, v)
		waitFor(t, fmt.Sprintf("version %d", i+1), waitTimeout, func() (bool, string) {
			d, err := h.svc.Document(ctx, id)
			ix, ierr := h.ix.Get(ctx, id)
			left := filesUnder(t, filepath.Join(h.dir, pipeline.IncomingDir))
			return err == nil && ierr == nil && d.Status == "saved" && d.Body == string(v) && ix.Body == string(v) && len(left) == 0,
				fmt.Sprintf("%s %q, index %q (%v), incoming/ %v", d.Status, d.Body, ix.Body, ierr, left)
		})
	}
	if got := searchIDs(t, h.svc, "bergamot"); !slices.Equal(got, []string{id}) {
		t.Errorf("bergamot finds %v, want the document", got)
	}
	if got := searchIDs(t, h.svc, "chamomile"); len(got) != 0 {
		t.Errorf("chamomile finds %v, want nothing: that version was replaced", got)
	}
	if b, err := os.ReadFile(filepath.Join(h.dir, pipeline.ProcessedDir, note)); err != nil || string(b) != string(v1) {
		t.Errorf("processed/%s holds %q (%v), want the first content", note, b, err)
	}
}

// TestReindexRemovesReplacedVersions writes the rows an earlier release
// left when a file was updated (a document per version, with ids of
// their own) and checks that a reindex deletes the older version's
// document from SQL and the index, and keeps the newer.
func TestReindexRemovesReplacedVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, nil)
	const rel = "notes/kettle.txt"
	old := []struct {
		file, body string
		at         time.Time
	}{
		{pipeline.FileID(rel, "etag-1"), "bergamot tea in the kettle", time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)},
		{pipeline.FileID(rel, "etag-2"), "chamomile in the kettle", time.Date(2026, 1, 2, 9, 0, 0, 0, time.UTC)},
	}
	for i, v := range old {
		us := v.at.UnixMicro()
		if _, err := h.db.SQL.ExecContext(ctx, `INSERT INTO ingest_files (id, path, source, etag, format, status, documents, created_at, updated_at)
			VALUES ($1, $2, 'notes', $3, 'text', 'processed', 1, $4, $4)`, v.file, rel, fmt.Sprint("etag-", i+1), us); err != nil {
			t.Fatal(err)
		}
		if _, err := h.db.SQL.ExecContext(ctx, `INSERT INTO ingest_documents (id, file_id, key, source, path, status, title, body, meta, created_at, updated_at)
			VALUES ($1, $1, '', 'notes', $2, 'saved', 'Kettle', $3, '{}', $4, $4)`, v.file, rel, v.body, us); err != nil {
			t.Fatal(err)
		}
		if err := h.ix.Put(ctx, search.Doc{ID: v.file, Title: "Kettle", Body: v.body, Source: rel, UpdatedAt: v.at}); err != nil {
			t.Fatal(err)
		}
	}
	if got := searchIDs(t, h.svc, "kettle"); len(got) != 2 {
		t.Fatalf("kettle finds %v before the reindex, want both versions", got)
	}
	run, err := h.svc.Reindex(ctx, pipeline.TriggerCLI, nil)
	if err != nil {
		t.Fatalf("Reindex: %v", err)
	}
	if got := docIDs(t, h.db, ""); !slices.Equal(got, []string{old[1].file}) {
		t.Errorf("SQL holds %v after the reindex, want the newer version %s only", got, old[1].file)
	}
	if got := searchIDs(t, h.svc, "kettle"); !slices.Equal(got, []string{old[1].file}) {
		t.Errorf("kettle finds %v after the reindex, want the newer version only", got)
	}
	if run.Extra != 1 || run.Checked != 1 {
		t.Errorf("Reindex = %+v, want 1 checked and the older version's entry extra", run)
	}
}

// TestChangedBeforeParseLeavesItToTheNewVersion enqueues a text and an
// archive, then changes both before their parse: each first job finds
// other content and ends without a document or a dead letter, and the
// new content is parsed by its own job.
func TestChangedBeforeParseLeavesItToTheNewVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, nil)
	const note, list = "notes/kettle.txt", "lists/club.mbox"
	drop(t, h.dir, note, []byte("The kettle whistles with bergamot tea."))
	drop(t, h.dir, list, mbox("Saturn", "Jupiter"))
	if got, err := h.svc.Scan(ctx); err != nil || len(got) != 2 {
		t.Fatalf("Scan = %v, %v; want both files enqueued", got, err)
	}
	v2, a2 := []byte("The kettle now brews chamomile."), mbox("Venus")
	drop(t, h.dir, note, v2)
	drop(t, h.dir, list, a2)
	h.start()
	waitFor(t, "the new versions", waitTimeout, func() (bool, string) {
		n := count(t, h.db, `SELECT count(*) FROM ingest_documents WHERE status = 'saved' AND indexed_at > 0`)
		left := filesUnder(t, filepath.Join(h.dir, pipeline.IncomingDir))
		return n == 2 && len(left) == 0, fmt.Sprintf("%d saved and indexed, incoming/ %v", n, left)
	})
	if dls := deadLetters(t, h.db); len(dls) != 0 {
		t.Errorf("%d dead letters, want none: %s", len(dls), dls[0].LastError)
	}
	for _, j := range jobsOf(t, h.db, pipeline.KindParse) {
		if j.State != "completed" {
			t.Errorf("parse job %d is %s", j.ID, j.State)
		}
	}
	if got := docIDs(t, h.db, ""); !slices.Equal(got, sorted([]string{pipeline.DocumentID(note, ""), pipeline.DocumentID(list, "#1")})) {
		t.Errorf("documents %v, want the new versions' two", got)
	}
	for q, want := range map[string]int{"bergamot": 0, "jupiter": 0, "chamomile": 1, "venus": 1} {
		if got := searchIDs(t, h.svc, q); len(got) != want {
			t.Errorf("%s finds %v, want %d", q, got, want)
		}
	}
	if n := count(t, h.db, `SELECT count(*) FROM ingest_files`); n != 2 {
		t.Errorf("%d files recorded, want the new versions' 2", n)
	}
}
