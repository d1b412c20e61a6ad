package parse_test

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/weirhq/weir/ingest/parse"
)

func TestFormatByExtension(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		format string
	}{
		{"notes.txt", "text"},
		{"NOTES.TXT", "text"},
		{"a.b/notes.Text", "text"},
		{"readme.md", "markdown"},
		{"README.MarkDown", "markdown"},
		{"inbox.mbox", "mbox"},
		{"INBOX.MBOX", "mbox"},
		{"report.pdf", ""},
		{"Makefile", ""},
		{"notes.txt.gz", ""},
		{".md", "markdown"},
	}
	for _, tt := range tests {
		if got := parse.Format(tt.name); got != tt.format {
			t.Errorf("Format(%q) = %q, want %q", tt.name, got, tt.format)
		}
	}
}

func TestUnsupportedExtension(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, ext string }{
		{"report.PDF", ".PDF"},
		{"Makefile", ""},
		{"archive.tar.gz", ".gz"},
	} {
		docs, err := parse.File(tt.name, []byte("hello"))
		if !errors.Is(err, parse.ErrUnsupported) {
			t.Fatalf("File(%q) error = %v, want ErrUnsupported", tt.name, err)
		}
		if docs != nil {
			t.Errorf("File(%q) returned docs with an error", tt.name)
		}
		ue, ok := errors.AsType[*parse.UnsupportedError](err)
		if !ok || ue.Ext != tt.ext || ue.Name != tt.name {
			t.Errorf("File(%q) error = %#v, want UnsupportedError{Ext: %q}", tt.name, ue, tt.ext)
		}
		if tt.ext != "" && !strings.Contains(err.Error(), tt.ext) {
			t.Errorf("error %q does not name the extension %q", err, tt.ext)
		}
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, data, want string
	}{
		{"plain", "Hello\nworld\n", "Hello\nworld\n"},
		{"crlf", "Hello\r\nworld\r\n", "Hello\nworld\n"},
		{"bom", "\xef\xbb\xbfHello", "Hello"},
		{"empty", "", ""},
		{"markup kept", "# not a heading in text *really*", "# not a heading in text *really*"},
		{"not utf-8: windows-1252", "caf\xe9 \x93ok\x94", "café “ok”"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := parse.File("a.txt", []byte(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			want := parse.Doc{Text: tt.want, Meta: map[string]string{"format": "text"}}
			if len(docs) != 1 || !sameDoc(docs[0], want) {
				t.Fatalf("got %#v, want %#v", docs, want)
			}
		})
	}
}

// parseOne parses data as the file name, which must give one document.
func parseOne(t *testing.T, name string, data []byte) parse.Doc {
	t.Helper()
	docs, err := parse.File(name, data)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 {
		t.Fatalf("%s: got %d docs, want 1: %#v", name, len(docs), docs)
	}
	return docs[0]
}

func sameDoc(a, b parse.Doc) bool {
	return a.Key == b.Key && a.Title == b.Title && a.Text == b.Text && maps.Equal(a.Meta, b.Meta)
}
