package cli

import (
	"bytes"
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

// escapeRune is r as a Go escape: \n and the other letter escapes where
// Go has one, \xNN below U+0100, \uNNNN above.
func escapeRune(r rune) string {
	if i := strings.IndexRune("\n\r\t\a\b\f\v", r); i >= 0 {
		return `\` + "nrtabfv"[i:i+1]
	}
	if r < 0x100 {
		return fmt.Sprintf(`\x%02x`, r)
	}
	return fmt.Sprintf(`\u%04x`, r)
}

// errorText is the text of err for the error stream, with any credential
// (a URL's password, a bearer token) masked. Errors joined by errors.Join
// are one a line; within each, every control character, a newline
// included, is escaped (printable), so that a file name quoted in a
// message can neither drive the terminal nor split the line.
func errorText(err error) string {
	return strings.Join(errorLines(err), "\n")
}

func errorLines(err error) []string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		// A join, whose text is its errors' one a line (not an error of
		// fmt.Errorf with several %w, whose text is its own).
		var texts, lines []string
		for _, e := range j.Unwrap() {
			if e != nil {
				texts = append(texts, e.Error())
				lines = append(lines, errorLines(e)...)
			}
		}
		if strings.Join(texts, "\n") == err.Error() {
			return lines
		}
	}
	return []string{printable(redact.String(err.Error()))}
}

// terminalJSON returns the JSON text js with the characters a terminal acts
// on that encoding/json leaves as they are (DEL, the C1 controls, the
// bidirectional controls) written as \u escapes: the same JSON value, safe
// to print. encoding/json escapes the C0 controls, and the line and
// paragraph separators, itself; such characters can only be in strings.
func terminalJSON(js []byte) []byte {
	// The white space between tokens is JSON's own; in strings the encoder
	// escapes it.
	unsafe := func(r rune) bool { return unsafeRune(r) && r != '\n' && r != '\r' && r != '\t' }
	if !bytes.ContainsFunc(js, unsafe) {
		return js
	}
	var b bytes.Buffer
	for i := 0; i < len(js); {
		r, n := utf8.DecodeRune(js[i:])
		if unsafe(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.Write(js[i : i+n])
		}
		i += n
	}
	return b.Bytes()
}
