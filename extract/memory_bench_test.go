package extract_test

import (
	"context"
	"strings"
	"testing"

	"github.com/weirhq/weir/extract"
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
