package cli

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/weirhq/weir/internal/redact"
)

// printable returns s safe to print to a terminal: every control character
// (C0, DEL and C1: ESC, BEL, a newline, a carriage return, a tab…), every
// character that reorders text on screen (the bidirectional controls), and
// every byte that is not UTF-8 is written as a Go escape (\x1b, \n, \u202e,
// \xff). A file name or a title read from a document can then neither
// drive the terminal (clear the screen, set the window's title) nor split
// a line of the output or of a table. Text without such characters comes
// back unchanged. JSON output is left to the encoder, which escapes them
// itself.
func printable(s string) string {
	if !strings.ContainsFunc(s, unsafeRune) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
			b.WriteString(escapeRune(r))
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// unsafeRune reports whether r must not reach a terminal as it is.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) ||
		r == '\u2028' || r == '\u2029' // line and paragraph separators
}

func escapeRune(r rune) string {
	switch r {
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	case '\a':
		return `\a`
	case '\b':
		return `\b`
	case '\f':
		return `\f`
	case '\v':
		return `\v`
	}
	if r < 0x100 {
		return fmt.Sprintf(`\x%02x`, r)
	}
	return fmt.Sprintf(`\u%04x`, r)
}

// errorText is the text of err for the error stream: its lines (errors
// joined with errors.Join are one a line) each made printable, and any
// credential (a URL's password, a bearer token) masked.
func errorText(err error) string {
	lines := strings.Split(redact.String(err.Error()), "\n")
	for i, l := range lines {
		lines[i] = printable(l)
	}
	return strings.Join(lines, "\n")
}
