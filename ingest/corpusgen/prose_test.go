package corpusgen_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/weirhq/weir/ingest/corpusgen"
)

// Prose is about the size asked, valid UTF-8, in paragraphs.
func TestProse(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 1000, 1 << 20} {
		p := corpusgen.Prose(n)
		if len(p) < n || len(p) > n+200 || !utf8.Valid(p) {
			t.Errorf("Prose(%d): %d bytes (valid UTF-8 %v), want %d to %d", n, len(p), utf8.Valid(p), n, n+200)
		}
		if n >= 1000 && !strings.Contains(string(p), ".\n\nThe") {
			t.Errorf("Prose(%d) has no paragraphs", n)
		}
	}
}
