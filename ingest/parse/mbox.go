package parse

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"strconv"
	"strings"
	"time"
)

// maxDepth bounds the nesting of multipart bodies.
const maxDepth = 8

var fromPrefix = []byte("From ")

// Mbox reads an mbox from r and yields its documents one at a time, as File
// does for an .mbox file, holding one message in memory at a time (and the
// text before the first "From " line, if any). Keys are given in order from
// "#1". A read error, or ErrNotMbox when r holds no "From " line, is
// yielded last, with a zero Doc.
func Mbox(r io.Reader) iter.Seq2[Doc, error] {
	return func(yield func(Doc, error) bool) {
		s := mboxScanner{r: bufio.NewReaderSize(r, 64<<10)}
		pre, from, err := s.next()
		switch {
		case err != nil:
			yield(Doc{}, err)
			return
		case !from:
			yield(Doc{}, ErrNotMbox)
			return
		}
		n := 0
		emit := func(d Doc) bool {
			n++
			d.Key = "#" + strconv.Itoa(n)
			return yield(d, nil)
		}
		if len(bytes.TrimSpace(pre)) > 0 {
			d := Doc{Text: cleanText(pre), Meta: map[string]string{
				MetaFormat:     FormatMbox,
				MetaParseError: `text before the first "From " line`,
			}}
			if !emit(d) {
				return
			}
		}
		s.inMessage = true
		var mr messageReader
		for {
			msg, from, err := s.next()
			if err != nil {
				yield(Doc{}, err)
				return
			}
			if !emit(mr.message(msg)) || !from {
				return
			}
		}
	}
}

// mboxScanner splits an mbox into messages, a line at a time.
type mboxScanner struct {
	r *bufio.Reader
	// buf holds the message being read; it is reused for the next one.
	buf []byte
	// line holds a line longer than r's buffer.
	line []byte
	// inMessage is set once the first "From " line is read: before it,
	// lines are the preamble, kept as they are.
	inMessage bool
	started   bool
	eof       bool
}

// next returns the lines up to the next "From " line with CRLF made LF
// and, in a message, mboxrd's quoting undone: a line of one or more '>'
// followed by "From " loses one '>'. from reports that a "From " line
// ended them (it is consumed: it is the envelope of the next message, not
// part of it); false is the end of the input. The slice is valid until the
// next call.
func (s *mboxScanner) next() (msg []byte, from bool, err error) {
	s.buf = s.buf[:0]
	for !s.eof {
		line, err := s.readLine()
		switch {
		case err == io.EOF:
			s.eof = true
		case err != nil:
			return nil, false, err
		}
		if !s.started {
			s.started = true
			line = bytes.TrimPrefix(line, bomUTF8)
		}
		if bytes.HasPrefix(line, fromPrefix) {
			return s.buf, true, nil
		}
		if n := len(line); n >= 2 && line[n-2] == '\r' && line[n-1] == '\n' {
			line = append(line[:n-2], '\n')
		}
		if s.inMessage {
			if q := bytes.TrimLeft(line, ">"); len(q) < len(line) && bytes.HasPrefix(q, fromPrefix) {
				line = line[1:]
			}
		}
		s.buf = append(s.buf, line...)
	}
	return s.buf, false, nil
}

// readLine returns the next line with its LF, or what is left at the end
// with io.EOF. The slice is valid until the next call.
func (s *mboxScanner) readLine() ([]byte, error) {
	line, err := s.r.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return line, err
	}
	s.line = append(s.line[:0], line...)
	for err == bufio.ErrBufferFull {
		line, err = s.r.ReadSlice('\n')
		s.line = append(s.line, line...)
	}
	return s.line, err
}

// messageReader reads messages, with buffers kept from one to the next.
type messageReader struct {
	r  bytes.Reader
	br *bufio.Reader
}

// message reads one message, whose line ends are LF. A message that cannot
// be read is returned raw, with Meta["parse_error"]. raw is not kept, and
// may be changed.
func (mr *messageReader) message(raw []byte) Doc {
	meta := map[string]string{MetaFormat: FormatMbox}
	if len(bytes.TrimSpace(raw)) == 0 {
		meta[MetaParseError] = "empty message"
		return Doc{Text: cleanText(raw), Meta: meta}
	}
	// The header ends at the first blank line; read it alone, so that the
	// body is a part of raw rather than a copy.
	head, body := raw, []byte(nil)
	switch i := bytes.Index(raw, []byte("\n\n")); {
	case bytes.HasPrefix(raw, []byte("\n")):
		head, body = raw[:1], raw[1:]
	case i >= 0:
		head, body = raw[:i+2], raw[i+2:]
	default:
		// Headers only: give net/mail the blank line that ends them.
		head = append(bytes.TrimRight(raw, "\n"), '\n', '\n')
	}
	mr.r.Reset(head)
	if mr.br == nil {
		mr.br = bufio.NewReader(&mr.r)
	} else {
		mr.br.Reset(&mr.r)
	}
	m, err := mail.ReadMessage(mr.br) // which reads through mr.br, not a buffer of its own

	if err != nil {
		meta[MetaParseError] = cleanString("read message: " + err.Error())
		return Doc{Text: cleanText(raw), Meta: meta}
	}
	subject := decodeHeader(m.Header.Get("Subject"))
	meta[MetaSubject] = subject
	meta[MetaFrom] = decodeHeader(m.Header.Get("From"))
	meta[MetaDate] = cleanString(strings.TrimSpace(m.Header.Get("Date")))
	if t, err := parseDate(meta[MetaDate]); err == nil {
		meta[MetaDate] = t.Format(time.RFC3339)
	}
	meta[MetaMessageID] = cleanString(strings.TrimSpace(m.Header.Get("Message-Id")))

	var d decoder
	text, ok := d.entity(m.Header, body, 0)
	if !ok {
		d.problem("no text body (%s)", mediaTypeOf(m.Header))
	}
	if len(d.problems) > 0 {
		meta[MetaParseError] = cleanString(strings.Join(d.problems, "; "))
	}
	return Doc{Title: subject, Text: strings.TrimSpace(text), Meta: meta}
}

// parseDate reads a Date header: RFC 5322's usual form first, which
// net/mail also reads but only after trying other forms, at the cost of an
// error for each.
func parseDate(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC1123Z, v); err == nil {
		return t, nil
	}
	return mail.ParseDate(v)
}

// header is what a message's and a part's headers have in common.
type header interface{ Get(string) string }

// decoder decodes a message body and collects what went wrong.
type decoder struct{ problems []string }

func (d *decoder) problem(format string, args ...any) {
	d.problems = append(d.problems, fmt.Sprintf(format, args...))
}

// entity returns the text of a body with header h. ok is false when it holds
// no text at all (an attachment, an image).
func (d *decoder) entity(h header, body []byte, depth int) (text string, ok bool) {
	body = d.transferDecode(h, body)
	mt, params := d.mediaType(h)
	switch {
	case strings.HasPrefix(mt, "multipart/"):
		if depth >= maxDepth {
			d.problem("multipart nested deeper than %d", maxDepth)
			return cleanText(body), true
		}
		return d.multipart(mt, params, body, depth)
	case mt == "text/html":
		return d.text(mt, params, body, true)
	case strings.HasPrefix(mt, "text/"):
		return d.text(mt, params, body, false)
	}
	return "", false
}

func mediaTypeOf(h header) string {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil && mt == "" {
		return "text/plain"
	}
	return mt
}

// mediaType returns the lower-case media type and its parameters; text/plain
// when the header is missing or cannot be read.
func (d *decoder) mediaType(h header) (string, map[string]string) {
	ct := h.Get("Content-Type")
	if strings.TrimSpace(ct) == "" {
		return "text/plain", nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	switch {
	case err == nil:
		return mt, params
	case errors.Is(err, mime.ErrInvalidMediaParameter) && mt != "":
		d.problem("content-type %q: %v", ct, err)
		return mt, params
	}
	d.problem("content-type %q: %v; read as text/plain", ct, err)
	return "text/plain", nil
}

// transferDecode undoes the Content-Transfer-Encoding. On failure it notes
// the problem and returns body as it is.
func (d *decoder) transferDecode(h header, body []byte) []byte {
	switch cte := strings.ToLower(strings.TrimSpace(h.Get("Content-Transfer-Encoding"))); cte {
	case "", "7bit", "8bit", "binary":
		return body
	case "quoted-printable":
		var out bytes.Buffer
		out.Grow(len(body))
		if _, err := out.ReadFrom(quotedprintable.NewReader(bytes.NewReader(body))); err != nil {
			d.problem("quoted-printable: %v", err)
			return body
		}
		return out.Bytes()
	case "base64":
		clean := make([]byte, 0, len(body))
		for _, c := range body {
			if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
				clean = append(clean, c)
			}
		}
		out := make([]byte, base64.StdEncoding.DecodedLen(len(clean)))
		n, err := base64.StdEncoding.Decode(out, clean)
		if err != nil {
			// Some mailers leave the padding out. Unpadded input can decode
			// to more than StdEncoding.DecodedLen says: size out again.
			raw := bytes.TrimRight(clean, "=")
			out = make([]byte, base64.RawStdEncoding.DecodedLen(len(raw)))
			n, err = base64.RawStdEncoding.Decode(out, raw)
		}
		if err != nil {
			d.problem("base64: %v", err)
			return body
		}
		return out[:n]
	default:
		d.problem("unknown content-transfer-encoding %q", cte)
		return body
	}
}

// text converts a text body to UTF-8 from its charset parameter, and from
// HTML to text when html is set. A body that is binary data (a NUL, or
// many control characters, as for a text file) is not text: ok is false
// and a problem says why.
func (d *decoder) text(mt string, params map[string]string, body []byte, html bool) (string, bool) {
	s, problem := decodeCharset(params["charset"], body)
	if problem != "" {
		d.problem("%s", problem)
	}
	if _, why := checkText(s); why != "" {
		d.problem("%s body %s", mt, why)
		return "", false
	}
	if html {
		s = htmlText(s)
	}
	return s, true
}

// multipart returns the text of a multipart body: the text/plain
// alternative of a multipart/alternative, every inline text/plain part of
// another multipart; text/html only when there is no text/plain.
func (d *decoder) multipart(mt string, params map[string]string, body []byte, depth int) (string, bool) {
	boundary := params["boundary"]
	if boundary == "" {
		d.problem("%s without a boundary; read as text", mt)
		return cleanText(body), true
	}
	r := multipart.NewReader(bytes.NewReader(body), boundary)
	var plain, html []string
	for {
		p, err := r.NextRawPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			d.problem("%s: %v", mt, err)
			break
		}
		pb, err := io.ReadAll(p)
		if err != nil {
			d.problem("%s part: %v", mt, err)
			break
		}
		if disp, _, _ := mime.ParseMediaType(p.Header.Get("Content-Disposition")); disp == "attachment" {
			continue
		}
		pmt := mediaTypeOf(p.Header)
		switch {
		case pmt == "text/plain" || strings.HasPrefix(pmt, "multipart/"):
			if t, ok := d.entity(p.Header, pb, depth+1); ok {
				plain = append(plain, t)
			}
		case pmt == "text/html":
			if t, ok := d.entity(p.Header, pb, depth+1); ok {
				html = append(html, t)
			}
		}
		if mt == "multipart/alternative" && len(plain) > 0 {
			break
		}
	}
	switch {
	case len(plain) > 0:
		return strings.Join(trimAll(plain), "\n\n"), true
	case len(html) > 0:
		return strings.Join(trimAll(html), "\n\n"), true
	}
	return "", false
}

func trimAll(ss []string) []string {
	for i, s := range ss {
		ss[i] = strings.TrimSpace(s)
	}
	return ss
}

// decodeHeader decodes the RFC 2047 encoded words of a header value. A value
// it cannot decode is kept as it is written. Either way it is made valid
// UTF-8 without NUL, as cleanString does.
func decodeHeader(v string) string {
	dec := mime.WordDecoder{CharsetReader: charsetReader}
	s, err := dec.DecodeHeader(v)
	if err != nil {
		s = v
	}
	return cleanString(strings.TrimSpace(s))
}
