package blob_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/ingest/blob"
	"github.com/weirhq/weir/internal/blobtest"
)

// stores are the stores each test runs on: a folder (file://), a
// container of Azurite's (azblob://) and a bucket of s3rver's (s3://).
func stores(t *testing.T) map[string]func(t *testing.T, prefix string) *blob.Bucket {
	return map[string]func(t *testing.T, prefix string) *blob.Bucket{
		"file": func(t *testing.T, prefix string) *blob.Bucket {
			dir := filepath.Join(t.TempDir(), prefix)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			return open(t, (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String())
		},
		"azblob": func(t *testing.T, prefix string) *blob.Bucket {
			return open(t, blobtest.Azure(t).Prefix(prefix))
		},
		"s3": func(t *testing.T, prefix string) *blob.Bucket {
			return open(t, blobtest.S3(t).Prefix(prefix))
		},
	}
}

func open(t *testing.T, u string) *blob.Bucket {
	t.Helper()
	br, err := blob.NewBreaker()
	if err != nil {
		t.Fatal(err)
	}
	b, err := blob.Open(context.Background(), "-test-url", u, br)
	if err != nil {
		t.Fatalf("Open %s: %v", u, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func read(t *testing.T, b *blob.Bucket, key string) (string, error) {
	t.Helper()
	r, err := b.NewReader(context.Background(), key, "")
	if err != nil {
		return "", err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	return string(data), err
}

// A move copies the version asked for and deletes it; a blob that is
// another version by then stays where it is.
func TestMoveOnlyTheVersionAskedFor(t *testing.T) {
	t.Parallel()
	for name, mk := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			src, dst := mk(t, "incoming/"), mk(t, "processed/")
			if err := src.WriteAll(ctx, "src/a.txt", []byte("version one"), nil); err != nil {
				t.Fatal(err)
			}
			v1, err := src.Attributes(ctx, "src/a.txt")
			if err != nil || v1.ETag == "" || v1.Size != int64(len("version one")) {
				t.Fatalf("Attributes = %+v, %v; want an ETag and the size", v1, err)
			}
			listed := 0
			if err := src.List(ctx, func(a blob.Attrs) error {
				if a.Key == "src/a.txt" {
					listed++
				}
				return nil
			}); err != nil || listed != 1 {
				t.Fatalf("List found src/a.txt %d times, %v", listed, err)
			}
			if err := src.WriteAll(ctx, "src/a.txt", []byte("version two, longer"), nil); err != nil {
				t.Fatal(err)
			}
			// The ETag of the first version: the second stays.
			moved, err := blob.Move(ctx, src, "src/a.txt", dst, "src/a.txt", v1.ETag)
			if err != nil || moved {
				t.Fatalf("Move of a version overwritten = %v, %v; want false", moved, err)
			}
			if got, err := read(t, src, "src/a.txt"); err != nil || got != "version two, longer" {
				t.Fatalf("src holds %q, %v; want the second version", got, err)
			}
			if err := src.Delete(ctx, "src/a.txt", v1.ETag); !errors.Is(err, blob.ErrChanged) {
				t.Fatalf("Delete of the first version = %v; want ErrChanged", err)
			}
			v2, err := src.Attributes(ctx, "src/a.txt")
			if err != nil || v2.ETag == v1.ETag {
				t.Fatalf("Attributes = %+v, %v; want a new ETag", v2, err)
			}
			moved, err = blob.Move(ctx, src, "src/a.txt", dst, "src/a.txt", v2.ETag)
			if err != nil || !moved {
				t.Fatalf("Move = %v, %v; want moved", moved, err)
			}
			if got, err := read(t, dst, "src/a.txt"); err != nil || got != "version two, longer" {
				t.Fatalf("dst holds %q, %v", got, err)
			}
			if _, err := src.Attributes(ctx, "src/a.txt"); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("src after the move: %v; want fs.ErrNotExist", err)
			}
			if a, err := dst.Attributes(ctx, "src/a.txt"); err != nil || a.Meta[blob.ETagMeta] != v2.ETag {
				t.Fatalf("the copy's metadata = %v, %v; want %s = %s", a.Meta, err, blob.ETagMeta, v2.ETag)
			}
			// A reader of a version that is gone is refused.
			if _, err := dst.NewReader(ctx, "src/a.txt", v1.ETag); !errors.Is(err, blob.ErrChanged) {
				t.Fatalf("NewReader of another version = %v; want ErrChanged", err)
			}
			if err := dst.DeletePrefix(ctx, "src/"); err != nil {
				t.Fatal(err)
			}
			if _, err := dst.Attributes(ctx, "src/a.txt"); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("after DeletePrefix: %v; want fs.ErrNotExist", err)
			}
		})
	}
}

// A URL refused at the opening names the setting and what is wrong.
func TestOpenRefusesBadURLs(t *testing.T) {
	t.Parallel()
	az := blobtest.Azure(t)
	missing := strings.Replace(az.URL(), az.Name, az.Name+"-missing", 1)
	br, err := blob.NewBreaker()
	if err != nil {
		t.Fatal(err)
	}
	for u, want := range map[string]string{
		"ftp://host/x": `unknown scheme "ftp"`,
		"incoming":     `unknown scheme ""`,
		"file://" + filepath.Join(t.TempDir(), "x"): "",
		missing: "does not exist",
	} {
		_, err := blob.Open(context.Background(), "-incoming-url", u, br)
		var se *blob.SettingError
		if !errors.As(err, &se) || se.Setting != "-incoming-url" || !strings.HasPrefix(err.Error(), "-incoming-url: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("Open %s = %v; want a *SettingError naming -incoming-url and saying %q", u, err, want)
		}
	}
}
