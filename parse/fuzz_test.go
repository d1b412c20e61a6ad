package parse_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/weirhq/weir/parse"
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
			if format != parse.FormatMbox || !errors.Is(err, parse.ErrNotMbox) {
				t.Fatalf("File(%q) error %v", name, err)
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
		}
	})
}
