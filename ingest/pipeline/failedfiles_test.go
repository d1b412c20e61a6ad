package pipeline_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/pipeline"
)

// TestErrorJSONHasTheDesignShape reads error.json of a failed file and of
// an archive's failed message as raw JSON: each carries the design's five
// fields (spec 01, dead-letter handling) under its names and in its
// formats: jobId the SHA-256 job id of the file (hex, not the engine's
// row id), blobPath incoming/{path}, attempts a number, lastError a
// string, failedAt RFC 3339 in UTC to the second.
func TestErrorJSONHasTheDesignShape(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	bad := []byte(`{"not": "a document weir reads"}`)
	drop(t, h.dir, "inbox/data.json", bad)
	archive := mbox("Saturn") // and a message with no words
	archive = append(archive, []byte("From x@example.org Tue Feb  4 09:08:00 2025\nFrom: x@example.org\nSubject: ...\n\n... --- ...\n\n")...)
	drop(t, h.dir, "lists/club.mbox", archive)
	h.start()
	h.waitFailures("both failures written", 0, 2)
	hexID := regexp.MustCompile(`^[0-9a-f]{64}$`)
	utcSecond := regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$`)
	for _, tc := range []struct {
		dir, jobID, blobPath, part string
	}{
		{"inbox/data.json", pipeline.FileID("inbox/data.json", pipeline.ETag(bad)), "incoming/inbox/data.json", ""},
		{"lists/club.mbox#2", pipeline.FileID("lists/club.mbox", pipeline.ETag(archive)), "incoming/lists/club.mbox", "#2"},
	} {
		b, err := os.ReadFile(filepath.Join(h.dir, pipeline.FailedDir, filepath.FromSlash(tc.dir), "error.json"))
		if err != nil {
			t.Fatal(err)
		}
		var raw map[string]any
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatalf("%s: %v", tc.dir, err)
		}
		jobID, _ := raw["jobId"].(string)
		blobPath, _ := raw["blobPath"].(string)
		attempts, isNumber := raw["attempts"].(float64)
		lastError, _ := raw["lastError"].(string)
		failedAt, _ := raw["failedAt"].(string)
		if !hexID.MatchString(jobID) || jobID != tc.jobID {
			t.Errorf("%s: jobId = %#v, want the file's SHA-256 job id %s", tc.dir, raw["jobId"], tc.jobID)
		}
		if blobPath != tc.blobPath {
			t.Errorf("%s: blobPath = %#v, want %q", tc.dir, raw["blobPath"], tc.blobPath)
		}
		if !isNumber || attempts != 1 {
			t.Errorf("%s: attempts = %#v, want the number 1", tc.dir, raw["attempts"])
		}
		if lastError == "" {
			t.Errorf("%s: lastError = %#v, want the error", tc.dir, raw["lastError"])
		}
		if at, err := time.Parse(time.RFC3339, failedAt); !utcSecond.MatchString(failedAt) || err != nil || time.Since(at) > time.Minute {
			t.Errorf("%s: failedAt = %#v, want a recent time like 2026-01-21T15:30:00Z (%v)", tc.dir, raw["failedAt"], err)
		}
		if part, _ := raw["part"].(string); part != tc.part {
			t.Errorf("%s: part = %#v, want %q", tc.dir, raw["part"], tc.part)
		}
		if _, ok := raw["engineJobId"].(float64); !ok {
			t.Errorf("%s: engineJobId = %#v, want the engine's job id", tc.dir, raw["engineJobId"])
		}
	}
}

// TestCopiesAreNoMoreReadableThanTheirSource ingests files of mode 0640
// and 0600, under the usual umask (022): their copies in incoming/ and
// processed/, the originals moved to failed/, an archive's failed message
// and every error.json and metadata.json are no more readable than the
// source they come from.
func TestCopiesAreNoMoreReadableThanTheirSource(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	h := newHarness(t, nil)
	src := t.TempDir()
	files := map[string]struct {
		content []byte
		mode    os.FileMode
	}{
		"good.txt":  {readCorpus(t, "notes/chess-doubled-pawns.txt"), 0o640},
		"data.json": {[]byte(`{"not": "a document weir reads"}`), 0o640},
		"club.mbox": {append(mbox("Saturn"), []byte("From x@example.org Tue Feb  4 09:08:00 2025\nFrom: x@example.org\nSubject: ...\n\n... --- ...\n\n")...), 0o600},
	}
	var paths []string
	for name, f := range files {
		p := filepath.Join(src, name)
		if err := os.WriteFile(p, f.content, f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, f.mode); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	if _, _, err := h.svc.Ingest(t.Context(), "home", paths); err != nil {
		t.Fatal(err)
	}
	for name, f := range files {
		if fi, err := os.Stat(filepath.Join(h.dir, pipeline.IncomingDir, "home", name)); err != nil || fi.Mode().Perm() != f.mode {
			t.Errorf("incoming/home/%s: mode %v (%v), want %#o as its source", name, fi.Mode().Perm(), err, f.mode)
		}
	}
	h.start()
	h.waitFailures("the files to end", 3, 2)
	want := map[string]os.FileMode{
		"processed/home/good.txt":               0o640,
		"processed/home/club.mbox":              0o600,
		"failed/home/data.json/data.json":       0o640,
		"failed/home/data.json/error.json":      0o640,
		"failed/home/data.json/metadata.json":   0o640,
		"failed/home/club.mbox#2/message.txt":   0o600,
		"failed/home/club.mbox#2/error.json":    0o600,
		"failed/home/club.mbox#2/metadata.json": 0o600,
		"failed/home/club.mbox#2":               0o700,
		"failed/home/data.json":                 0o750,
	}
	for rel, mode := range want {
		fi, err := os.Stat(filepath.Join(h.dir, filepath.FromSlash(rel)))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		if got := fi.Mode().Perm(); got != mode {
			t.Errorf("%s has mode %#o, want %#o", rel, got, mode)
		}
	}
}
