package parse_test

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/ingest/parse"
)

// utf16Bytes encodes s as UTF-16 with a byte-order mark.
func utf16Bytes(s string, order binary.AppendByteOrder) []byte {
	b := order.AppendUint16(nil, 0xFEFF)
	for _, u := range utf16.Encode([]rune(s)) {
		b = order.AppendUint16(b, u)
	}
	return b
}

func utf32Bytes(s string, order binary.AppendByteOrder) []byte {
	b := order.AppendUint32(nil, 0xFEFF)
	for _, r := range s {
		b = order.AppendUint32(b, uint32(r))
	}
	return b
}

// Text in the common encodings is decoded to UTF-8, for .txt and .md alike.
func TestTextEncodings(t *testing.T) {
	t.Parallel()
	const want = "Grüße aus München: “naïve” café, 5 € – ok\nsecond line 😀"
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"utf-8", []byte(want), want},
		{"utf-8 with bom and crlf", []byte("\xef\xbb\xbf" + strings.ReplaceAll(want, "\n", "\r\n")), want},
		{"latin-1", []byte("Gr\xfc\xdfe aus M\xfcnchen, na\xefve caf\xe9\xa0\xbd"), "Grüße aus München, naïve café\u00a0½"},
		{"windows-1252", []byte("\x93quoted\x94 \x80 5 \x96 dash \x85 \x99"), "“quoted” € 5 – dash … ™"},
		{"windows-1252 unassigned byte", []byte("a\x81b \xe9t\xe9"), "a\uFFFDb été"},
		{"utf-16le with bom", utf16Bytes(want, binary.LittleEndian), want},
		{"utf-16be with bom", utf16Bytes(want, binary.BigEndian), want},
		{"utf-16le with bom and crlf", utf16Bytes(strings.ReplaceAll(want, "\n", "\r\n"), binary.LittleEndian), want},
		{"utf-32le with bom", utf32Bytes(want, binary.LittleEndian), want},
		{"utf-32be with bom", utf32Bytes(want, binary.BigEndian), want},
		{"mostly utf-8, one stray byte", []byte("café crème brûlée \xff déjà vu"), "café crème brûlée \uFFFD déjà vu"},
		{"utf-16le with an odd last byte", append(utf16Bytes("ok", binary.LittleEndian), 'x'), "ok\uFFFD"},
		{"form feed and escapes are text", []byte("page one\fpage two \x1b[1mbold\x1b[0m\ttab"), "page one\fpage two \x1b[1mbold\x1b[0m\ttab"},
		{"a few control bytes in much text", []byte("a\x01b " + strings.Repeat("words ", 10)), "a\x01b " + strings.Repeat("words ", 10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if d := parseOne(t, "a.txt", tt.data); d.Text != tt.want {
				t.Errorf("Text = %q, want %q", d.Text, tt.want)
			}
			if md := parseOne(t, "a.md", tt.data); !utf8.ValidString(md.Text) || !strings.Contains(md.Text, strings.Fields(tt.want)[0]) {
				t.Errorf("markdown Text = %q, want it to hold %q", md.Text, strings.Fields(tt.want)[0])
			}
		})
	}
}

// A Markdown file in Latin-1 keeps its heading as its title.
func TestMarkdownLatin1Title(t *testing.T) {
	t.Parallel()
	if d := parseOne(t, "a.md", []byte("# Caf\xe9 cr\xe8me\n\nD\xe9j\xe0 vu.\n")); d.Title != "Café crème" || d.Text != "Café crème\n\nDéjà vu." {
		t.Errorf("got %q %q", d.Title, d.Text)
	}
}

// Regression: a Latin-1 or UTF-16 file was handed on as it was, and the
// extraction stage refused it as "not text": now it is extracted.
func TestEncodedFilesAreExtracted(t *testing.T) {
	t.Parallel()
	for name, data := range map[string][]byte{
		"latin1.txt":  []byte("Le conseil municipal a d\xe9cid\xe9 de r\xe9nover la biblioth\xe8que du quartier."),
		"cp1252.md":   []byte("# R\xe9sum\xe9\n\n\x93Quoted\x94 text \x96 with dashes."),
		"utf16le.txt": utf16Bytes("Die Stadt hat beschlossen, die alte Brücke zu erneuern.", binary.LittleEndian),
		"utf16be.txt": utf16Bytes("Die Stadt hat beschlossen, die alte Brücke zu erneuern.", binary.BigEndian),
	} {
		docs, err := parse.File(name, data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		r, err := extract.NewLocal().Extract(context.Background(), extract.Input{Title: docs[0].Title, Text: docs[0].Text})
		if err != nil {
			t.Fatalf("%s: extract: %v", name, err)
		}
		if r.WordCount < 5 {
			t.Errorf("%s: %d words", name, r.WordCount)
		}
	}
}

// Binary input is refused as not text: a NUL byte in a file without a
// UTF-16 or UTF-32 byte-order mark, a NUL character in one with, or more
// than 1 control character in 20.
func TestBinaryIsNotText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		data   []byte
		reason string
	}{
		{"pdf", []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\x00\x00"), "NUL byte at offset 22"},
		{"png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), "NUL byte at offset 8"},
		{"utf-16 without a bom", utf16Bytes("hello", binary.LittleEndian)[2:], "NUL byte at offset 1"},
		{"utf-8 bom then nul", []byte("\xef\xbb\xbfab\x00c"), "NUL byte at offset 2"},
		{"utf-16 with a nul character", utf16Bytes("ab\x00c", binary.LittleEndian), "NUL character"},
		{"control bytes", []byte("\x01\x02\x03\x04\x05\x06\x07\x08abcdefgh\x0e\x0f\x10\x11"), "control characters"},
		{"control bytes, not utf-8", []byte("\x8f\x01\x02\x03\x90\x91\x92\x93\x94\x95"), "control characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, name := range []string{"x.txt", "x.md"} {
				docs, err := parse.File(name, tt.data)
				if !errors.Is(err, parse.ErrNotText) || docs != nil {
					t.Fatalf("%s: docs %q, err %v; want ErrNotText", name, docs, err)
				}
				nt, ok := errors.AsType[*parse.NotTextError](err)
				if !ok || nt.Name != name || !strings.Contains(nt.Reason, tt.reason) {
					t.Errorf("%s: err %v, want a NotTextError saying %q", name, err, tt.reason)
				}
				if !strings.Contains(err.Error(), "not text") || !strings.Contains(err.Error(), name) {
					t.Errorf("%s: error %q does not say not text and the name", name, err)
				}
			}
		})
	}
}

// Mbox bodies and headers come out as valid UTF-8 without NUL, whatever
// their bytes; a binary text part is reported, not passed on.
func TestMboxEncodings(t *testing.T) {
	t.Parallel()
	msg := func(headers, body string) []byte {
		return []byte("From x@example.com Thu Jan 1 00:00:00 2026\n" + headers + "\n\n" + body + "\n")
	}
	tests := []struct {
		name                      string
		mbox                      []byte
		title, text, parseError   string
		metaKey, metaWant, noMeta string
	}{
		{name: "8-bit latin-1 subject", mbox: msg("Subject: caf\xe9 cr\xe8me", "body"), title: "café crème", text: "body"},
		{name: "utf-8 subject", mbox: msg("Subject: café", "body"), title: "café", text: "body"},
		{name: "nul in a header", mbox: msg("Subject: a\x00b\nFrom: x\x00y", "body"), title: "a\uFFFDb", text: "body", metaKey: "from", metaWant: "x\uFFFDy"},
		{name: "undeclared latin-1 body", mbox: msg("Subject: s", "na\xefve"), title: "s", text: "naïve"},
		{name: "us-ascii label, utf-8 bytes", mbox: msg("Subject: s\nContent-Type: text/plain; charset=us-ascii", "naïve"), title: "s", text: "naïve"},
		{name: "utf-8 label, latin-1 bytes", mbox: msg("Subject: s\nContent-Type: text/plain; charset=utf-8", "na\xefve"), title: "s", text: "naïve", parseError: "not utf-8"},
		{name: "utf-16 body", mbox: msg("Subject: s\nContent-Type: text/plain; charset=utf-16le\nContent-Transfer-Encoding: base64", "aABpAA=="), title: "s", text: "hi"},
		{name: "iso-8859-15 body", mbox: msg("Subject: s\nContent-Type: text/plain; charset=iso-8859-15", "\xa4 5"), title: "s", text: "€ 5"},
		{name: "shift_jis body", mbox: msg("Subject: s\nContent-Type: text/plain; charset=shift_jis", "\x82\xb1\x82\xf1\x82\xc9\x82\xbf\x82\xcd"), title: "s", text: "こんにちは"},
		{name: "binary text part", mbox: msg("Subject: s\nContent-Type: text/plain\nContent-Transfer-Encoding: base64", "AAECAwQFBgc="), title: "s", text: "", parseError: "text/plain body contains a NUL"},
		{name: "unreadable message in latin-1", mbox: []byte("From x\n  caf\xe9 \x00\n"), text: "  café \uFFFD\n", parseError: "read message"},
		{name: "preamble in latin-1", mbox: []byte("caf\xe9\nFrom x\nSubject: s\n\nb\n"), text: "café\n", parseError: "before the first"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			docs, err := parse.File("m.mbox", tt.mbox)
			if err != nil {
				t.Fatal(err)
			}
			d := docs[0]
			if d.Title != tt.title || d.Text != tt.text {
				t.Errorf("Title %q Text %q, want %q %q", d.Title, d.Text, tt.title, tt.text)
			}
			if pe := d.Meta["parse_error"]; (tt.parseError == "") != (pe == "") || !strings.Contains(pe, tt.parseError) {
				t.Errorf("parse_error %q, want %q", pe, tt.parseError)
			}
			if tt.metaKey != "" && d.Meta[tt.metaKey] != tt.metaWant {
				t.Errorf("Meta[%s] = %q, want %q", tt.metaKey, d.Meta[tt.metaKey], tt.metaWant)
			}
			for _, d := range docs {
				checkClean(t, d)
			}
		})
	}
}

// checkClean fails the test if any text of d is not valid UTF-8 or holds a
// NUL.
func checkClean(t *testing.T, d parse.Doc) {
	t.Helper()
	fields := map[string]string{"key": d.Key, "title": d.Title, "text": d.Text}
	for k, v := range d.Meta {
		fields["meta "+k] = v
		fields["meta key "+k] = k
	}
	for what, s := range fields {
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			t.Fatalf("%s %q is not valid UTF-8 without NUL", what, s)
		}
	}
}
