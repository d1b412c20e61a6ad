package pipeline_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/ingest/parse"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/weirtype"
)

// TestIngestHappyPath drops notes, an article and an mbox archive into
// incoming/ and checks that the scan finds them, every document is saved
// in SQL with its extraction, indexed and searchable, and the files move
// to processed/.
func TestIngestHappyPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, nil)
	files := []string{
		"notes/astronomy-saturns-rings-at-galloway.txt",
		"notes/chess-doubled-pawns.txt",
		"articles/weather-cloud-types.md",
		"lists/stargazers.mbox",
	}
	content := map[string][]byte{}
	for _, rel := range files {
		content[rel] = readCorpus(t, rel)
		drop(t, h.dir, rel, content[rel])
	}
	h.start()
	waitFor(t, "the files to be processed and indexed", waitTimeout, func() (bool, string) { return settled(t, h.db, len(files)) })

	const wantDocs = 3 + 32 // three single files, 32 messages
	ids := docIDs(t, h.db, "")
	if len(ids) != wantDocs {
		t.Fatalf("SQL holds %d documents, want %d", len(ids), wantDocs)
	}
	byFile := map[string][]pipeline.Document{}
	for _, id := range ids {
		d, err := h.svc.Document(ctx, id)
		if err != nil {
			t.Fatalf("Document(%s): %v", id, err)
		}
		if d.Status != "saved" || d.Title == "" || d.Language == "" || d.WordCount == 0 || len(d.KeyTerms) == 0 ||
			d.Summary == "" || d.Extractor != "local" || d.IndexError != "" {
			t.Errorf("document %s (%s%s) lacks its extraction: %+v", id, d.Path, d.Key, d)
		}
		byFile[d.Path] = append(byFile[d.Path], d)
		if _, err := h.ix.Get(ctx, id); err != nil {
			t.Errorf("document %s (%s%s) is not in the index: %v", id, d.Path, d.Key, err)
		}
	}
	for _, rel := range files {
		fileID := pipeline.FileID(rel, pipeline.ETag(content[rel]))
		docs := byFile[rel]
		if strings.HasSuffix(rel, ".mbox") {
			if len(docs) != 32 {
				t.Errorf("%s: %d documents, want 32", rel, len(docs))
			}
			var keys []string
			for _, d := range docs {
				keys = append(keys, d.Key)
				if d.FileID != fileID || d.Meta["format"] != "mbox" || d.Meta["from"] == "" {
					t.Errorf("%s%s: file %s meta %v, want file %s and the message's headers", rel, d.Key, d.FileID, d.Meta, fileID)
				}
				if d.Key == "#1" && d.Title != "Great Red Spot tonight" {
					t.Errorf("%s#1: title %q, want the message's subject", rel, d.Title)
				}
			}
			if !slices.Contains(keys, "#1") || !slices.Contains(keys, "#32") {
				t.Errorf("%s: keys %v, want #1 to #32", rel, keys)
			}
			continue
		}
		if len(docs) != 1 || docs[0].ID != pipeline.DocumentID(rel, "") || docs[0].FileID != fileID || docs[0].Key != "" {
			t.Errorf("%s: documents %+v, want one whose id is DocumentID of its path, of file %s", rel, docs, fileID)
		}
	}
	if n, err := h.ix.Count(ctx); err != nil || n != wantDocs {
		t.Errorf("index Count = %d, %v; want %d", n, err, wantDocs)
	}
	for query, want := range map[string]string{
		"telescope": "notes/astronomy-saturns-rings-at-galloway.txt",
		"gambit":    "notes/chess-doubled-pawns.txt",
		"barometer": "articles/weather-cloud-types.md",
	} {
		hits, err := h.svc.Search(ctx, query, 100)
		if err != nil {
			t.Fatalf("Search(%q): %v", query, err)
		}
		wantID := pipeline.DocumentID(want, "")
		found := false
		for _, hit := range hits {
			found = found || hit.ID == wantID
			if !slices.Contains(ids, hit.ID) {
				t.Errorf("Search(%q) found %s, which SQL does not hold", query, hit.ID)
			}
		}
		if !found {
			t.Errorf("Search(%q) did not find %s among %d hits", query, want, len(hits))
		}
	}
	hits, err := h.svc.Search(ctx, "telescope", 100)
	if err != nil {
		t.Fatal(err)
	}
	messages := 0
	for _, hit := range hits {
		if strings.HasPrefix(hit.Source, "lists/stargazers.mbox#") {
			messages++
		}
	}
	if messages == 0 {
		t.Errorf("Search(telescope) found none of the archive's messages")
	}

	if got := filesUnder(t, filepath.Join(h.dir, pipeline.IncomingDir)); len(got) != 0 {
		t.Errorf("incoming/ still holds %v", got)
	}
	if got, want := filesUnder(t, filepath.Join(h.dir, pipeline.ProcessedDir)), sorted(files); !slices.Equal(got, want) {
		t.Errorf("processed/ holds %v, want %v", got, want)
	}
	for _, rel := range files {
		b, err := os.ReadFile(filepath.Join(h.dir, pipeline.ProcessedDir, filepath.FromSlash(rel)))
		if err != nil || !bytes.Equal(b, content[rel]) {
			t.Errorf("processed/%s: %d bytes, %v; want the original's %d", rel, len(b), err, len(content[rel]))
		}
	}
	st, err := h.svc.Status(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Files["processed"] != len(files) || st.Documents["saved"] != wantDocs || st.Indexed != wantDocs || st.IndexErrors != 0 || st.DeadLetters != 0 {
		t.Errorf("Status = files %v, documents %v, indexed %d, index errors %d, dead letters %d; want %d processed, %d saved and indexed, no errors",
			st.Files, st.Documents, st.Indexed, st.IndexErrors, st.DeadLetters, len(files), wantDocs)
	}
}

// TestSameFileMakesOneJob enqueues one file many ways (two scans by two
// processes, a scan after a touch, Ingest twice, a copy after it was
// processed) and checks that it makes one parse job and one document;
// the job id is SHA-256 of container, path and ETag, and a change of
// content makes another (spec 01 §3).
func TestSameFileMakesOneJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, nil)
	content := readCorpus(t, "notes/chess-doubled-pawns.txt")
	const rel = "notes/pawns.txt"
	etag := pipeline.ETag(content)
	id := pipeline.FileID(rel, etag)

	sum := sha256.Sum256(content)
	if etag != hex.EncodeToString(sum[:]) {
		t.Errorf("ETag = %s, want the content's SHA-256", etag)
	}
	sum = sha256.Sum256([]byte("incoming\x00" + rel + "\x00" + etag))
	if id != hex.EncodeToString(sum[:]) {
		t.Errorf("FileID = %s, want SHA-256 of container, path and ETag", id)
	}
	changed := append(bytes.Clone(content), []byte("\nOne more line about the gambit.\n")...)
	if pipeline.FileID(rel, pipeline.ETag(changed)) == id {
		t.Error("FileID did not change with the content")
	}
	if pipeline.FileID("notes/other.txt", etag) == id {
		t.Error("FileID did not change with the path")
	}

	// One scan enqueues it; a second process scanning the same incoming/
	// finds the job.
	drop(t, h.dir, rel, content)
	expectScan(t, h.svc, id, rel, weirtype.Inserted)
	other := h.newService(func(c *pipeline.Config) { c.ID = "test-2" })
	expectScan(t, other, id, rel, weirtype.DuplicatePending)
	// Touched but not changed: this process's scan takes it again.
	touched := time.Now().Add(-30 * time.Minute)
	if err := os.Chtimes(filepath.Join(h.dir, pipeline.IncomingDir, rel), touched, touched); err != nil {
		t.Fatal(err)
	}
	expectScan(t, h.svc, id, rel, weirtype.DuplicatePending)

	// Ingest of the same content, twice, into the same place.
	src := filepath.Join(t.TempDir(), "pawns.txt")
	if err := os.WriteFile(src, content, 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		expectIngest(t, h.svc, src, id, weirtype.DuplicatePending)
	}

	h.start()
	waitFor(t, "the file to be processed", waitTimeout, func() (bool, string) { return settled(t, h.db, 1) })
	checkOneJobEach := func(files int) {
		t.Helper()
		parses := jobsOf(t, h.db, pipeline.KindParse)
		if len(parses) != files {
			t.Errorf("%d parse jobs, want %d", len(parses), files)
		}
		for _, j := range parses {
			if j.State != weirtype.StateCompleted || j.Attempt != 1 {
				t.Errorf("parse job %d: %s after %d attempts, want completed after 1", j.ID, j.State, j.Attempt)
			}
		}
		if n := count(t, h.db, `SELECT count(*) FROM ingest_documents`); n != 1 {
			t.Errorf("%d documents, want 1: every version of a path is one document", n)
		}
		for _, kind := range []string{pipeline.KindExtract, pipeline.KindSave, pipeline.KindIndex} {
			if n := len(jobsOf(t, h.db, kind)); n != files {
				t.Errorf("%d %s jobs, want %d", n, kind, files)
			}
		}
	}
	checkOneJobEach(1)
	if j := jobsOf(t, h.db, pipeline.KindParse); len(j) == 1 && j[0].IdempotencyKey != id {
		t.Errorf("the parse job's idempotency key is %s, want the file id %s", j[0].IdempotencyKey, id)
	}
	if d, err := h.svc.Document(ctx, pipeline.DocumentID(rel, "")); err != nil || d.FileID != id {
		t.Errorf("Document = file %s, %v; want the file %s", d.FileID, err, id)
	}

	// The same content copied in again after it was processed changes
	// nothing, and leaves incoming/ as the first copy did.
	expectIngest(t, h.svc, src, id, weirtype.DuplicateCompleted)
	if got := filesUnder(t, filepath.Join(h.dir, pipeline.IncomingDir)); len(got) != 0 {
		t.Errorf("incoming/ holds %v after a processed file came again", got)
	}
	drop(t, h.dir, rel, content) // and found by the scan this time
	waitFor(t, "the scan to move the copy to processed/", waitTimeout, func() (bool, string) {
		got := filesUnder(t, filepath.Join(h.dir, pipeline.IncomingDir))
		return len(got) == 0, "incoming/ holds " + strings.Join(got, ", ")
	})
	checkOneJobEach(1)
	if got := filesUnder(t, filepath.Join(h.dir, pipeline.ProcessedDir)); !slices.Equal(got, []string{rel}) {
		t.Errorf("processed/ holds %v, want %s once", got, rel)
	}

	// A change of content is another version of the file: a job of its
	// own, whose document replaces the first version's.
	drop(t, h.dir, rel, changed)
	waitFor(t, "the changed file to be processed", waitTimeout, func() (bool, string) { return settled(t, h.db, 2) })
	checkOneJobEach(2)
	newID := pipeline.FileID(rel, pipeline.ETag(changed))
	if d, err := h.svc.Document(ctx, pipeline.DocumentID(rel, "")); err != nil || d.Status != "saved" || d.FileID != newID {
		t.Errorf("Document = %+v, %v; want it saved, of the new version %s", d, err, newID)
	}
	if b, err := os.ReadFile(filepath.Join(h.dir, pipeline.ProcessedDir, rel)); err != nil || !bytes.Equal(b, changed) {
		t.Errorf("processed/%s does not hold the new content (%v)", rel, err)
	}
}

func expectScan(t *testing.T, svc *pipeline.Service, id, rel string, want weirtype.InsertOutcome) {
	t.Helper()
	got, err := svc.Scan(context.Background())
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	if len(got) != 1 || got[0].ID != id || got[0].Path != rel || got[0].Outcome != want {
		t.Fatalf("Scan = %+v, want %s (%s) %s", got, rel, id, want)
	}
}

func expectIngest(t *testing.T, svc *pipeline.Service, src, id string, want weirtype.InsertOutcome) {
	t.Helper()
	got, skipped, err := svc.Ingest(context.Background(), "notes", []string{src})
	if err != nil || len(skipped) != 0 {
		t.Fatalf("Ingest = %v, skipped %v", err, skipped)
	}
	if len(got) != 1 || got[0].ID != id || got[0].Outcome != want {
		t.Fatalf("Ingest = %+v, want %s %s", got, id, want)
	}
}

// failure is what a failed/ folder holds.
type failure struct {
	files []string
	err   pipeline.ErrorFile
	meta  pipeline.MetadataFile
}

func readFailure(t *testing.T, dir string) failure {
	t.Helper()
	f := failure{files: filesUnder(t, dir)}
	for name, v := range map[string]any{"error.json": &f.err, "metadata.json": &f.meta} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("failed/: %v", err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s/%s: %v", dir, name, err)
		}
	}
	return f
}

// refusal is how the service must refuse the document d of a file: at the
// stage named stage, with an error holding reason; "" when the document is
// not poison. The parser refuses what it cannot read; the extractor what
// is not text (the service's own check of what SQL can hold, run before
// the extractor, names the same problems the same way).
func refusal(t *testing.T, d parse.Doc) (stage, reason string) {
	t.Helper()
	_, err := extract.NewLocal().Extract(context.Background(), extract.Input{Title: d.Title, Text: d.Text})
	var nt *extract.NotTextError
	if errors.As(err, &nt) {
		return pipeline.KindExtract, nt.Reason
	}
	if err != nil {
		t.Fatalf("extract: %v", err)
	}
	return "", ""
}

// fileRefusal is refusal for a file of one document, or for its parse.
func fileRefusal(t *testing.T, name string, content []byte) (stage, reason string) {
	t.Helper()
	docs, err := parse.File(name, content)
	if err != nil {
		return pipeline.KindParse, err.Error()
	}
	return refusal(t, docs[0])
}

// TestPoisonFilesGoToFailed drops a file with a NUL byte, one that is not
// UTF-8, one full of control characters and one with no words: each that
// the parser or the extractor
// refuses ends in failed/{source}/{filename}/ with the original,
// error.json and metadata.json, after one attempt at the stage that
// refused it, and the dead-letter store holds exactly them.
func TestPoisonFilesGoToFailed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	start := time.Now()
	type candidate struct {
		content       []byte
		stage, reason string // the refusal expected
	}
	candidates := map[string]*candidate{
		"nul.txt":     {content: []byte("A scanned page\x00 with a NUL byte in it, and words.")},
		"latin1.txt":  {content: []byte("Cr\xe8me br\xfbl\xe9e: a custard with a crust of caramel, not valid UTF-8.")},
		"capture.txt": {content: readCorpus(t, "poison/terminal-capture.txt")},
		"empty.md":    {content: readCorpus(t, "poison/empty.md")},
	}
	poison := 0
	for name, c := range candidates {
		c.stage, c.reason = fileRefusal(t, name, c.content)
		if c.stage != "" {
			poison++
		}
		drop(t, h.dir, "inbox/"+name, c.content)
	}
	if poison < 2 {
		t.Fatalf("only %d of the candidates are poison to the parser and the extractor: the test proves little", poison)
	}
	good := readCorpus(t, "notes/chess-doubled-pawns.txt")
	drop(t, h.dir, "inbox/good.txt", good)
	h.start()
	h.waitFailures("the poison to be written to failed/", len(candidates)+1, poison)
	end := time.Now()

	dls := deadLetters(t, h.db)
	if len(dls) != poison {
		t.Fatalf("%d dead letters, want %d", len(dls), poison)
	}
	byFile := map[string]*weirtype.DeadLetter{}
	for _, dl := range dls {
		var a struct{ File string }
		if err := json.Unmarshal(dl.Payload, &a); err != nil {
			t.Fatal(err)
		}
		byFile[a.File] = dl
	}
	savedWant, failedDocs := 1, 0
	for name, c := range candidates {
		rel := "inbox/" + name
		fileID := pipeline.FileID(rel, pipeline.ETag(c.content))
		docID := pipeline.DocumentID(rel, "")
		if c.stage == "" {
			savedWant++
			if d, err := h.svc.Document(context.Background(), docID); err != nil || d.Status != "saved" {
				t.Errorf("%s, which neither the parser nor the extractor refuses: document %q, %v; want saved", name, d.Status, err)
			}
			continue
		}
		dl := byFile[fileID]
		if dl == nil {
			t.Errorf("%s: no dead letter", name)
			continue
		}
		dir := filepath.Join(h.dir, pipeline.FailedDir, "inbox", name)
		f := readFailure(t, dir)
		if want := []string{name, "error.json", "metadata.json"}; !slices.Equal(f.files, sorted(want)) {
			t.Errorf("failed/inbox/%s holds %v, want %v", name, f.files, sorted(want))
		}
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(b, c.content) {
			t.Errorf("failed/inbox/%s/%s is not the original (%v)", name, name, err)
		}
		e := f.err
		failedAt, terr := time.Parse(time.RFC3339, e.FailedAt)
		if e.JobID != fileID || e.BlobPath != "incoming/"+rel || e.Attempts != 1 || !strings.Contains(e.LastError, c.reason) ||
			terr != nil || failedAt.Before(start.Add(-time.Second)) || failedAt.After(end) || e.EngineJobID != dl.JobID || e.Part != "" {
			t.Errorf("%s: error.json = %+v, want job id %s, blob path incoming/%s, 1 attempt (poison is not retried), an error naming %q, failed between %v and %v, engine job %d",
				name, e, fileID, rel, c.reason, start, end, dl.JobID)
		}
		m := f.meta
		if m.Stage != c.stage || m.DeadLetterID != dl.ID || m.FileID != fileID || m.Source != "inbox" ||
			m.ETag != pipeline.ETag(c.content) || m.Reason == "" || len(m.Errors) != 1 {
			t.Errorf("%s: metadata.json = %+v, want stage %s", name, m, c.stage)
		}
		for _, d := range []string{pipeline.IncomingDir, pipeline.ProcessedDir} {
			if exists(filepath.Join(h.dir, d, "inbox", name)) {
				t.Errorf("%s is still in %s/", name, d)
			}
		}
		if c.stage == pipeline.KindParse {
			continue // no document: its file failed before it had one
		}
		failedDocs++
		if m.DocumentID != docID || e.DocumentID != docID {
			t.Errorf("%s: metadata.json's document %s, error.json's %s; want %s", name, m.DocumentID, e.DocumentID, docID)
		}
		if d, err := h.svc.Document(context.Background(), docID); err != nil || d.Status != "failed" {
			t.Errorf("%s: document status %q, %v; want failed", name, d.Status, err)
		}
	}
	if got := filesUnder(t, filepath.Join(h.dir, pipeline.ProcessedDir)); len(got) != savedWant || !slices.Contains(got, "inbox/good.txt") {
		t.Errorf("processed/ holds %v, want the good file and those not refused (%d)", got, savedWant)
	}
	if got := filesUnder(t, filepath.Join(h.dir, pipeline.IncomingDir)); len(got) != 0 {
		t.Errorf("incoming/ still holds %v", got)
	}
	st, err := h.svc.Status(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Files["failed"] != poison || st.Files["processed"] != savedWant || st.Documents["failed"] != failedDocs || st.Documents["saved"] != savedWant || st.DeadLetters != poison {
		t.Errorf("Status = files %v, documents %v, dead letters %d", st.Files, st.Documents, st.DeadLetters)
	}
}

// TestMboxPoisonMessage checks that an archive with one poison message
// sends that message to failed/{source}/{file}#n/ and the archive itself
// to processed/, its other messages searchable.
func TestMboxPoisonMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, nil)
	msg := func(from, subject, body string) string {
		return "From " + from + " Tue Feb  4 09:08:00 2025\nFrom: " + from + "\nSubject: " + subject +
			"\nContent-Type: text/plain; charset=utf-8\n\n" + body + "\n\n"
	}
	archive := msg("ann@example.org", "Saturn at opposition", "Saturn rises at dusk; the rings are wide open in the telescope.") +
		msg("scanner@example.org", "scan 0001", "page\x00one\x00of\x00the\x00scan") +
		msg("bob@example.org", "Dew heaters", "A dew heater strap keeps the corrector plate clear all night.")
	const rel = "lists/mixed.mbox"
	docs, err := parse.File("mixed.mbox", []byte(archive))
	if err != nil || len(docs) != 3 {
		t.Fatalf("parse the archive: %d documents, %v", len(docs), err)
	}
	stage, reason := refusal(t, docs[1])
	if stage == "" {
		t.Fatalf("the scan's message is no poison to the extractor: %q", docs[1].Text)
	}
	drop(t, h.dir, rel, []byte(archive))
	h.start()
	h.waitFailures("the archive to settle", 1, 1)

	fileID := pipeline.FileID(rel, pipeline.ETag([]byte(archive)))
	dir := filepath.Join(h.dir, pipeline.FailedDir, "lists", "mixed.mbox#2")
	f := readFailure(t, dir)
	if want := []string{"error.json", "message.txt", "metadata.json"}; !slices.Equal(f.files, want) {
		t.Errorf("failed/lists/mixed.mbox#2 holds %v, want %v", f.files, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "message.txt")); err != nil || string(b) != docs[1].Text {
		t.Errorf("message.txt is not the message as parsed (%v): %q, want %q", err, b, docs[1].Text)
	}
	if f.err.BlobPath != "incoming/"+rel || f.err.Part != "#2" || f.err.JobID != fileID || f.err.DocumentID != pipeline.DocumentID(rel, "#2") ||
		!strings.Contains(f.err.LastError, reason) || f.err.Attempts != 1 {
		t.Errorf("error.json = %+v, want the archive's job id %s, blob path incoming/%s, part #2, one attempt, an error naming %q", f.err, fileID, rel, reason)
	}
	if f.meta.Key != "#2" || f.meta.FileID != fileID || f.meta.Source != "lists" || f.meta.Meta["subject"] != "scan 0001" {
		t.Errorf("metadata.json = %+v", f.meta)
	}
	if dls := deadLetters(t, h.db); len(dls) != 1 || dls[0].Kind != stage {
		t.Errorf("dead letters = %d, want the one message's %s", len(dls), stage)
	}
	if got := filesUnder(t, filepath.Join(h.dir, pipeline.ProcessedDir)); !slices.Equal(got, []string{rel}) {
		t.Errorf("processed/ holds %v, want the archive", got)
	}
	if exists(filepath.Join(h.dir, pipeline.FailedDir, "lists", "mixed.mbox", "mixed.mbox")) || len(filesUnder(t, filepath.Join(h.dir, pipeline.IncomingDir))) != 0 {
		t.Error("the archive is in failed/ or still in incoming/")
	}
	if n := count(t, h.db, `SELECT count(*) FROM ingest_files WHERE id = $1 AND status = 'processed'`, fileID); n != 1 {
		t.Error("the archive is not marked processed")
	}
	for query, subject := range map[string]string{"rings": "Saturn at opposition", "corrector": "Dew heaters"} {
		hits, err := h.svc.Search(ctx, query, 10)
		if err != nil || len(hits) != 1 || hits[0].Title != subject {
			t.Errorf("Search(%q) = %+v, %v; want the message %q", query, hits, err, subject)
		}
	}
	if n, _ := h.ix.Count(ctx); n != 2 {
		t.Errorf("the index holds %d documents, want the 2 good messages", n)
	}
}

// TestUnsupportedExtension drops a .json file: its parse fails for good,
// and it goes to failed/ with an error naming the extension.
func TestUnsupportedExtension(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	content := []byte(`{"not": "a document weir reads"}`)
	drop(t, h.dir, "data.json", content)
	h.start()
	h.waitFailures("the file to be written to failed/", 0, 1)
	dir := filepath.Join(h.dir, pipeline.FailedDir, "default", "data.json")
	f := readFailure(t, dir)
	if want := []string{"data.json", "error.json", "metadata.json"}; !slices.Equal(f.files, want) {
		t.Errorf("failed/default/data.json holds %v, want %v", f.files, want)
	}
	if !strings.Contains(f.err.LastError, `".json"`) || f.err.Attempts != 1 || f.err.BlobPath != "incoming/data.json" ||
		f.err.JobID != pipeline.FileID("data.json", pipeline.ETag(content)) {
		t.Errorf("error.json = %+v, want one attempt and an error naming the extension .json", f.err)
	}
	if f.meta.Stage != pipeline.KindParse || f.meta.FileID != pipeline.FileID("data.json", pipeline.ETag(content)) || f.meta.Source != "default" {
		t.Errorf("metadata.json = %+v", f.meta)
	}
	dls := deadLetters(t, h.db)
	if len(dls) != 1 || dls[0].Kind != pipeline.KindParse || dls[0].JobID != f.err.EngineJobID {
		t.Errorf("dead letters = %+v, want the file's parse job", dls)
	}
	for _, d := range []string{pipeline.IncomingDir, pipeline.ProcessedDir} {
		if got := filesUnder(t, filepath.Join(h.dir, d)); len(got) != 0 {
			t.Errorf("%s/ holds %v", d, got)
		}
	}
	if n := count(t, h.db, `SELECT count(*) FROM ingest_files WHERE status = 'failed'`); n != 1 {
		t.Errorf("%d files marked failed, want 1", n)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestFailedFileCopiedAgainLeavesIncoming copies a poison file, and a file
// of a format weir does not read, in again after they failed: the copies
// make no job and leave incoming/ for failed/, as the first copies did,
// instead of lying in incoming/ for ever.
func TestFailedFileCopiedAgainLeavesIncoming(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	files := map[string][]byte{
		"inbox/nul.txt":   []byte("A scanned page\x00 with a NUL byte."),
		"inbox/data.json": []byte(`{"a": 1}`),
	}
	for rel, b := range files {
		drop(t, h.dir, rel, b)
	}
	h.start()
	h.waitFailures("both files to be written to failed/", 0, 2)
	jobs := len(jobsOf(t, h.db, pipeline.KindParse))
	for rel, b := range files {
		drop(t, h.dir, rel, b)
	}
	waitFor(t, "the copies to leave incoming/", waitTimeout, func() (bool, string) {
		got := filesUnder(t, filepath.Join(h.dir, pipeline.IncomingDir))
		return len(got) == 0, "incoming/ holds " + strings.Join(got, ", ")
	})
	for rel, b := range files {
		name := filepath.Base(rel)
		if got, err := os.ReadFile(filepath.Join(h.dir, pipeline.FailedDir, "inbox", name, name)); err != nil || !bytes.Equal(got, b) {
			t.Errorf("failed/inbox/%s/%s: %v", name, name, err)
		}
	}
	if got := len(jobsOf(t, h.db, pipeline.KindParse)); got != jobs {
		t.Errorf("%d parse jobs after the copies, want %d", got, jobs)
	}
	if dls := deadLetters(t, h.db); len(dls) != 2 {
		t.Errorf("%d dead letters, want 2", len(dls))
	}
	if got := filesUnder(t, filepath.Join(h.dir, pipeline.ProcessedDir)); len(got) != 0 {
		t.Errorf("processed/ holds %v", got)
	}
}
