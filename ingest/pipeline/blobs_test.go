package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/blob"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/internal/blobtest"
	"github.com/weirhq/weir/internal/faultproxy"
	"github.com/weirhq/weir/internal/testenv"
)

// azureBlobs opens incoming/, processed/ and failed/ as folders of a
// container of the test's own on Azurite.
func azureBlobs(t *testing.T) *pipeline.Blobs {
	t.Helper()
	return blobsOf(t, blobtest.Azure(t))
}

// blobsOf opens incoming/, processed/ and failed/ as folders of c.
func blobsOf(t *testing.T, c blobtest.Container) *pipeline.Blobs {
	t.Helper()
	br, err := blob.NewBreaker()
	if err != nil {
		t.Fatal(err)
	}
	open := func(prefix string) *blob.Bucket {
		b, err := blob.Open(context.Background(), "test", c.Prefix(prefix), br)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	return &pipeline.Blobs{Incoming: open("incoming/"), Processed: open("processed/"), Failed: open("failed/")}
}

func upload(t *testing.T, b *blob.Bucket, key string, content []byte) {
	t.Helper()
	if err := b.WriteAll(context.Background(), key, content, nil); err != nil {
		t.Fatalf("upload %s: %v", key, err)
	}
}

// keys lists the keys of b, sorted.
func keys(t *testing.T, b *blob.Bucket) []string {
	t.Helper()
	var out []string
	if err := b.List(context.Background(), func(a blob.Attrs) error {
		out = append(out, a.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func readBlob(t *testing.T, b *blob.Bucket, key string) string {
	t.Helper()
	r, err := b.NewReader(context.Background(), key, "")
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// Blobs put into a container (Azure's, S3's) are ingested, and moved to
// the processed/ folder; a poison blob is written to failed/ in the data
// directory's layout: {source}/{filename}/ with the original, error.json
// and metadata.json. The job id is SHA-256 of the container, the path
// and the store's ETag.
func TestBlobsIngested(t *testing.T) {
	t.Parallel()
	for name, mk := range map[string]func(testing.TB) blobtest.Container{"azblob": blobtest.Azure, "s3": blobtest.S3} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testBlobsIngested(t, blobsOf(t, mk(t)))
		})
	}
}

func testBlobsIngested(t *testing.T, bl *pipeline.Blobs) {
	h := newHarness(t, func(c *pipeline.Config) { c.Blobs = bl })
	good := readCorpus(t, "notes/chess-doubled-pawns.txt")
	upload(t, bl.Incoming, "notes/chess.txt", good)
	upload(t, bl.Incoming, "notes/.hidden.txt", []byte("a hidden file is not read"))
	upload(t, bl.Incoming, "inbox/poison.txt", []byte("\x00 a NUL byte, which weir refuses"))
	etag, err := bl.Incoming.Attributes(context.Background(), "notes/chess.txt")
	if err != nil {
		t.Fatal(err)
	}
	h.start()
	h.waitFailures("the good blob processed and the poison failed", 2, 1)

	if got := keys(t, bl.Incoming); !slices.Equal(got, []string{"notes/.hidden.txt"}) {
		t.Errorf("incoming/ holds %v; want the hidden blob only", got)
	}
	if got := keys(t, bl.Processed); !slices.Equal(got, []string{"notes/chess.txt"}) {
		t.Errorf("processed/ holds %v", got)
	}
	if got := readBlob(t, bl.Processed, "notes/chess.txt"); got != string(good) {
		t.Errorf("processed/notes/chess.txt holds %d bytes, want the original's %d", len(got), len(good))
	}
	d, err := h.svc.Document(context.Background(), pipeline.DocumentID("notes/chess.txt", ""))
	if err != nil || d.Status != "saved" || d.FileID != pipeline.FileID("notes/chess.txt", etag.ETag) {
		t.Fatalf("Document = %+v, %v; want saved, with the file id of the store's ETag", d, err)
	}
	if hits, err := h.svc.Search(context.Background(), "pawns", 5); err != nil || len(hits) != 1 {
		t.Fatalf("search pawns: %v, %v; want 1 hit", hits, err)
	}

	want := []string{"inbox/poison.txt/error.json", "inbox/poison.txt/metadata.json", "inbox/poison.txt/poison.txt"}
	if got := keys(t, bl.Failed); !slices.Equal(got, want) {
		t.Fatalf("failed/ holds %v; want %v", got, want)
	}
	if got := readBlob(t, bl.Failed, "inbox/poison.txt/poison.txt"); got != "\x00 a NUL byte, which weir refuses" {
		t.Errorf("the original in failed/ holds %q", got)
	}
	var ef pipeline.ErrorFile
	if err := json.Unmarshal([]byte(readBlob(t, bl.Failed, "inbox/poison.txt/error.json")), &ef); err != nil {
		t.Fatal(err)
	}
	if ef.BlobPath != "incoming/inbox/poison.txt" || ef.JobID == "" || ef.LastError == "" {
		t.Errorf("error.json = %+v", ef)
	}
	var dir string
	if err := h.db.SQL.QueryRowContext(context.Background(), `SELECT dir FROM ingest_failures`).Scan(&dir); err != nil {
		t.Fatal(err)
	}
	if want := bl.Failed.String() + "/inbox/poison.txt"; dir != want {
		t.Errorf("the failure's folder is recorded as %q, want %q", dir, want)
	}
}

// A blob overwritten while its first version is processed is not moved
// away, nor deleted, with the first: it stays in incoming/ until a scan
// takes it, then replaces the first, and processed/ holds it.
func TestAzureBlobChangedWhileProcessedIsNotLost(t *testing.T) {
	t.Parallel()
	bl := azureBlobs(t)
	gate := gateExtractor{open: make(chan struct{})}
	// One scan at the start, then those the test makes.
	h := newHarness(t, func(c *pipeline.Config) { c.Blobs, c.Extractor, c.WatchEvery = bl, gate, time.Hour })
	v1, v2 := []byte("The first version is about bees."), []byte("The second version is about sourdough.")
	upload(t, bl.Incoming, "src/a.txt", v1)
	h.start()
	waitFor(t, "the first version to be parsed", waitTimeout, func() (bool, string) {
		return count(t, h.db, `SELECT count(*) FROM ingest_documents`) == 1, "not parsed"
	})
	upload(t, bl.Incoming, "src/a.txt", v2) // not scanned yet
	close(gate.open)
	waitFor(t, "the first version settled", waitTimeout, func() (bool, string) { return settled(t, h.db, 1) })
	if got := keys(t, bl.Incoming); !slices.Equal(got, []string{"src/a.txt"}) || readBlob(t, bl.Incoming, "src/a.txt") != string(v2) {
		t.Fatalf("incoming/ holds %v; want the second version, left for the scan", got)
	}
	if _, err := h.svc.Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second version saved and indexed", waitTimeout, func() (bool, string) { return settled(t, h.db, 2) })
	waitFor(t, "the second version in processed/", waitTimeout, func() (bool, string) {
		_, err := bl.Processed.Attributes(context.Background(), "src/a.txt")
		return err == nil && readBlob(t, bl.Processed, "src/a.txt") == string(v2), "not there"
	})
	if left := keys(t, bl.Incoming); len(left) != 0 {
		t.Fatalf("incoming/ holds %v", left)
	}
	d, err := h.svc.Document(context.Background(), pipeline.DocumentID("src/a.txt", ""))
	if err != nil || d.Status != "saved" || d.Body != string(v2) {
		t.Fatalf("Document = %+v, %v; want the second version, saved", d, err)
	}
}

// A blob overwritten after the scan took its first version, before the
// parse read it: the parse of the first version does nothing, and the
// second is ingested.
func TestAzureBlobChangedBeforeItsParse(t *testing.T) {
	t.Parallel()
	bl := azureBlobs(t)
	h := newHarness(t, func(c *pipeline.Config) { c.Blobs = bl })
	upload(t, bl.Incoming, "src/b.txt", []byte("Before: a note on kettles."))
	if _, err := h.svc.Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	upload(t, bl.Incoming, "src/b.txt", []byte("After: a note on teapots."))
	h.start()
	waitFor(t, "the second version processed", waitTimeout, func() (bool, string) {
		_, err := bl.Processed.Attributes(context.Background(), "src/b.txt")
		return err == nil && !errors.Is(err, fs.ErrNotExist), "not in processed/"
	})
	if got := readBlob(t, bl.Processed, "src/b.txt"); got != "After: a note on teapots." {
		t.Fatalf("processed/ holds %q", got)
	}
	d, err := h.svc.Document(context.Background(), pipeline.DocumentID("src/b.txt", ""))
	if err != nil || d.Body != "After: a note on teapots." {
		t.Fatalf("Document = %+v, %v; want the second version", d, err)
	}
	if dls := deadLetters(t, h.db); len(dls) != 0 {
		t.Fatalf("%d dead letters; the first version's parse should have stepped aside", len(dls))
	}
}

// A blob store that goes away after a blob was accepted loses nothing:
// its parse waits behind the breaker without spending attempts (one
// would fail it here), and the blob is processed once the store is back.
func TestAzureOutageLosesNothing(t *testing.T) {
	t.Parallel()
	c := blobtest.Azure(t)
	direct := blobsOf(t, c)
	px, _ := faultproxy.ForURL(t, testenv.Azurite(t))
	bl := blobsOf(t, c.Via(px.Addr()))
	h := newHarness(t, func(cfg *pipeline.Config) {
		cfg.Blobs = bl
		cfg.Parse.MaxAttempts = 1
	})
	upload(t, direct.Incoming, "notes/outage.txt", []byte("A note written before the blob store went away, about lighthouses."))
	if sc, err := h.svc.Scan(context.Background()); err != nil || len(sc) != 1 {
		t.Fatalf("Scan = %v, %v; want the blob enqueued", sc, err)
	}
	px.Cut()
	h.start()
	waitFor(t, "the parse to wait for the store, twice", 60*time.Second, func() (bool, string) {
		n := strings.Count(h.logs.String(), "the blob store is unavailable; the job waits")
		return n >= 2, fmt.Sprintf("%d waits", n)
	})
	px.Restore()
	waitFor(t, "the blob processed once the store is back", 60*time.Second, func() (bool, string) { return settled(t, h.db, 1) })
	if got := keys(t, direct.Processed); !slices.Equal(got, []string{"notes/outage.txt"}) {
		t.Fatalf("processed/ holds %v", got)
	}
	if dls := deadLetters(t, h.db); len(dls) != 0 {
		t.Fatalf("%d dead letters: the outage spent the parse's attempt", len(dls))
	}
	if hits, err := h.svc.Search(context.Background(), "lighthouses", 5); err != nil || len(hits) != 1 {
		t.Fatalf("search lighthouses: %v, %v; want 1 hit", hits, err)
	}
}
