package extract_test

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/weirhq/weir/ingest/extract"
)

// BenchmarkLocal20MB measures what the local extractor costs on a 20 MB
// text, in time and in allocated bytes (B/op).
func BenchmarkLocal20MB(b *testing.B) {
	var sb strings.Builder
	for sb.Len() < 20<<20 {
		sb.WriteString(english)
		sb.WriteString("\n\n")
		sb.WriteString(french)
		sb.WriteString("\n\n")
	}
	in := extract.Input{Text: sb.String()}
	b.ReportAllocs()
	b.SetBytes(int64(len(in.Text)))
	for b.Loop() {
		if _, err := extract.NewLocal().Extract(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}

// Regression: the local extractor allocated 25 times the size of its text
// (the words, the terms, the paragraphs, the runes of each); now what it
// keeps is the vocabulary, far less than the text.
func TestLocalAllocatesLittle(t *testing.T) {
	var sb strings.Builder
	for sb.Len() < 4<<20 {
		sb.WriteString(english + "\n\n" + french + "\n\n")
	}
	in := extract.Input{Text: sb.String()}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := extract.NewLocal().Extract(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	n := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d bytes allocated for %d", n, len(in.Text))
	if n > uint64(len(in.Text))/8 {
		t.Errorf("%d bytes allocated for a text of %d, more than an eighth of it", n, len(in.Text))
	}
}
