package parse

import (
	"html"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// markdown returns the title and the stripped text of a Markdown source
// whose line ends are LF. Its cost is linear in the length of src (n log n
// at worst, for lines full of brackets), whatever the input: no step scans
// ahead more than once from the same place.
func markdown(src string) (title, text string) {
	src, frontTitle := frontMatter(src)
	m := mdWriter{}
	m.out.Grow(len(src))
	for {
		line, rest, ok := strings.Cut(src, "\n")
		m.line(line)
		if !ok {
			break
		}
		src = rest
	}
	m.endHTML()
	title = m.title
	if !m.haveTitle {
		title = frontTitle
	}
	return title, strings.TrimSpace(m.out.String())
}

// mdWriter is the state of a Markdown source being read line by line.
type mdWriter struct {
	out strings.Builder
	// lines is the number of lines written to out; last is where the last
	// one starts.
	lines, last int
	title       string
	haveTitle   bool

	fence     byte // '`' or '~' inside a code fence, else 0
	fenceLen  int
	paragraph bool // the last line out is paragraph text (a setext candidate)

	// html is the raw HTML block being read, htmlEnd what ends it: a
	// string that a line contains, or "" for a blank line.
	html    strings.Builder
	inHTML  bool
	htmlEnd string

	in inliner
}

// emit writes one line of text.
func (m *mdWriter) emit(s string) {
	m.newLine()
	m.out.WriteString(s)
}

func (m *mdWriter) newLine() {
	if m.lines > 0 {
		m.out.WriteByte('\n')
	}
	m.last = m.out.Len()
	m.lines++
}

func (m *mdWriter) setTitle(s string) {
	if !m.haveTitle && strings.TrimSpace(s) != "" {
		m.title, m.haveTitle = strings.TrimSpace(s), true
	}
}

// line reads one line of the source.
func (m *mdWriter) line(line string) {
	if m.inHTML {
		if m.htmlEnd == "" && strings.TrimSpace(line) == "" {
			m.endHTML()
			m.emit("")
			return
		}
		m.html.WriteString(line)
		m.html.WriteByte('\n')
		if m.htmlEnd != "" && strings.Contains(strings.ToLower(line), m.htmlEnd) {
			m.endHTML()
		}
		return
	}
	if m.fence != 0 {
		if c, n, rest := fenceOf(line); c == m.fence && n >= m.fenceLen && strings.TrimSpace(rest) == "" {
			m.fence = 0
			m.paragraph = false
			return
		}
		m.emit(line)
		return
	}
	if c, n, _ := fenceOf(line); c != 0 {
		m.fence, m.fenceLen = c, n
		m.paragraph = false
		return
	}
	trimmed := strings.TrimSpace(line)
	if m.paragraph && setextUnderline(trimmed) {
		m.setTitle(m.out.String()[m.last:])
		m.paragraph = false
		return
	}
	if thematicBreak(trimmed) {
		m.paragraph = false
		return
	}
	if h, ok := atxHeading(line); ok {
		h = string(m.in.inline(h))
		m.setTitle(h)
		m.emit(h)
		m.paragraph = false
		return
	}
	if referenceDefinition(trimmed) {
		m.paragraph = false
		return
	}
	if end, ok := htmlBlockStart(line, m.paragraph); ok {
		m.inHTML, m.htmlEnd = true, end
		m.paragraph = false
		m.html.WriteString(line)
		m.html.WriteByte('\n')
		if end != "" && strings.Contains(strings.ToLower(line[strings.IndexByte(line, '<')+1:]), end) {
			m.endHTML()
		}
		return
	}
	body := blockMarkers(line)
	if strings.TrimSpace(body) == "" {
		m.emit("")
		m.paragraph = false
		return
	}
	m.newLine()
	m.out.Write(m.in.inline(body))
	// Only an unindented, unquoted, unbulleted line can be the text of a
	// setext heading.
	m.paragraph = body == line && !strings.HasPrefix(line, "    ")
}

// endHTML writes the text of the HTML block read so far, if any.
func (m *mdWriter) endHTML() {
	if !m.inHTML {
		return
	}
	if t := htmlText(m.html.String()); t != "" {
		m.emit(t)
	}
	m.html.Reset()
	m.inHTML, m.htmlEnd = false, ""
}

// frontMatter cuts a leading YAML front-matter block, "---" to a line "---"
// or "...", from src and returns its "title:" value, if any. A block that is
// not closed is not front matter.
func frontMatter(src string) (body, title string) {
	first, rest, ok := strings.Cut(src, "\n")
	if !ok || strings.TrimSpace(first) != "---" {
		return src, ""
	}
	block := rest
	for len(rest) > 0 {
		line, next, ok := strings.Cut(rest, "\n")
		if l := strings.TrimSpace(line); l == "---" || l == "..." {
			for fl := range strings.Lines(block[:len(block)-len(rest)]) {
				if v, ok := strings.CutPrefix(fl, "title:"); ok {
					title = strings.Trim(strings.TrimSpace(v), `"'`)
					break
				}
			}
			if !ok {
				next = ""
			}
			return next, title
		}
		if !ok {
			break
		}
		rest = next
	}
	return src, "" // not closed: not front matter
}

// fenceOf reports whether line opens or closes a code fence: up to three
// spaces, then three or more backticks or tildes. It returns the fence
// character, the length of its run and what follows it.
func fenceOf(line string) (c byte, n int, rest string) {
	s := strings.TrimLeft(line, " ")
	if len(line)-len(s) > 3 || len(s) < 3 || (s[0] != '`' && s[0] != '~') {
		return 0, 0, ""
	}
	c = s[0]
	for n < len(s) && s[n] == c {
		n++
	}
	if n < 3 || (c == '`' && strings.IndexByte(s[n:], '`') >= 0) {
		return 0, 0, ""
	}
	return c, n, s[n:]
}

func setextUnderline(s string) bool {
	if s == "" {
		return false
	}
	c := s[0]
	return (c == '=' || c == '-') && strings.Trim(s, string(c)) == ""
}

// thematicBreak reports whether s (trimmed) is three or more of the same
// character among - * _, possibly with spaces between.
func thematicBreak(s string) bool {
	if len(s) < 3 || (s[0] != '-' && s[0] != '*' && s[0] != '_') {
		return false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case s[0]:
			n++
		case ' ', '\t':
		default:
			return false
		}
	}
	return n >= 3
}

// atxHeading returns the text of an ATX heading line, "# Title" to
// "###### Title", without its opening and closing #s.
func atxHeading(line string) (string, bool) {
	s := strings.TrimLeft(line, " ")
	if len(line)-len(s) > 3 {
		return "", false
	}
	n := 0
	for n < len(s) && s[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || (n < len(s) && s[n] != ' ' && s[n] != '\t') {
		return "", false
	}
	h := strings.TrimSpace(s[n:])
	// A closing sequence of #s, preceded by a space, is dropped.
	if t := strings.TrimRight(h, "#"); t != h && (t == "" || strings.HasSuffix(t, " ") || strings.HasSuffix(t, "\t")) {
		h = strings.TrimSpace(t)
	}
	return h, true
}

// referenceDefinition reports whether s (trimmed) is a link reference
// definition, "[label]: destination".
func referenceDefinition(s string) bool {
	if !strings.HasPrefix(s, "[") || strings.HasPrefix(s, "[^") { // a footnote is text
		return false
	}
	end := strings.Index(s, "]:")
	return end > 1 && !strings.ContainsAny(s[1:end], "[]") && strings.TrimSpace(s[end+2:]) != ""
}

// blockMarkers strips block-quote markers and a bullet-list marker from the
// start of line.
func blockMarkers(line string) string {
	s := line
	for {
		t := strings.TrimLeft(s, " ")
		if !strings.HasPrefix(t, ">") {
			break
		}
		s = strings.TrimPrefix(t[1:], " ")
	}
	t := strings.TrimLeft(s, " \t")
	if len(t) >= 2 && (t[0] == '-' || t[0] == '*' || t[0] == '+') && (t[1] == ' ' || t[1] == '\t') {
		return strings.TrimLeft(t[2:], " \t")
	}
	return s
}

// htmlBlockNames are the elements whose tag at the start of a line opens an
// HTML block that ends at a blank line (CommonMark's type 6).
var htmlBlockNames = set("address article aside base basefont blockquote body caption center col colgroup dd details dialog dir div dl dt fieldset figcaption figure footer form frame frameset h1 h2 h3 h4 h5 h6 head header hr html iframe legend li link main menu menuitem nav noframes ol optgroup option p param search section summary table tbody td tfoot th thead title tr track ul")

func set(words string) map[string]bool {
	m := make(map[string]bool)
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// htmlBlockStart reports whether line, unindented by more than three
// spaces, opens an HTML block, and returns what ends it: a string a line
// contains (in lower case), or "" for a blank line. These are CommonMark's
// start conditions: script, pre, style and textarea elements, comments,
// processing instructions, declarations, CDATA, the block-level elements of
// htmlBlockNames and, unless it would interrupt a paragraph, any other tag
// alone on its line.
func htmlBlockStart(line string, inParagraph bool) (end string, ok bool) {
	s := strings.TrimLeft(line, " ")
	if len(line)-len(s) > 3 || len(s) < 2 || s[0] != '<' {
		return "", false
	}
	lower := strings.ToLower(s[:min(len(s), 12)])
	for _, raw := range []string{"script", "pre", "style", "textarea"} {
		if rest, ok := strings.CutPrefix(lower[1:], raw); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '>') {
			return "</" + raw + ">", true
		}
	}
	switch {
	case strings.HasPrefix(s, "<!--"):
		return "-->", true
	case strings.HasPrefix(s, "<?"):
		return "?>", true
	case strings.HasPrefix(s, "<![CDATA["):
		return "]]>", true
	case strings.HasPrefix(s, "<!") && len(s) > 2 && isASCIILetter(s[2]):
		return ">", true
	}
	name, closing := s[1:], false
	if name[0] == '/' {
		name, closing = name[1:], true
	}
	n := 0
	for n < len(name) && (isASCIILetter(name[n]) || n > 0 && (name[n] >= '0' && name[n] <= '9' || name[n] == '-')) {
		n++
	}
	if n == 0 {
		return "", false
	}
	rest := name[n:]
	if htmlBlockNames[strings.ToLower(name[:n])] && (rest == "" || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '>' || strings.HasPrefix(rest, "/>")) {
		return "", true
	}
	// Type 7: a complete tag and nothing else on the line.
	if inParagraph {
		return "", false
	}
	t := strings.TrimRight(rest, " \t")
	if !strings.HasSuffix(t, ">") || strings.ContainsAny(t[:len(t)-1], "<>") || (closing && strings.TrimSpace(strings.TrimSuffix(t, ">")) != "") {
		return "", false
	}
	if t != ">" && t != "/>" && t[0] != ' ' && t[0] != '\t' {
		return "", false
	}
	return "", true
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isASCIIPunct(c byte) bool {
	return c >= '!' && c <= '/' || c >= ':' && c <= '@' || c >= '[' && c <= '`' || c >= '{' && c <= '~'
}

func isWordRune(c rune) bool { return unicode.IsLetter(c) || unicode.IsDigit(c) }

// autolink reports whether s, found between < and >, is a URL or an email
// address.
func autolink(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t<") {
		return false
	}
	if i := strings.Index(s, ":"); i > 1 && i < 33 {
		scheme := s[:i]
		for j := 0; j < len(scheme); j++ {
			c := scheme[j]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || j > 0 && (c >= '0' && c <= '9' || c == '+' || c == '.' || c == '-')) {
				return false
			}
		}
		return true
	}
	at := strings.IndexByte(s, '@')
	return at > 0 && at < len(s)-1 && strings.Contains(s[at:], ".")
}

// inlineTag reports whether s, found between < and >, is an HTML start or
// end tag: a name of ASCII letters, digits and '-' starting with a letter,
// optionally "/" before it, then nothing or white space (attributes) or a
// final "/".
func inlineTag(s string) bool {
	s = strings.TrimPrefix(s, "/")
	n := 0
	for n < len(s) && (isASCIILetter(s[n]) || n > 0 && (s[n] >= '0' && s[n] <= '9' || s[n] == '-')) {
		n++
	}
	if n == 0 {
		return false
	}
	rest := s[n:]
	return rest == "" || rest == "/" || rest[0] == ' ' || rest[0] == '\t'
}

// inliner strips the inline markup of one line of Markdown: code spans,
// escapes, entities, links, images, autolinks, inline HTML tags and
// emphasis. Its buffers are kept from line to line.
//
// It reads the line once from left to right. A link's text is read in
// place, as a scope of its own for emphasis, rather than read again. What
// the reading needs to know of the rest of the line (the bracket or
// parenthesis that closes this one, the next '>', the next run of n
// backticks) is indexed once per line, and each question is a binary
// search or a cursor that only moves forward.
type inliner struct {
	s string
	// The positions of [ ( in s with the position of their closing ] ),
	// or -1, in order.
	opens, closes []int32
	openAt        int // the first of opens at or after the reading
	// brackets and parens are the [ and ( not yet closed while indexing,
	// as indexes in opens.
	brackets, parens []int32
	// The positions of ], < and > in s, in order.
	rbrack, lt, gt []int32
	// ticks is the backtick runs of s by length: their start positions, in
	// order; tickAt is how far each list has been consumed.
	ticks  map[int][]int32
	tickAt map[int]int

	out    []byte
	scopes []scope
	stack  []int // the open scopes, innermost last
	delims []delim
	// nDelims is the number of *, _ and ~ in s: the most runs there can be.
	nDelims int
	drop    []bool
	res     []byte
	// open is the stack of open runs of the scope being matched; heads
	// holds, for each character and length, the last run pushed (runs of
	// the same character and length are chained through delim.below);
	// longHeads holds those of runs longer than maxShortRun.
	open      []int32
	heads     [3][maxShortRun + 1]int32
	longHeads map[delimKey]int32
}

// maxShortRun is the longest run of delimiters whose stack head is kept in
// an array rather than a map.
const maxShortRun = 16

// scope is the text of a link (or the line itself), whose emphasis is
// matched within it. Its text is out[start:end].
type scope struct {
	// close is the position in s of the ] that ends it, and next where
	// reading goes on after the link.
	close, next int
	start, end  int
	// first and last are its first and last delimiter runs, -1 if none;
	// its runs are chained through delim.next.
	first, last int32
}

// delim is a run of emphasis delimiters in out.
type delim struct {
	at, n int32
	// next is the next run of its scope, -1 if none; below the open run of
	// the same character and length pushed before it; pos its place in
	// the stack of open runs.
	next, below, pos  int32
	c                 byte
	canOpen, canClose bool
}

type delimKey struct {
	c byte
	n int
}

// index finds the brackets, parentheses, angle brackets and backtick runs
// of s.
func (p *inliner) index(s string) {
	p.s = s
	p.opens, p.closes, p.openAt = p.opens[:0], p.closes[:0], 0
	p.rbrack, p.lt, p.gt = p.rbrack[:0], p.lt[:0], p.gt[:0]
	p.nDelims = 0
	if p.ticks == nil {
		p.ticks, p.tickAt = make(map[int][]int32), make(map[int]int)
	}
	clear(p.ticks)
	clear(p.tickAt)
	if n := strings.Count(s, "[") + strings.Count(s, "("); n > 0 {
		p.opens, p.closes = slices.Grow(p.opens, n), slices.Grow(p.closes, n)
	}
	brackets, parens := p.brackets[:0], p.parens[:0]
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			i++ // as a link's text is read: the next byte is escaped
			continue
		case '[', '(':
			if c == '[' {
				brackets = append(brackets, int32(len(p.opens)))
			} else {
				parens = append(parens, int32(len(p.opens)))
			}
			p.opens = append(p.opens, int32(i))
			p.closes = append(p.closes, -1)
		case ']':
			if n := len(brackets); n > 0 {
				p.closes[brackets[n-1]] = int32(i)
				brackets = brackets[:n-1]
			}
		case ')':
			if n := len(parens); n > 0 {
				p.closes[parens[n-1]] = int32(i)
				parens = parens[:n-1]
			}
		}
	}
	p.brackets, p.parens = brackets, parens
	// The searches for ], < and > and backtick runs ignore escapes, as the
	// code-span and autolink syntax do.
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ']':
			p.rbrack = append(p.rbrack, int32(i))
		case '<':
			p.lt = append(p.lt, int32(i))
		case '>':
			p.gt = append(p.gt, int32(i))
		case '`':
			n := run(s, i, '`')
			p.ticks[n] = append(p.ticks[n], int32(i))
			i += n - 1
		case '*', '_', '~':
			p.nDelims++
		}
	}
}

// closing returns the position of the ] or ) that closes the [ or ( at i,
// or -1. The reading asks for the [ it is at, so a cursor that moves with
// it answers those; a ( further on is searched for.
func (p *inliner) closing(i int) int {
	for p.openAt < len(p.opens) && int(p.opens[p.openAt]) < i {
		p.openAt++
	}
	if p.openAt < len(p.opens) && int(p.opens[p.openAt]) == i {
		return int(p.closes[p.openAt])
	}
	k, ok := slices.BinarySearch(p.opens, int32(i))
	if !ok {
		return -1
	}
	return int(p.closes[k])
}

// nextOf returns the first position at or after i in ps, or -1.
func nextOf(ps []int32, i int) int {
	k, _ := slices.BinarySearch(ps, int32(i))
	if k == len(ps) {
		return -1
	}
	return int(ps[k])
}

// closingTicks returns the start of the first run of exactly n backticks
// after i and before limit, or -1. Its calls come with i increasing.
func (p *inliner) closingTicks(i, n, limit int) int {
	runs := p.ticks[n]
	k := p.tickAt[n]
	for k < len(runs) && int(runs[k]) <= i {
		k++
	}
	p.tickAt[n] = k
	if k < len(runs) && int(runs[k]) < limit {
		return int(runs[k])
	}
	return -1
}

// link reads "[text](destination)" or "[text][label]" at s[i] == '[' within
// the current scope, which ends before limit, and returns where its text
// ends (the closing ]) and where the link ends.
func (p *inliner) link(i, limit int) (end, next int, ok bool) {
	end = p.closing(i)
	if end < 0 || end+1 >= limit {
		return 0, 0, false
	}
	switch p.s[end+1] {
	case '(':
		if k := p.closing(end + 1); k >= 0 && k < limit {
			return end, k + 1, true
		}
	case '[':
		if k := nextOf(p.rbrack, end+2); k >= 0 && k < limit {
			return end, k + 1, true
		}
	}
	return 0, 0, false
}

// inline strips inline markup from one line. The result is valid until
// the next call.
func (p *inliner) inline(s string) []byte {
	p.index(s)
	p.out = p.out[:0]
	p.scopes = append(p.scopes[:0], scope{close: len(s), next: len(s), first: -1, last: -1})
	p.stack = append(p.stack[:0], 0)
	p.delims = slices.Grow(p.delims[:0], p.nDelims)
	for i := 0; ; {
		cur := &p.scopes[p.stack[len(p.stack)-1]]
		if i >= cur.close {
			cur.end = len(p.out)
			if len(p.stack) == 1 {
				break
			}
			p.stack = p.stack[:len(p.stack)-1]
			i = cur.next
			continue
		}
		limit := cur.close
		switch c := s[i]; {
		case c == '\\' && i+1 < limit && isASCIIPunct(s[i+1]):
			p.out = append(p.out, s[i+1])
			i += 2
		case c == '`':
			n := run(s, i, '`')
			if end := p.closingTicks(i, n, limit); end >= 0 {
				code := s[i+n : end]
				if len(code) >= 2 && code[0] == ' ' && code[len(code)-1] == ' ' && strings.TrimSpace(code) != "" {
					code = code[1 : len(code)-1]
				}
				p.out = append(p.out, code...)
				i = end + n
				continue
			}
			p.out = append(p.out, s[i:i+n]...)
			i += n
		case c == '!' && i+1 < limit && s[i+1] == '[':
			if p.enter(i+1, limit) {
				i += 2
				continue
			}
			p.text(c)
			i++
		case c == '[':
			if p.enter(i, limit) {
				i++
				continue
			}
			p.text(c)
			i++
		case c == '<':
			end := nextOf(p.gt, i)
			if end < 0 || end >= limit {
				p.text(c)
				i++
				continue
			}
			if lt := nextOf(p.lt, i+1); lt >= 0 && lt < end {
				p.text(c) // not a tag nor an autolink: it holds a '<'
				i++
				continue
			}
			switch inner := s[i+1 : end]; {
			case autolink(inner):
				p.out = append(p.out, inner...)
				i = end + 1
			case inlineTag(inner):
				if name, _, _ := strings.Cut(strings.ToLower(inner), " "); strings.TrimRight(name, "/\t") == "br" {
					p.out = append(p.out, '\n')
				}
				i = end + 1
			default:
				p.text(c)
				i++
			}
		case c == '&':
			if ref := reference(s[i:limit]); ref != "" {
				p.out = append(p.out, html.UnescapeString(ref)...)
				i += len(ref)
				continue
			}
			p.text(c)
			i++
		case c == '*' || c == '_' || c == '~':
			p.delim(c)
			i++
		default:
			_, size := utf8.DecodeRuneInString(s[i:])
			p.out = append(p.out, s[i:i+size]...)
			i += size
		}
	}
	return p.emphasis()
}

// reference returns the entity (&amp;) or numeric character reference
// (&#38; &#x26;) at the start of s, or "".
func reference(s string) string {
	semi := strings.IndexByte(s[:min(len(s), 40)], ';')
	if semi < 2 {
		return ""
	}
	name := s[1:semi]
	if name[0] == '#' {
		digits := name[1:]
		hex := len(digits) > 0 && (digits[0] == 'x' || digits[0] == 'X')
		if hex {
			digits = digits[1:]
		}
		if len(digits) == 0 || len(digits) > 7 {
			return ""
		}
		for i := 0; i < len(digits); i++ {
			c := digits[i]
			if !(c >= '0' && c <= '9' || hex && (c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F')) {
				return ""
			}
		}
		return s[:semi+1]
	}
	for i := 0; i < len(name); i++ {
		if !isASCIILetter(name[i]) && !(i > 0 && name[i] >= '0' && name[i] <= '9') {
			return ""
		}
	}
	// A name the entity table does not know, whole, is text.
	if u := html.UnescapeString(s[:semi+1]); u == s[:semi+1] || strings.HasSuffix(u, ";") {
		return ""
	}
	return s[:semi+1]
}

// enter opens the scope of a link whose [ is at i, if there is a link.
func (p *inliner) enter(i, limit int) bool {
	end, next, ok := p.link(i, limit)
	if !ok {
		return false
	}
	p.scopes = append(p.scopes, scope{close: end, next: next, start: len(p.out), first: -1, last: -1})
	p.stack = append(p.stack, len(p.scopes)-1)
	return true
}

// text writes a byte of plain text.
func (p *inliner) text(c byte) { p.out = append(p.out, c) }

// delim writes an emphasis character, extending the run it continues.
func (p *inliner) delim(c byte) {
	sc := &p.scopes[p.stack[len(p.stack)-1]]
	if sc.last >= 0 {
		if d := &p.delims[sc.last]; d.c == c && int(d.at+d.n) == len(p.out) {
			d.n++
			p.out = append(p.out, c)
			return
		}
	}
	k := int32(len(p.delims))
	p.delims = append(p.delims, delim{at: int32(len(p.out)), n: 1, c: c, next: -1, below: -1})
	if sc.last >= 0 {
		p.delims[sc.last].next = k
	} else {
		sc.first = k
	}
	sc.last = k
	p.out = append(p.out, c)
}

// emphasis removes matched pairs of emphasis delimiter runs (*, _, ~~),
// scope by scope, a link's text before the text around it, and returns
// the text.
func (p *inliner) emphasis() []byte {
	if len(p.delims) == 0 {
		return p.out
	}
	p.drop = slices.Grow(p.drop[:0], len(p.out))[:len(p.out)]
	clear(p.drop)
	// A link's scope comes after the scope around it: going backwards
	// reads the inner ones first.
	for k := len(p.scopes) - 1; k >= 0; k-- {
		p.match(&p.scopes[k])
	}
	p.res = p.res[:0]
	for i, c := range p.out {
		if !p.drop[i] {
			p.res = append(p.res, c)
		}
	}
	return p.res
}

// match pairs the delimiter runs of one scope: a run that can close closes
// the nearest open run of the same character and length, and the runs
// opened after that one can no longer be closed.
func (p *inliner) match(sc *scope) {
	if sc.first < 0 {
		return
	}
	for i := range p.heads {
		for j := range p.heads[i] {
			p.heads[i][j] = -1
		}
	}
	clear(p.longHeads)
	p.open = p.open[:0]
	// Which runs can open and close is decided before any is removed.
	for k := sc.first; k >= 0; k = p.delims[k].next {
		d := &p.delims[k]
		prev, next := p.around(sc, int(d.at), int(d.at+d.n))
		d.canOpen, d.canClose = !unicode.IsSpace(next), !unicode.IsSpace(prev)
		if d.c == '_' && isWordRune(prev) && isWordRune(next) {
			d.canOpen, d.canClose = false, false // snake_case
		}
	}
	for k := sc.first; k >= 0; k = p.delims[k].next {
		d := &p.delims[k]
		if d.c == '~' && d.n != 2 {
			continue
		}
		head := p.head(d.c, d.n)
		if d.canClose {
			// Skip the runs of this key that a match below them closed.
			for o := head; o >= 0; o = p.delims[o].below {
				if pos := p.delims[o].pos; int(pos) < len(p.open) && p.open[pos] == o {
					head = o
					break
				}
				head = p.delims[o].below
			}
			if head >= 0 {
				o := &p.delims[head]
				for i := o.at; i < o.at+o.n; i++ {
					p.drop[i] = true
				}
				for i := d.at; i < d.at+d.n; i++ {
					p.drop[i] = true
				}
				p.open = p.open[:o.pos]
				p.setHead(d.c, d.n, o.below)
				continue
			}
			p.setHead(d.c, d.n, -1)
		}
		if d.canOpen {
			d.pos = int32(len(p.open))
			p.open = append(p.open, k)
			d.below = head
			p.setHead(d.c, d.n, k)
		}
	}
}

// head returns the last run pushed of character c and length n, or -1.
func (p *inliner) head(c byte, n int32) int32 {
	if n <= maxShortRun {
		return p.heads[delimIndex(c)][n]
	}
	if h, ok := p.longHeads[delimKey{c, int(n)}]; ok {
		return h
	}
	return -1
}

func (p *inliner) setHead(c byte, n, k int32) {
	if n <= maxShortRun {
		p.heads[delimIndex(c)][n] = k
		return
	}
	if p.longHeads == nil {
		p.longHeads = make(map[delimKey]int32)
	}
	p.longHeads[delimKey{c, int(n)}] = k
}

func delimIndex(c byte) int {
	switch c {
	case '*':
		return 0
	case '_':
		return 1
	}
	return 2
}

// around returns the runes before from and after to in the scope's text,
// skipping what inner scopes dropped; a space at its ends.
func (p *inliner) around(sc *scope, from, to int) (prev, next rune) {
	prev, next = ' ', ' '
	i := from
	for i > sc.start && p.drop[i-1] {
		i--
	}
	if i > sc.start {
		prev, _ = utf8.DecodeLastRune(p.out[sc.start:i])
	}
	j := to
	for j < sc.end && p.drop[j] {
		j++
	}
	if j < sc.end {
		next, _ = utf8.DecodeRune(p.out[j:sc.end])
	}
	return prev, next
}

func run(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}
