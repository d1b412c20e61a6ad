package parse

import (
	"fmt"
	"html"
	"io"
	"strings"
	"unicode/utf8"
)

// toUTF8 converts b from charset to UTF-8. It knows utf-8, us-ascii,
// iso-8859-1 and windows-1252 (and their usual aliases); for any other
// charset it returns b unchanged and an error naming the charset.
func toUTF8(charset string, b []byte) (string, error) {
	switch strings.ToLower(strings.Trim(strings.TrimSpace(charset), `"`)) {
	case "", "utf-8", "utf8", "us-ascii", "ascii", "ansi_x3.4-1968":
		return string(b), nil
	case "iso-8859-1", "iso8859-1", "iso_8859-1", "latin1", "latin-1", "l1", "cp819", "iso-ir-100":
		return latin1(b, nil), nil
	case "windows-1252", "cp1252", "x-cp1252":
		return latin1(b, &cp1252), nil
	}
	return string(b), fmt.Errorf("unsupported charset %q", charset)
}

// latin1 decodes ISO 8859-1, or windows-1252 when high is its table for
// 0x80–0x9F.
func latin1(b []byte, high *[32]rune) string {
	var sb strings.Builder
	sb.Grow(len(b) + len(b)/4)
	for _, c := range b {
		switch {
		case c < utf8.RuneSelf:
			sb.WriteByte(c)
		case high != nil && c < 0xA0 && high[c-0x80] != 0:
			sb.WriteRune(high[c-0x80])
		default:
			sb.WriteRune(rune(c))
		}
	}
	return sb.String()
}

// cp1252 maps windows-1252's 0x80–0x9F; 0 marks the five unused codes,
// which are read as in ISO 8859-1.
var cp1252 = [32]rune{
	'€', 0, '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', 0, 'Ž', 0,
	0, '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', 0, 'ž', 'Ÿ',
}

// charsetReader is mime.WordDecoder's CharsetReader, for the charsets it
// does not know itself.
func charsetReader(charset string, input io.Reader) (io.Reader, error) {
	b, err := io.ReadAll(input)
	if err != nil {
		return nil, err
	}
	s, err := toUTF8(charset, b)
	if err != nil {
		return nil, err
	}
	return strings.NewReader(s), nil
}

// htmlText is the text of an HTML body: tags removed (script and style with
// their content), block ends made line breaks, entities decoded.
func htmlText(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		lt := strings.IndexByte(s, '<')
		if lt < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:lt])
		s = s[lt:]
		gt := strings.IndexByte(s, '>')
		if gt < 0 {
			b.WriteString(s)
			break
		}
		tag := strings.ToLower(strings.TrimSpace(strings.Trim(s[1:gt], "/ ")))
		tag, _, _ = strings.Cut(tag, " ")
		s = s[gt+1:]
		switch tag {
		case "script", "style":
			if end := strings.Index(strings.ToLower(s), "</"+tag); end >= 0 {
				s = s[end:]
			}
		case "br", "p", "div", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "table":
			b.WriteByte('\n')
		}
	}
	lines := strings.Split(html.UnescapeString(b.String()), "\n")
	out := lines[:0]
	blank := false
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" {
			if !blank && len(out) > 0 {
				out = append(out, "")
			}
			blank = true
			continue
		}
		blank = false
		out = append(out, l)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}
