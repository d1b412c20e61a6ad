package parse_test

import (
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/parse"
)

// pathological are Markdown sources of about 1 MB that make a reader which
// scans ahead from every opener take quadratic time: brackets, images and
// links that never close, emphasis, code and angle-bracket openers without
// closers, deep block quotes and lists, and nesting.
func pathological() []struct{ name, src string } {
	const n = 1 << 20
	rep := func(s string) string { return strings.Repeat(s, n/len(s)) }
	var lines strings.Builder
	for i := 0; lines.Len() < n; i++ {
		lines.WriteString(strings.Repeat(" ", 2*(i%500)) + "- item\n")
	}
	return []struct{ name, src string }{
		{"[", rep("[")},
		{"![", rep("![")},
		{"[a](", rep("[a](")},
		{"[](", rep("[](")},
		{"[x][", rep("[x][")},
		{"](", rep("](")},
		{"*", rep("*")},
		{"_", rep("_")},
		{"*a_", rep("*a_")},
		{"a *b", rep("a *b ")},
		{"**_", rep("**_")},
		{"~~a", rep("~~a ")},
		{"`", rep("`")},
		{"``a`", rep("``a`")},
		{"\\`", rep("\\``")},
		{"<", rep("<")},
		{"<a", rep("<a ")},
		{"<!--", rep("a <!--")},
		{"&#", rep("&#")},
		{"> nested quotes", rep("> ")},
		{"> quote lines", rep(">\n")},
		{"deep quote, lazy lines", strings.Repeat("> ", n/4) + "a\n" + strings.Repeat("b\n", n/4)},
		{"- nested markers", rep("- ")},
		{"- list lines", rep("-\n")},
		{"1. nested markers", rep("1. ")},
		{"indented list", lines.String()},
		{"nested links", strings.Repeat("[", n/8) + "a" + strings.Repeat("](u)", n/8)},
		{"nested emphasis", strings.Repeat("*a ", n/6) + strings.Repeat("b* ", n/6)},
		{"|", rep("|")},
	}
}

// TestMarkdownIsLinear: each of the pathological sources parses in well
// under a second on its own (see BenchmarkMarkdownPathological); the bound
// here is generous, for the race detector on a loaded machine, and a
// quadratic reader misses it by minutes.
func TestMarkdownIsLinear(t *testing.T) {
	t.Parallel()
	const bound = 10 * time.Second
	for _, c := range pathological() {
		start := time.Now()
		docs, err := parse.File("a.md", []byte(c.src))
		took := time.Since(start)
		if err != nil || len(docs) != 1 {
			t.Fatalf("%s: %v", c.name, err)
		}
		t.Logf("%s: %v", c.name, took)
		if took > bound {
			t.Errorf("%s: %d bytes took %v, more than %v", c.name, len(c.src), took, bound)
		}
	}
}

// BenchmarkMarkdownPathological reports the time of each pathological
// source: go test -run X -bench MarkdownPathological -benchtime 1x ./parse
func BenchmarkMarkdownPathological(b *testing.B) {
	for _, c := range pathological() {
		data := []byte(c.src)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := parse.File("a.md", data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
