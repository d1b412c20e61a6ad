package parse_test

import (
	"errors"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/weirhq/weir/ingest/parse"
)

func FuzzFile(f *testing.F) {
	f.Add("a.txt", []byte("plain text"))
	f.Add("a.md", []byte("# Title\n\nSome *emphasis*, [a link](http://x/(y)) and `code`.\n```\nfence\n```\n"))
	f.Add("a.md", []byte("---\ntitle: t\n---\nx\n===\n> - [![i](j)][k]\n\\*a_b_c*"))
	f.Add("a.mbox", []byte(threeMessages))
	f.Add("a.mbox", []byte("From x\nContent-Type: multipart/mixed; boundary=B\n\n--B\nContent-Type: multipart/alternative; boundary=B\n\n--B\n--B--"))
	f.Add("a.mbox", []byte("From x\nSubject: =?utf-8?B?////?=\nContent-Transfer-Encoding: quoted-printable\n\n=ZZ=\n>>From y\n"))
	f.Add("a.mbox", []byte("junk\nFrom \n"))
	f.Add("a.pdf", []byte("%PDF"))
	f.Add("a.txt", []byte("caf\xe9 \x93q\x94"))
	f.Add("a.txt", []byte("\xff\xfeh\x00i\x00\r\x00\n\x00"))
	f.Add("a.md", []byte("\xfe\xff\x00#\x00 \x00T"))
	f.Add("a.txt", []byte("\x00\x00\xfe\xff\x00\x00\x00a"))
	f.Add("a.md", []byte("<div>\n<b>x</b> &amp; &#233;\n\n<!-- c -->\n<script>s</script>"))
	f.Add("a.mbox", []byte("From x\nSubject: caf\xe9\x00\nContent-Type: text/plain; charset=shift_jis\n\n\x82\xb1\x00\n"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		docs, err := parse.File(name, data)
		format := parse.Format(name)
		switch {
		case format == "":
			if !errors.Is(err, parse.ErrUnsupported) {
				t.Fatalf("unsupported %q: err = %v", name, err)
			}
			return
		case err != nil:
			if format == parse.FormatMbox && !errors.Is(err, parse.ErrNotMbox) ||
				format != parse.FormatMbox && !errors.Is(err, parse.ErrNotText) {
				t.Fatalf("File(%q) error %v", name, err)
			}
			if !utf8.ValidString(err.Error()) {
				t.Fatalf("error %q is not valid UTF-8", err)
			}
			return
		case len(docs) == 0:
			t.Fatal("no docs and no error")
		case format != parse.FormatMbox && len(docs) != 1:
			t.Fatalf("%s file gave %d docs", format, len(docs))
		}
		for i, d := range docs {
			if d.Meta["format"] != format {
				t.Fatalf("doc %d format %q, want %q", i, d.Meta["format"], format)
			}
			wantKey := ""
			if format == parse.FormatMbox {
				wantKey = "#" + strconv.Itoa(i+1)
			}
			if d.Key != wantKey {
				t.Fatalf("doc %d key %q, want %q", i, d.Key, wantKey)
			}
			// What is stored in SQL is always valid UTF-8 without NUL.
			checkClean(t, d)
		}
	})
}
