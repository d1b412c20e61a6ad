package parse

// This file keeps the inline reader of the Markdown reader weir had before
// it was made linear: its quadratic scans (a link's text read again for
// each nested '[', a search to the end of the line for each '[', '(' and
// '<', the stack of emphasis openers searched from the top for each
// closer) are gone from markdown.go, and FuzzMarkdownMatchesReference
// checks that the linear reader gives the same text on everything the old
// one read. The block-level helpers (fences, headings, thematic breaks,
// reference definitions, block markers, front matter) did not change: the
// old reader's loop calls markdown.go's, so that the test compares the one
// part that was rewritten, and no code stands here twice.

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// refMarkdown returns the title and the stripped text of a Markdown source
// whose line ends are LF.
func refMarkdown(src string) (title, text string) {
	src, frontTitle := frontMatter(src)
	lines := strings.Split(src, "\n")
	out := make([]string, 0, len(lines))
	haveTitle := false
	setTitle := func(s string) {
		if !haveTitle && strings.TrimSpace(s) != "" {
			title, haveTitle = strings.TrimSpace(s), true
		}
	}
	var (
		fence     byte // '`' or '~' inside a code fence, else 0
		fenceLen  int
		paragraph bool // the last line out is paragraph text (a setext candidate)
	)
	for _, line := range lines {
		if fence != 0 {
			if c, n, rest := fenceOf(line); c == fence && n >= fenceLen && strings.TrimSpace(rest) == "" {
				fence = 0
				paragraph = false
				continue
			}
			out = append(out, line)
			continue
		}
		if c, n, _ := fenceOf(line); c != 0 {
			fence, fenceLen = c, n
			paragraph = false
			continue
		}
		trimmed := strings.TrimSpace(line)
		if paragraph && setextUnderline(trimmed) {
			setTitle(out[len(out)-1])
			paragraph = false
			continue
		}
		if thematicBreak(trimmed) {
			paragraph = false
			continue
		}
		if h, ok := atxHeading(line); ok {
			h = refInline(h)
			setTitle(h)
			out = append(out, h)
			paragraph = false
			continue
		}
		if referenceDefinition(trimmed) {
			paragraph = false
			continue
		}
		body := blockMarkers(line)
		if strings.TrimSpace(body) == "" {
			out = append(out, "")
			paragraph = false
			continue
		}
		out = append(out, refInline(body))
		// Only an unindented, unquoted, unbulleted line can be the text of
		// a setext heading.
		paragraph = body == line && !strings.HasPrefix(line, "    ")
	}
	if !haveTitle {
		title = frontTitle
	}
	return title, strings.TrimSpace(strings.Join(out, "\n"))
}

// refInline strips refInline markup from one line of Markdown: code spans,
// escapes, links, images, autolinks and emphasis.
func refInline(s string) string {
	var p refPieces
	p.scan(s)
	return p.refEmphasis()
}

// refPieces is a line being stripped: its runes, and for each whether it came
// from markup-free text (code, an escape, a URL), which emphasis must not
// touch.
type refPieces struct {
	r         []rune
	protected []bool
}

func (p *refPieces) add(s string, protected bool) {
	for _, c := range s {
		p.r = append(p.r, c)
		p.protected = append(p.protected, protected)
	}
}

func (p *refPieces) scan(s string) {
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s) && isASCIIPunct(s[i+1]):
			p.add(s[i+1:i+2], true)
			i += 2
		case c == '`':
			n := refRun(s, i, '`')
			if end := refClosingTicks(s, i+n, n); end >= 0 {
				code := s[i+n : end]
				if len(code) >= 2 && code[0] == ' ' && code[len(code)-1] == ' ' && strings.TrimSpace(code) != "" {
					code = code[1 : len(code)-1]
				}
				p.add(code, true)
				i = end + n
				continue
			}
			p.add(s[i:i+n], true)
			i += n
		case c == '!' && i+1 < len(s) && s[i+1] == '[':
			if text, next, ok := refLink(s, i+1); ok {
				p.add(refInline(text), true)
				i = next
				continue
			}
			p.add("!", false)
			i++
		case c == '[':
			if text, next, ok := refLink(s, i); ok {
				p.add(refInline(text), true)
				i = next
				continue
			}
			p.add("[", false)
			i++
		case c == '<':
			if end := strings.IndexByte(s[i:], '>'); end > 0 && autolink(s[i+1:i+end]) {
				p.add(s[i+1:i+end], true)
				i += end + 1
				continue
			}
			p.add("<", false)
			i++
		default:
			_, size := utf8.DecodeRuneInString(s[i:])
			p.add(s[i:i+size], false)
			i += size
		}
	}
}

func refRun(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// refClosingTicks returns the index of the next refRun of exactly n backticks at
// or after from, or -1.
func refClosingTicks(s string, from, n int) int {
	for i := from; i < len(s); {
		j := strings.IndexByte(s[i:], '`')
		if j < 0 {
			return -1
		}
		i += j
		m := refRun(s, i, '`')
		if m == n {
			return i
		}
		i += m
	}
	return -1
}

// refLink reads "[text](destination)" or "[text][label]" at s[i] == '[' and
// returns text and the index after the refLink.
func refLink(s string, i int) (text string, next int, ok bool) {
	depth := 0
	end := -1
scan:
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '[':
			depth++
		case ']':
			if depth--; depth == 0 {
				end = j
				break scan
			}
		}
	}
	if end < 0 || end+1 >= len(s) {
		return "", 0, false
	}
	text = s[i+1 : end]
	switch s[end+1] {
	case '(':
		depth = 0
		for j := end + 1; j < len(s); j++ {
			switch s[j] {
			case '\\':
				j++
			case '(':
				depth++
			case ')':
				if depth--; depth == 0 {
					return text, j + 1, true
				}
			}
		}
	case '[':
		if k := strings.IndexByte(s[end+2:], ']'); k >= 0 {
			return text, end + 2 + k + 1, true
		}
	}
	return "", 0, false
}

// refDelim is a refRun of emphasis delimiters.
type refDelim struct {
	at, n             int
	c                 rune
	canOpen, canClose bool
	removed           bool
}

// emphasis removes matched pairs of emphasis delimiter runs (*, _, ~~) and
// returns the text.
func (p *refPieces) refEmphasis() string {
	var ds []refDelim
	r := p.r
	for i := 0; i < len(r); {
		c := r[i]
		if p.protected[i] || (c != '*' && c != '_' && c != '~') {
			i++
			continue
		}
		j := i
		for j < len(r) && r[j] == c && !p.protected[j] {
			j++
		}
		n := j - i
		if c == '~' && n != 2 {
			i = j
			continue
		}
		prev, next := ' ', ' '
		if i > 0 {
			prev = r[i-1]
		}
		if j < len(r) {
			next = r[j]
		}
		d := refDelim{at: i, n: n, c: c, canOpen: !unicode.IsSpace(next), canClose: !unicode.IsSpace(prev)}
		if c == '_' && isWordRune(prev) && isWordRune(next) {
			d.canOpen, d.canClose = false, false // snake_case
		}
		ds = append(ds, d)
		i = j
	}
	var stack []int
	for k := range ds {
		d := &ds[k]
		if d.canClose {
			matched := false
			for s := len(stack) - 1; s >= 0; s-- {
				o := &ds[stack[s]]
				if o.c == d.c && o.n == d.n {
					o.removed, d.removed = true, true
					stack = stack[:s]
					matched = true
					break
				}
			}
			if matched {
				continue
			}
		}
		if d.canOpen {
			stack = append(stack, k)
		}
	}
	drop := make([]bool, len(r))
	for _, d := range ds {
		if d.removed {
			for i := d.at; i < d.at+d.n; i++ {
				drop[i] = true
			}
		}
	}
	var b strings.Builder
	b.Grow(len(r))
	for i, c := range r {
		if !drop[i] {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// FuzzMarkdownMatchesReference: on input without the syntax the old reader
// did not know (HTML, character references), the linear reader gives the
// same title and text as the old one.
func FuzzMarkdownMatchesReference(f *testing.F) {
	for _, s := range []string{
		"# Quarterly *report*\n\nSome **bold** and _italic_ text.\n",
		"**[Go *wiki*](https://en.wikipedia.org/wiki/Go_(programming_language))**",
		"See [the docs](u \"D\") and ![a chart](c.png) or [ref][1].\n\n[1]: https://x",
		"Call `foo_bar(*p)` and ``a ` b``.", "a *b **c* d** e", "[a [b](c] d)", "*[a*](u)", "x_[*b*](u)_y",
		"\\``a` `b``", "~~a~~ ~b~ ~~~c~~~", "[[[a]]](b)", "[a](b(c)d) [e][f] [g]", "***a*** __b__ _c_d_",
		"> quoted *line*\n> > nested\n\n- one\n* two\n+ three\n1. first\n\n---\n***\nend",
		"---\ntitle: t\n---\nx\n===\n> - [![i](j)][k]\n\\*a_b_c*", "```\ncode *x*\nmore",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 4096 || strings.ContainsAny(src, "<&") || !utf8.ValidString(src) {
			return
		}
		title, text := markdown(src)
		wantTitle, wantText := refMarkdown(src)
		if title != wantTitle || text != wantText {
			t.Fatalf("markdown(%q)\n= %q, %q\nwant %q, %q", src, title, text, wantTitle, wantText)
		}
	})
}
