package parse_test

import (
	"encoding/base64"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/weirhq/weir/ingest/corpusgen"
	"github.com/weirhq/weir/ingest/parse"
)

// corpusMarkdown is n bytes (about) of Markdown with headings, emphasis,
// links, lists, code and quotes.
func corpusMarkdown(n int) []byte {
	block := "## Section %d\n\nThe *reservoir* levels dropped **again** this week; see [the report](https://example.com/r/%d) and `gate_%d`.\n\n" +
		"- Engineers inspected the gates\n- Two of them were _leaking_\n\n> The board will replace the gates before the rainy season.\n\n" +
		"```\ncode line %d\n```\n\n"
	var b strings.Builder
	b.Grow(n + 400)
	b.WriteString("# Field notes\n\n")
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, block, i, i, i, i)
	}
	return []byte(b.String())
}

// corpusMbox is n bytes (about) of mbox: plain, quoted-printable and
// base64 messages in turn.
func corpusMbox(n int) []byte {
	body := string(corpusgen.Prose(2000))
	b64 := base64.StdEncoding.EncodeToString([]byte(body))
	var lines []string
	for len(b64) > 76 {
		lines = append(lines, b64[:76])
		b64 = b64[76:]
	}
	b64 = strings.Join(append(lines, b64), "\n")
	var b strings.Builder
	b.Grow(n + 4000)
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "From sender%d@example.com Mon Jan 19 09:00:00 2026\nFrom: Sender <s%d@example.com>\nSubject: Message %d\nDate: Mon, 19 Jan 2026 09:00:00 +0100\nMessage-ID: <m%d@example.com>\n", i, i, i, i)
		switch i % 3 {
		case 0:
			fmt.Fprintf(&b, "Content-Type: text/plain; charset=utf-8\n\n%s\n\n", body)
		case 1:
			fmt.Fprintf(&b, "Content-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: quoted-printable\n\n%s\n\n", strings.ReplaceAll(body, "é", "=E9"))
		case 2:
			fmt.Fprintf(&b, "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\n%s\n\n", b64)
		}
	}
	return []byte(b.String())
}

const twentyMB = 20 << 20

// BenchmarkFile20MB measures what parsing a 20 MB file costs, in time and
// in allocated bytes (B/op), per format.
func BenchmarkFile20MB(b *testing.B) {
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"a.txt", corpusgen.Prose(twentyMB)},
		{"a.md", corpusMarkdown(twentyMB)},
		{"a.mbox", corpusMbox(twentyMB)},
	} {
		b.Run(parse.Format(c.name), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.data)))
			for b.Loop() {
				if _, err := parse.File(c.name, c.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Regression: parsing a Markdown file allocated 16 times its size (a rune
// and a flag per byte, a line list, the lines again), an mbox 9 times (every
// message copied, read again, decoded through intermediate buffers).
// Parsing now allocates at most 4 times the file's size (the decoded text,
// the output and buffers), whatever the format.
func TestParseAllocatesLittle(t *testing.T) {
	const size = 4 << 20
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"a.txt", corpusgen.Prose(size)},
		{"a.md", corpusMarkdown(size)},
		{"a.mbox", corpusMbox(size)},
	} {
		var err error
		n := allocated(func() { _, err = parse.File(c.name, c.data) })
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes allocated for %d", c.name, n, len(c.data))
		if n > 4*uint64(len(c.data)) {
			t.Errorf("%s: %d bytes allocated to parse %d, more than 4 times", c.name, n, len(c.data))
		}
	}
}
