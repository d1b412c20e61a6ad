package parse

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
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

// mbox splits data, whose line ends are LF, into messages and reads each.
func mbox(data []byte) ([]Doc, error) {
	var starts []int
	for i := 0; i < len(data); {
		if bytes.HasPrefix(data[i:], fromPrefix) {
			starts = append(starts, i)
		}
		nl := bytes.IndexByte(data[i:], '\n')
		if nl < 0 {
			break
		}
		i += nl + 1
	}
	if len(starts) == 0 {
		return nil, ErrNotMbox
	}
	docs := make([]Doc, 0, len(starts)+1)
	if pre := data[:starts[0]]; len(bytes.TrimSpace(pre)) > 0 {
		docs = append(docs, Doc{Text: string(pre), Meta: map[string]string{
			MetaFormat:     FormatMbox,
			MetaParseError: `text before the first "From " line`,
		}})
	}
	for k, start := range starts {
		end := len(data)
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		msg := data[start:end]
		if nl := bytes.IndexByte(msg, '\n'); nl >= 0 {
			msg = msg[nl+1:] // the From_ line is the envelope, not the message
		} else {
			msg = nil
		}
		docs = append(docs, message(unquoteFrom(msg)))
	}
	for i := range docs {
		docs[i].Key = "#" + strconv.Itoa(i+1)
	}
	return docs, nil
}

// unquoteFrom removes one '>' from each line of one or more '>' followed by
// "From ", undoing mboxrd (and mboxo) quoting.
func unquoteFrom(msg []byte) []byte {
	if !bytes.Contains(msg, []byte(">From ")) {
		return msg
	}
	out := make([]byte, 0, len(msg))
	for len(msg) > 0 {
		line := msg
		if nl := bytes.IndexByte(msg, '\n'); nl >= 0 {
			line = msg[:nl+1]
		}
		msg = msg[len(line):]
		if q := bytes.TrimLeft(line, ">"); len(q) < len(line) && bytes.HasPrefix(q, fromPrefix) {
			line = line[1:]
		}
		out = append(out, line...)
	}
	return out
}

// message reads one message. A message that cannot be read is returned raw,
// with Meta["parse_error"].
func message(raw []byte) Doc {
	meta := map[string]string{MetaFormat: FormatMbox}
	if len(bytes.TrimSpace(raw)) == 0 {
		meta[MetaParseError] = "empty message"
		return Doc{Text: string(raw), Meta: meta}
	}
	in := raw
	if !bytes.HasPrefix(in, []byte("\n")) && !bytes.Contains(in, []byte("\n\n")) {
		// Headers only: give net/mail the blank line that ends them.
		in = make([]byte, 0, len(raw)+2)
		in = append(append(in, bytes.TrimRight(raw, "\n")...), '\n', '\n')
	}
	m, err := mail.ReadMessage(bytes.NewReader(in))
	if err != nil {
		meta[MetaParseError] = "read message: " + err.Error()
		return Doc{Text: string(raw), Meta: meta}
	}
	subject := decodeHeader(m.Header.Get("Subject"))
	meta[MetaSubject] = subject
	meta[MetaFrom] = decodeHeader(m.Header.Get("From"))
	meta[MetaDate] = strings.TrimSpace(m.Header.Get("Date"))
	if t, err := mail.ParseDate(meta[MetaDate]); err == nil {
		meta[MetaDate] = t.Format(time.RFC3339)
	}
	meta[MetaMessageID] = strings.TrimSpace(m.Header.Get("Message-Id"))

	body, err := io.ReadAll(m.Body)
	if err != nil { // cannot happen with a bytes.Reader, but say so if it does
		meta[MetaParseError] = "read body: " + err.Error()
		return Doc{Title: subject, Text: string(raw), Meta: meta}
	}
	var d decoder
	text, ok := d.entity(m.Header, body, 0)
	if !ok {
		d.problem("no text body (%s)", mediaTypeOf(m.Header))
	}
	if len(d.problems) > 0 {
		meta[MetaParseError] = strings.Join(d.problems, "; ")
	}
	return Doc{Title: subject, Text: strings.TrimSpace(text), Meta: meta}
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
			return string(body), true
		}
		return d.multipart(mt, params, body, depth)
	case mt == "text/html":
		return htmlText(d.charset(params, body)), true
	case strings.HasPrefix(mt, "text/"):
		return d.charset(params, body), true
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
		out, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(body)))
		if err != nil {
			d.problem("quoted-printable: %v", err)
			return body
		}
		return out
	case "base64":
		clean := bytes.Map(func(r rune) rune {
			if r == ' ' || r == '\t' || r == '\r' || r == '\n' {
				return -1
			}
			return r
		}, body)
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

// charset converts a text body to UTF-8 from its charset parameter.
func (d *decoder) charset(params map[string]string, body []byte) string {
	cs := params["charset"]
	s, err := toUTF8(cs, body)
	if err != nil {
		d.problem("%v", err)
	}
	return s
}

// multipart returns the text of a multipart body: the text/plain
// alternative of a multipart/alternative, every inline text/plain part of
// another multipart; text/html only when there is no text/plain.
func (d *decoder) multipart(mt string, params map[string]string, body []byte, depth int) (string, bool) {
	boundary := params["boundary"]
	if boundary == "" {
		d.problem("%s without a boundary; read as text", mt)
		return string(body), true
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
// it cannot decode is returned as it is.
func decodeHeader(v string) string {
	dec := mime.WordDecoder{CharsetReader: charsetReader}
	s, err := dec.DecodeHeader(v)
	if err != nil {
		return strings.TrimSpace(v)
	}
	return strings.TrimSpace(s)
}
