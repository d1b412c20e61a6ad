package parse

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/encoding/unicode/utf32"
)

// ErrNotText is matched by the error File returns for a text or Markdown
// file that is binary, as the package doc defines it.
var ErrNotText = errors.New("not text")

// NotTextError is the error for a text or Markdown file that is binary. It
// matches ErrNotText.
type NotTextError struct {
	// Name is the file name given to File.
	Name string
	// Reason says why: "contains a NUL byte at offset 12" or "has 40
	// control characters in 300".
	Reason string
}

func (e *NotTextError) Error() string {
	return fmt.Sprintf("parse %q: %v: the file %s", e.Name, ErrNotText, e.Reason)
}

// Unwrap returns ErrNotText.
func (e *NotTextError) Unwrap() error { return ErrNotText }

// The byte-order marks File recognises. UTF-32's are tested before
// UTF-16's, whose little-endian mark begins UTF-32LE's.
var (
	bomUTF8    = []byte("\xef\xbb\xbf")
	bomUTF32LE = []byte("\xff\xfe\x00\x00")
	bomUTF32BE = []byte("\x00\x00\xfe\xff")
	bomUTF16LE = []byte("\xff\xfe")
	bomUTF16BE = []byte("\xfe\xff")
)

// maxControlShare is the share of control characters above which text is
// binary: more than 1 in 20 of its characters.
const maxControlShare = 20

// fileText decodes the content of a text or Markdown file into UTF-8 text
// with LF line ends, as the package doc describes, or returns why it is
// not text (a reason for NotTextError).
func fileText(data []byte) (string, string) {
	var enc encoding.Encoding
	switch {
	case bytes.HasPrefix(data, bomUTF8):
		return utf8Text(data[len(bomUTF8):])
	case bytes.HasPrefix(data, bomUTF32LE):
		enc = utf32.UTF32(utf32.LittleEndian, utf32.ExpectBOM)
	case bytes.HasPrefix(data, bomUTF32BE):
		enc = utf32.UTF32(utf32.BigEndian, utf32.ExpectBOM)
	case bytes.HasPrefix(data, bomUTF16LE):
		enc = unicode.UTF16(unicode.LittleEndian, unicode.ExpectBOM)
	case bytes.HasPrefix(data, bomUTF16BE):
		enc = unicode.UTF16(unicode.BigEndian, unicode.ExpectBOM)
	default:
		if i := bytes.IndexByte(data, 0); i >= 0 {
			return "", fmt.Sprintf("contains a NUL byte at offset %d", i)
		}
		if looksUTF8(data) {
			return utf8Text(data)
		}
		return checkText(lf(windows1252(data)))
	}
	// Decoding into valid UTF-8 cannot fail: malformed code units become
	// U+FFFD.
	b, err := enc.NewDecoder().Bytes(data)
	if err != nil {
		return "", "cannot be decoded: " + err.Error()
	}
	return checkText(lf(string(b)))
}

// utf8Text is data, UTF-8 with invalid bytes, read as U+FFFD, and LF line
// ends, once checked.
func utf8Text(data []byte) (string, string) {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return "", fmt.Sprintf("contains a NUL byte at offset %d", i)
	}
	return checkText(lfBytes(data))
}

// checkText returns s, valid UTF-8, or why it is not text: a NUL
// character, or control characters (other than tab, line feed, vertical
// tab, form feed, carriage return and escape) making more than 1 in 20 of
// its characters.
func checkText(s string) (string, string) {
	var n, ctl int
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 0x20 && c < 0x7f: // printable ASCII, most of any text
		case c&0xc0 == 0x80: // a continuation byte: not a character
			continue
		case c == 0:
			return "", fmt.Sprintf("contains a NUL character at offset %d", i)
		case c < 0x20 && c != '\t' && c != '\n' && c != '\v' && c != '\f' && c != '\r' && c != 0x1b,
			c == 0x7f,
			c == 0xc2 && i+1 < len(s) && s[i+1] < 0xa0: // C1, U+0080 to U+009F
			ctl++
		}
		n++
	}
	if ctl > 0 && ctl*maxControlShare > n {
		return "", fmt.Sprintf("has %d control characters in %d: binary data", ctl, n)
	}
	return s, ""
}

// looksUTF8 reports whether data is to be read as UTF-8: it is valid UTF-8,
// or its valid multi-byte sequences outnumber its invalid bytes (UTF-8 text
// with a few stray bytes, which become U+FFFD). Otherwise it is read as
// Windows-1252.
func looksUTF8(data []byte) bool {
	if utf8.Valid(data) {
		return true
	}
	var multi, bad int
	for i := 0; i < len(data); {
		if data[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			bad++
		} else {
			multi++
		}
		i += size
	}
	return multi > bad
}

// windows1252 decodes Windows-1252, a superset of ISO 8859-1's printable
// characters; its five unassigned bytes become U+FFFD.
func windows1252(data []byte) string { return singleByte(charmap.Windows1252, data) }

// singleByte decodes data from a single-byte charset straight into one
// string, without the transformer's intermediate buffers.
func singleByte(cm *charmap.Charmap, data []byte) string {
	var b strings.Builder
	b.Grow(len(data) + len(data)/8)
	for _, c := range data {
		if r := cm.DecodeByte(c); r < utf8.RuneSelf {
			b.WriteByte(byte(r))
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// lfBytes returns data as a string with CRLF line ends made LF and invalid
// UTF-8 made U+FFFD, copying data once.
func lfBytes(data []byte) string {
	var b strings.Builder
	b.Grow(len(data))
	valid := utf8.Valid(data)
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\r')
		if i < 0 {
			i = len(data)
		}
		if valid {
			b.Write(data[:i])
		} else {
			writeValid(&b, data[:i])
		}
		data = data[i:]
		switch {
		case len(data) == 0:
		case len(data) > 1 && data[1] == '\n':
			data = data[1:] // the \n is written with what follows
		default:
			b.WriteByte('\r')
			data = data[1:]
		}
	}
	return b.String()
}

// writeValid writes p to b with each run of invalid UTF-8 made U+FFFD.
func writeValid(b *strings.Builder, p []byte) {
	for len(p) > 0 {
		if utf8.Valid(p) {
			b.Write(p)
			return
		}
		i := 0
		for i < len(p) {
			r, size := utf8.DecodeRune(p[i:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			i += size
		}
		b.Write(p[:i])
		j := i
		for j < len(p) {
			r, size := utf8.DecodeRune(p[j:])
			if r != utf8.RuneError || size != 1 {
				break
			}
			j++
		}
		b.WriteString("\uFFFD")
		p = p[j:]
	}
}

// lf returns s with CRLF line ends made LF.
func lf(s string) string {
	if !strings.Contains(s, "\r\n") {
		return s
	}
	return strings.ReplaceAll(s, "\r\n", "\n")
}

// sniffText returns b as valid UTF-8 with LF line ends, read as a text
// file without a byte-order mark is: UTF-8 when looksUTF8 says so (invalid
// bytes become U+FFFD), else Windows-1252. NUL bytes are kept.
func sniffText(b []byte) string {
	if looksUTF8(b) {
		return lfBytes(b)
	}
	return lf(windows1252(b))
}

// cleanText is sniffText with NUL made U+FFFD, for a field that must hold
// text whatever the input.
func cleanText(b []byte) string { return noNUL(sniffText(b)) }

// cleanString is cleanText for a string.
func cleanString(s string) string {
	if utf8.ValidString(s) {
		return noNUL(s)
	}
	return cleanText([]byte(s))
}

func noNUL(s string) string {
	if strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}
