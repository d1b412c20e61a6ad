package pipeline_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/ingest/parse"
	"github.com/weirhq/weir/ingest/pipeline"
)

// badParser parses as parse.File does, then puts into an archive's
// messages bytes that SQL text cannot hold everywhere (PostgreSQL refuses
// them, SQLite takes them): a NUL in the second message's text, invalid
// UTF-8 in the third's title and in the fourth's metadata. The first
// message is left good. The parser the service has is free to give such
// text: the service must refuse it, message by message.
func badParser(name string, data []byte) ([]parse.Doc, error) {
	docs, err := parse.File(name, data)
	if err != nil || len(docs) != 4 {
		return docs, err
	}
	docs[1].Text = "page\x00one\x00of the scan"
	docs[2].Title = "caf\xe9 society"
	docs[3].Meta = map[string]string{parse.MetaFormat: parse.FormatMbox, parse.MetaFrom: "Jos\xe9 <jose@example.org>"}
	return docs, nil
}

// TestBadBytesArePoisonPerMessageOnBothStores ingests an archive whose
// messages hold bytes PostgreSQL refuses in text (a NUL, invalid UTF-8 in
// a title, in a header), and a file whose name is not UTF-8. On both
// stores the outcome is the same: each bad message is refused at once,
// alone (one attempt, its reason naming the field and the problem, its
// text as parsed in failed/), the archive's good message is saved and
// searchable, the archive goes to processed/; the badly named file fails
// at once to failed/. Before, on PostgreSQL, one bad message failed the
// whole archive's parse transaction (SQLSTATE 22021), three times, and
// the archive was dead-lettered.
func TestBadBytesArePoisonPerMessageOnBothStores(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		pipeline.SetParser(h.svc, badParser)
		const rel = "lists/club.mbox"
		archive := mbox("Saturn", "Scan", "Cafe", "Jose")
		drop(t, h.dir, rel, archive)
		badName := "inbox/r\xe9sum\xe9.txt"
		drop(t, h.dir, badName, []byte("A good text with a name that is not UTF-8."))
		h.start()
		h.waitFailures("the failures to be written", 2, 4)

		fileID := pipeline.FileID(rel, pipeline.ETag(archive))
		for key, want := range map[string]struct{ reason, original string }{
			"#2": {"its text contains a NUL byte at offset 4", "page\x00one\x00of the scan"},
			"#3": {"its title is not valid UTF-8 at offset 3", "About Cafe, and more about Cafe."},
			"#4": {`its metadata "from" is not valid UTF-8 at offset 3`, "About Jose, and more about Jose."},
		} {
			dir := filepath.Join(h.dir, pipeline.FailedDir, "lists", "club.mbox"+key)
			f := readFailure(t, dir)
			if f.err.Attempts != 1 || !strings.Contains(f.err.LastError, want.reason) || f.err.JobID != fileID || f.err.Part != key {
				t.Errorf("%s: error.json = %+v, want one attempt and an error naming %q", key, f.err, want.reason)
			}
			if f.meta.Stage != pipeline.KindExtract {
				t.Errorf("%s: failed at %s, want the message's extract", key, f.meta.Stage)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "message.txt")); err != nil || !bytes.Equal(b, []byte(want.original)) {
				t.Errorf("%s: message.txt = %q (%v), want the message as parsed %q", key, b, err, want.original)
			}
			if bytes.Contains(mustRead(t, filepath.Join(dir, "metadata.json")), []byte(`"original"`)) {
				t.Errorf("%s: metadata.json carries the original text; message.txt keeps it", key)
			}
			d, err := h.svc.Document(ctx, pipeline.DocumentID(rel, key))
			if err != nil || d.Status != "failed" {
				t.Errorf("%s: document %q, %v; want failed", key, d.Status, err)
			}
		}
		if d, err := h.svc.Document(ctx, pipeline.DocumentID(rel, "#1")); err != nil || d.Status != "saved" {
			t.Errorf("the good message: %q, %v; want saved", d.Status, err)
		}
		if got := searchIDs(t, h.svc, "saturn"); !slices.Equal(got, []string{pipeline.DocumentID(rel, "#1")}) {
			t.Errorf("saturn finds %v, want the good message", got)
		}
		if got := filesUnder(t, filepath.Join(h.dir, pipeline.ProcessedDir)); !slices.Equal(got, []string{rel}) {
			t.Errorf("processed/ holds %v, want the archive", got)
		}
		for _, dl := range deadLetters(t, h.db) {
			if dl.Kind == pipeline.KindParse && !strings.Contains(dl.LastError, "not valid UTF-8") {
				t.Errorf("the archive's parse was dead-lettered: %s", dl.LastError)
			}
			if dl.Attempts != 1 {
				t.Errorf("dead letter %d (%s) after %d attempts, want 1: poison is not retried: %s", dl.ID, dl.Kind, dl.Attempts, dl.LastError)
			}
		}

		// The badly named file: poison at once, moved to failed/ under
		// its name made UTF-8.
		shown := "r\uFFFDsum\uFFFD.txt"
		dir := filepath.Join(h.dir, pipeline.FailedDir, "inbox", shown)
		f := readFailure(t, dir)
		if f.meta.Stage != pipeline.KindParse || f.err.Attempts != 1 || !strings.Contains(f.err.LastError, "not valid UTF-8") ||
			f.err.BlobPath != "incoming/inbox/"+shown {
			t.Errorf("the badly named file: error.json %+v, stage %s", f.err, f.meta.Stage)
		}
		if b, err := os.ReadFile(filepath.Join(dir, shown)); err != nil || !strings.Contains(string(b), "not UTF-8") {
			t.Errorf("the badly named file is not in failed/: %q, %v", b, err)
		}
		if left := filesUnder(t, filepath.Join(h.dir, pipeline.IncomingDir)); len(left) != 0 {
			t.Errorf("incoming/ still holds %q", left)
		}
	})
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
