package parse_test

import (
	"encoding/base64"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/weirhq/weir/ingest/parse"
)

// threeMessages is an mbox of a quoted-printable message, a base64 one and
// a multipart/alternative one, with mboxrd ">From " quoting.
var threeMessages = strings.Join([]string{
	"From alice@example.com Mon Jan 19 09:00:00 2026",
	"From: =?UTF-8?Q?Ren=C3=A9e_Dupont?= <renee@example.com>",
	"To: team@example.com",
	"Subject: =?UTF-8?Q?Caf=C3=A9_meeting?=",
	"Date: Mon, 19 Jan 2026 09:00:00 +0100",
	"Message-ID: <qp-1@example.com>",
	"MIME-Version: 1.0",
	"Content-Type: text/plain; charset=utf-8",
	"Content-Transfer-Encoding: quoted-printable",
	"",
	"Let's meet at the caf=C3=A9 at ten. This line is long enough to be wrapped=",
	" by a soft break.",
	">From the minutes: nothing.",
	">>From the archive: quoted twice.",
	"",
	"From bob@example.com Tue Jan 20 10:00:00 2026",
	"From: Bob <bob@example.com>",
	"Subject: Base64 body",
	"Date: Tue, 20 Jan 2026 10:00:00 +0000",
	"Message-ID: <b64-2@example.com>",
	"Content-Type: text/plain; charset=iso-8859-1",
	"Content-Transfer-Encoding: base64",
	"",
	wrap(base64.StdEncoding.EncodeToString([]byte("Gr\xfc\xdfe aus M\xfcnchen.\nZweite Zeile.")), 20),
	"",
	"From carol@example.com Wed Jan 21 11:00:00 2026",
	"From: carol@example.com",
	"Subject: =?ISO-8859-1?B?" + base64.StdEncoding.EncodeToString([]byte("R\xe9sum\xe9")) + "?=",
	"Date: not a date",
	"Message-ID: <mp-3@example.com>",
	"MIME-Version: 1.0",
	`Content-Type: multipart/alternative; boundary="XYZ"`,
	"",
	"This is a multi-part message in MIME format.",
	"--XYZ",
	"Content-Type: text/html; charset=utf-8",
	"",
	"<p>HTML <b>version</b></p>",
	"--XYZ",
	"Content-Type: text/plain; charset=utf-8",
	"Content-Transfer-Encoding: quoted-printable",
	"",
	"Plain version =E2=80=94 the one we want.",
	"--XYZ--",
	"",
}, "\n")

func wrap(s string, n int) string {
	var lines []string
	for len(s) > n {
		lines = append(lines, s[:n])
		s = s[n:]
	}
	return strings.Join(append(lines, s), "\n")
}

func TestMboxThreeMessages(t *testing.T) {
	t.Parallel()
	for _, crlf := range []bool{false, true} {
		data := threeMessages
		if crlf {
			data = strings.ReplaceAll(data, "\n", "\r\n")
		}
		docs, err := parse.File("inbox.MBOX", []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		want := []parse.Doc{
			{
				Key:   "#1",
				Title: "Café meeting",
				Text: "Let's meet at the café at ten. This line is long enough to be wrapped by a soft break.\n" +
					"From the minutes: nothing.\n>From the archive: quoted twice.",
				Meta: map[string]string{
					"format": "mbox", "from": "Renée Dupont <renee@example.com>", "subject": "Café meeting",
					"date": "2026-01-19T09:00:00+01:00", "message_id": "<qp-1@example.com>",
				},
			},
			{
				Key:   "#2",
				Title: "Base64 body",
				Text:  "Grüße aus München.\nZweite Zeile.",
				Meta: map[string]string{
					"format": "mbox", "from": "Bob <bob@example.com>", "subject": "Base64 body",
					"date": "2026-01-20T10:00:00Z", "message_id": "<b64-2@example.com>",
				},
			},
			{
				Key:   "#3",
				Title: "Résumé",
				Text:  "Plain version — the one we want.",
				Meta: map[string]string{
					"format": "mbox", "from": "carol@example.com", "subject": "Résumé",
					"date": "not a date", "message_id": "<mp-3@example.com>",
				},
			},
		}
		if len(docs) != len(want) {
			t.Fatalf("crlf=%v: got %d docs, want %d: %#v", crlf, len(docs), len(want), docs)
		}
		for i := range want {
			if !sameDoc(docs[i], want[i]) {
				t.Errorf("crlf=%v: doc %d =\n%#v\nwant\n%#v", crlf, i, docs[i], want[i])
			}
		}
	}
}

func TestMboxBodies(t *testing.T) {
	t.Parallel()
	msg := func(headers, body string) string {
		return "From x@example.com Thu Jan 1 00:00:00 2026\n" + headers + "\n\n" + body + "\n"
	}
	tests := []struct {
		name, mbox, text, parseError string
	}{
		{
			name: "latin1 8bit",
			mbox: msg("Subject: s\nContent-Type: text/plain; charset=\"ISO-8859-1\"", "na\xefve caf\xe9"),
			text: "naïve café",
		},
		{
			name: "windows-1252 quotes",
			mbox: msg("Subject: s\nContent-Type: text/plain; charset=windows-1252", "\x93quoted\x94 \x80 5"),
			text: "“quoted” € 5",
		},
		{
			name: "no content-type is plain us-ascii",
			mbox: msg("Subject: s", "hello"),
			text: "hello",
		},
		{
			name: "mixed with attachment and nested alternative",
			mbox: msg("Subject: s\nContent-Type: multipart/mixed; boundary=OUT",
				"--OUT\nContent-Type: multipart/alternative; boundary=IN\n\n--IN\nContent-Type: text/plain\n\ninner plain\n--IN\nContent-Type: text/html\n\n<p>inner html</p>\n--IN--\n"+
					"--OUT\nContent-Type: text/plain\nContent-Disposition: attachment; filename=a.txt\n\nattached, skipped\n"+
					"--OUT\nContent-Type: text/plain\n\nsecond inline part\n--OUT--"),
			text: "inner plain\n\nsecond inline part",
		},
		{
			name: "html only",
			mbox: msg("Subject: s\nContent-Type: text/html; charset=utf-8",
				"<html><head><style>p{color:red}</style></head><body><p>One &amp; two</p><p>Three<br>four</p></body></html>"),
			text: "One & two\n\nThree\nfour",
		},
		{
			name:       "bad base64 keeps the raw body",
			mbox:       msg("Subject: s\nContent-Transfer-Encoding: base64", "!!!not base64!!!"),
			text:       "!!!not base64!!!",
			parseError: "base64",
		},
		{
			name: "koi8-r",
			mbox: msg("Subject: s\nContent-Type: text/plain; charset=koi8-r", "\xf0\xd2\xc9\xd7\xc5\xd4"),
			text: "Привет",
		},
		{
			name:       "unknown charset read as windows-1252",
			mbox:       msg("Subject: s\nContent-Type: text/plain; charset=x-martian", "\xf0\xd2\xc9"),
			text:       "ðÒÉ",
			parseError: `unsupported charset "x-martian"`,
		},
		{
			name:       "no text part",
			mbox:       msg("Subject: s\nContent-Type: application/pdf\nContent-Transfer-Encoding: base64", "JVBERi0="),
			text:       "",
			parseError: "no text body (application/pdf)",
		},
		{
			name:       "multipart without boundary",
			mbox:       msg("Subject: s\nContent-Type: multipart/mixed", "body"),
			text:       "body",
			parseError: "without a boundary",
		},
		{
			name: "headers only",
			mbox: "From x Thu Jan 1 00:00:00 2026\nSubject: just a subject",
			text: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := parseOne(t, "m.mbox", []byte(tt.mbox))
			if d.Text != tt.text {
				t.Errorf("Text = %q, want %q", d.Text, tt.text)
			}
			pe, has := d.Meta["parse_error"]
			switch {
			case tt.parseError == "" && has:
				t.Errorf("unexpected parse_error %q", pe)
			case tt.parseError != "" && !strings.Contains(pe, tt.parseError):
				t.Errorf("parse_error = %q, want it to contain %q", pe, tt.parseError)
			}
		})
	}
}

func TestMboxNothingDisappears(t *testing.T) {
	t.Parallel()
	data := "stray preamble\n" +
		"From a Thu Jan 1 00:00:00 2026\nSubject: ok\n\nfine\n\n" +
		"From b Thu Jan 1 00:00:00 2026\n  bad continuation first\nno colon here\n\nbody\n\n" +
		"From c Thu Jan 1 00:00:00 2026\n" +
		"From d Thu Jan 1 00:00:00 2026\nSubject: last\n\nend"
	docs, err := parse.File("x.mbox", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		key, text, parseError string
	}
	wants := []want{
		{"#1", "stray preamble\n", "before the first"},
		{"#2", "fine", ""},
		{"#3", "  bad continuation first\nno colon here\n\nbody\n\n", "read message"},
		{"#4", "", "empty message"},
		{"#5", "end", ""},
	}
	if len(docs) != len(wants) {
		t.Fatalf("got %d docs, want %d: %#v", len(docs), len(wants), docs)
	}
	for i, w := range wants {
		d := docs[i]
		if d.Key != w.key || d.Text != w.text || d.Meta["format"] != "mbox" {
			t.Errorf("doc %d = %q %q %v, want %q %q", i, d.Key, d.Text, d.Meta, w.key, w.text)
		}
		if pe := d.Meta["parse_error"]; (w.parseError == "") != (pe == "") || !strings.Contains(pe, w.parseError) {
			t.Errorf("doc %d parse_error = %q, want %q", i, pe, w.parseError)
		}
	}
}

func TestMboxWithoutFromLine(t *testing.T) {
	t.Parallel()
	for _, data := range []string{"", "Subject: hi\n\nbody\n", " From indented\n", "from lower case\n", ">From quoted\n"} {
		docs, err := parse.File("x.mbox", []byte(data))
		if !errors.Is(err, parse.ErrNotMbox) || docs != nil {
			t.Errorf("File(%q) = %v, %v; want ErrNotMbox", data, docs, err)
		}
	}
}

// Regression: a "From " inside a line is not a separator, only at a line's
// start.
func TestMboxFromMidLineIsNotASeparator(t *testing.T) {
	t.Parallel()
	if d := parseOne(t, "x.mbox", []byte("From a Thu Jan 1 00:00:00 2026\nSubject: s\n\nquote: From here on\n")); d.Text != "quote: From here on" {
		t.Fatalf("got %#v", d)
	}
}

// Regression (found by FuzzFile): base64 without padding whose length is not
// a multiple of 4 panicked, decoding into a buffer sized for padded input.
func TestMboxUnpaddedBase64(t *testing.T) {
	t.Parallel()
	// "00" decodes to the byte 0xD3, which is not UTF-8: with no charset
	// it is read as Windows-1252.
	for body, want := range map[string]string{"00": "Ó", "aGk": "hi", "aGVsbG8": "hello"} {
		if d := parseOne(t, "x.mbox", []byte("From \nContent-Transfer-Encoding: BASE64\n\n"+body)); d.Text != want || d.Meta["parse_error"] != "" {
			t.Errorf("body %q: Text %q parse_error %q, want %q", body, d.Text, d.Meta["parse_error"], want)
		}
	}
}

// Mbox reads message by message from a reader and gives what File gives,
// whatever sizes the reads come in and however long the lines are.
func TestMboxReaderMatchesFile(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 40000) // one 200 KB line, longer than the read buffer
	inputs := []string{
		threeMessages,
		strings.ReplaceAll(threeMessages, "\n", "\r\n"),
		"\xef\xbb\xbfstray preamble\nFrom a\nSubject: one\n\n" + long + "\n>From b\nFrom c\n\nFrom d\nSubject: last",
		"From only-envelope",
	}
	for i, data := range inputs {
		want, err := parse.File("x.mbox", []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		var got []parse.Doc
		for d, err := range parse.Mbox(iotest.HalfReader(strings.NewReader(data))) {
			if err != nil {
				t.Fatalf("input %d: %v", i, err)
			}
			got = append(got, d)
		}
		if len(got) != len(want) {
			t.Fatalf("input %d: %d docs from the reader, %d from File", i, len(got), len(want))
		}
		for k := range want {
			if !sameDoc(got[k], want[k]) {
				t.Errorf("input %d doc %d:\n%#v\nwant\n%#v", i, k, got[k], want[k])
			}
		}
	}
	docs, _ := parse.File("x.mbox", []byte(inputs[2]))
	if len(docs) != 4 || docs[1].Text != strings.TrimSpace(long+"\nFrom b") {
		t.Errorf("long line or >From unquoting lost: %d docs", len(docs))
	}
}

func TestMboxReaderErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("disk on fire")
	var docs []parse.Doc
	var last error
	for d, err := range parse.Mbox(io.MultiReader(strings.NewReader("From a\nSubject: one\n\nbody\nFrom b\nSubject: two\n"), iotest.ErrReader(boom))) {
		if err != nil {
			last = err
			continue
		}
		docs = append(docs, d)
	}
	if !errors.Is(last, boom) || len(docs) != 1 || docs[0].Title != "one" {
		t.Errorf("docs %v, last error %v; want the first message, then %v", docs, last, boom)
	}
	for d, err := range parse.Mbox(strings.NewReader("no envelope line\n")) {
		if !errors.Is(err, parse.ErrNotMbox) || d.Meta != nil {
			t.Errorf("got %v %v, want only ErrNotMbox", d, err)
		}
	}
	n := 0
	for range parse.Mbox(strings.NewReader(threeMessages)) {
		n++
		break // stopping early is allowed
	}
	if n != 1 {
		t.Errorf("%d docs after break", n)
	}
}
