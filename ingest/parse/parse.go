package parse

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// The formats, as Meta["format"] names them.
const (
	FormatText     = "text"
	FormatMarkdown = "markdown"
	FormatMbox     = "mbox"
)

// The Meta keys File sets.
const (
	MetaFormat     = "format"
	MetaFrom       = "from"
	MetaDate       = "date"
	MetaSubject    = "subject"
	MetaMessageID  = "message_id"
	MetaParseError = "parse_error"
)

// ErrUnsupported is matched by the error File returns for a file whose
// extension names no format it reads.
var ErrUnsupported = errors.New("unsupported file format")

// ErrNotMbox is matched by the error File returns for an .mbox file without
// a single "From " line.
var ErrNotMbox = errors.New("not an mbox: no \"From \" line")

// UnsupportedError is the error for a file whose extension File does not
// read. It matches ErrUnsupported.
type UnsupportedError struct {
	// Name is the file name given to File.
	Name string
	// Ext is its extension, as written, with its dot; "" when it has none.
	Ext string
}

func (e *UnsupportedError) Error() string {
	if e.Ext == "" {
		return fmt.Sprintf("parse %q: no file extension (want .txt, .text, .md, .markdown or .mbox): %v", e.Name, ErrUnsupported)
	}
	return fmt.Sprintf("parse %q: extension %q (want .txt, .text, .md, .markdown or .mbox): %v", e.Name, e.Ext, ErrUnsupported)
}

// Unwrap returns ErrUnsupported.
func (e *UnsupportedError) Unwrap() error { return ErrUnsupported }

// Doc is one document of a file.
type Doc struct {
	// Key tells the documents of a file apart: "" for a file that holds one
	// document, the message's position "#1", "#2", … (from 1) in an mbox.
	Key string
	// Title is a Markdown file's first heading or an mbox message's Subject;
	// "" for text, whose title the extraction stage decides.
	Title string
	// Text is the body text.
	Text string
	// Meta always has "format"; mbox messages add "from", "date", "subject"
	// and "message_id", and any document that could not be read in full
	// has "parse_error".
	Meta map[string]string
}

// Format returns the format File reads a file of this name as: FormatText,
// FormatMarkdown or FormatMbox, or "" when it reads none.
func Format(name string) string {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".txt", ".text":
		return FormatText
	case ".md", ".markdown":
		return FormatMarkdown
	case ".mbox":
		return FormatMbox
	}
	return ""
}

// File parses data, the content of the file called name, into documents, as
// the package doc describes. A text or Markdown file gives one Doc, an mbox
// one per message. It never returns an empty slice with a nil error. A text
// or Markdown file that is binary is a *NotTextError, matching ErrNotText;
// an mbox without a "From " line is an error matching ErrNotMbox.
func File(name string, data []byte) ([]Doc, error) {
	switch Format(name) {
	case FormatText:
		text, why := fileText(data)
		if why != "" {
			return nil, &NotTextError{Name: name, Reason: why}
		}
		return []Doc{{Text: text, Meta: map[string]string{MetaFormat: FormatText}}}, nil
	case FormatMarkdown:
		src, why := fileText(data)
		if why != "" {
			return nil, &NotTextError{Name: name, Reason: why}
		}
		title, text := markdown(src)
		return []Doc{{Title: title, Text: text, Meta: map[string]string{MetaFormat: FormatMarkdown}}}, nil
	case FormatMbox:
		var docs []Doc
		for d, err := range Mbox(bytes.NewReader(data)) {
			if err != nil {
				return nil, fmt.Errorf("parse %q: %w", name, err)
			}
			docs = append(docs, d)
		}
		return docs, nil
	}
	return nil, &UnsupportedError{Name: name, Ext: filepath.Ext(name)}
}
