package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// maxParamLen bounds a text parameter (a kind, a queue, a name), in bytes.
const maxParamLen = 200

// query reads a request's query parameters: each known name at most once
// (but those that list), none unknown.
type query struct {
	v   url.Values
	err error
}

// parseQuery reads r's query, allowing the names in known; a name that
// may repeat ends with "*". An unknown name, a repeated one, or a query
// that does not parse is an error.
func parseQuery(r *http.Request, known ...string) (*query, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, bad("bad query string: %v", err)
	}
	names := make([]string, 0, len(v))
	for name := range v {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		switch {
		case slices.Contains(known, name+"*"):
		case slices.Contains(known, name):
			if len(v[name]) > 1 {
				return nil, bad("parameter %q given %d times: give it once", name, len(v[name]))
			}
		default:
			plain := make([]string, len(known))
			for i, k := range known {
				plain[i] = strings.TrimSuffix(k, "*")
			}
			return nil, bad("unknown parameter %s (known: %s)", clip(name), strings.Join(plain, ", "))
		}
	}
	return &query{v: v}, nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return strconv.Quote(s)
}

// text returns the parameter's value: at most maxParamLen bytes of valid
// UTF-8 without NUL.
func (q *query) text(name string) string {
	s := q.v.Get(name)
	q.checkText(name, s)
	return s
}

// texts returns the values of a parameter that may repeat, each checked
// as text does.
func (q *query) texts(name string) []string {
	for _, s := range q.v[name] {
		q.checkText(name, s)
	}
	return q.v[name]
}

func (q *query) checkText(name, s string) {
	if q.err != nil {
		return
	}
	q.err = checkText(name, s, false)
}

// checkText returns a 400 error unless s is at most maxParamLen bytes of
// valid UTF-8 without NUL, and, when strict, without control characters.
func checkText(name, s string, strict bool) error {
	switch {
	case len(s) > maxParamLen:
		return bad("%s is %d bytes long, at most %d", name, len(s), maxParamLen)
	case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
		return bad("%s %s is not valid text", name, clip(s))
	case strict && strings.ContainsFunc(s, unicode.IsControl):
		return bad("%s %s holds a control character", name, clip(s))
	}
	return nil
}

// limit returns the limit parameter: DefaultLimit when absent, 1 to
// MaxLimit otherwise.
func (q *query) limit() int {
	s := q.v.Get("limit")
	if s == "" || q.err != nil {
		return DefaultLimit
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxLimit {
		q.err = bad("limit %s: want a whole number from 1 to %d", clip(s), MaxLimit)
	}
	return n
}

// id returns the parameter as a positive id, 0 when absent.
func (q *query) id(name string) int64 {
	s := q.v.Get(name)
	if s == "" || q.err != nil {
		return 0
	}
	n, err := parseID(s)
	if err != nil {
		q.err = bad("%s %s: want a positive whole number (a cursor from next_%s)", name, clip(s), name)
	}
	return n
}

// time returns the parameter as a time, zero when absent: an RFC 3339
// time, or an age before now (a Go duration such as 72h).
func (q *query) time(name string, now time.Time) time.Time {
	s := q.v.Get(name)
	if s == "" || q.err != nil {
		return time.Time{}
	}
	t, err := parseTime(s, now)
	if err != nil {
		q.err = bad("%s %s: %v", name, clip(s), err)
	}
	return t
}

// duration returns the parameter as a positive duration, def when absent.
func (q *query) duration(name string, def time.Duration) time.Duration {
	s := q.v.Get(name)
	if s == "" || q.err != nil {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		q.err = bad("%s %s: want a positive duration such as 10m or 2h", name, clip(s))
		return def
	}
	return d
}

// parseID reads a positive decimal id.
func parseID(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return 0, errors.New("not a positive whole number")
	}
	return n, nil
}

// maxAge bounds an age parameter, so that now minus it stays a time the
// stores keep: about 100 years.
const maxAge = 100 * 365 * 24 * time.Hour

// parseTime reads an RFC 3339 time, or an age before now.
func parseTime(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 || d > maxAge {
			return time.Time{}, fmt.Errorf("an age must be from 0 to %v", maxAge)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errors.New("want an RFC 3339 time such as 2026-01-21T15:30:00Z, or an age such as 72h")
	}
	if t.IsZero() || t.Year() < 1970 {
		return time.Time{}, errors.New("a time before 1970 matches nothing or everything: give a time from 1970 on")
	}
	return t, nil
}

// states reads the state parameter: repeated, or comma-separated.
func (q *query) states() []weirtype.State {
	var out []weirtype.State
	for _, v := range q.v["state"] {
		for s := range strings.SplitSeq(v, ",") {
			st := weirtype.State(strings.TrimSpace(s))
			if q.err != nil {
				return nil
			}
			if !st.Valid() {
				q.err = bad("state %s is unknown: want one of %v", clip(string(st)), weirtype.States())
				return nil
			}
			out = append(out, st)
		}
	}
	return out
}

// checkReason returns an error unless r is empty or a known reason.
func checkReason(r weirtype.AbandonReason) error {
	if r != "" && !r.Valid() {
		return bad("reason %s is unknown: want one of %v", clip(string(r)), weirtype.AbandonReasons())
	}
	return nil
}

// jobID returns the parameter job_id as a job's id, 0 when absent.
func (q *query) jobID() int64 {
	s := q.v.Get("job_id")
	if s == "" || q.err != nil {
		return 0
	}
	n, err := parseID(s)
	if err != nil {
		q.err = bad("job_id %s: want a job's id, a positive whole number", clip(s))
	}
	return n
}

// deadLetterFilter reads the filter parameters of the dead letters: kind,
// queue, reason, job_id, failed_before, failed_after.
func (q *query) deadLetterFilter(now time.Time) store.DeadLetterFilter {
	f := store.DeadLetterFilter{
		Kind:         q.text("kind"),
		Queue:        q.text("queue"),
		Reason:       weirtype.AbandonReason(q.text("reason")),
		JobID:        q.jobID(),
		FailedBefore: q.time("failed_before", now),
		FailedAfter:  q.time("failed_after", now),
	}
	if q.err == nil {
		q.err = checkReason(f.Reason)
	}
	return f
}

// deadLetterParams are the names deadLetterFilter reads.
var deadLetterParams = []string{"kind", "queue", "reason", "job_id", "failed_before", "failed_after"}

// FilterBody is the filter of a bulk dead-letter request's body; zero
// fields match everything.
type FilterBody struct {
	Kind   string `json:"kind"`
	Queue  string `json:"queue"`
	Reason string `json:"reason"`
	// JobID keeps the dead letters of that job; 0 for all.
	JobID int64 `json:"job_id"`
	// FailedBefore and FailedAfter are RFC 3339 times or ages (72h).
	FailedBefore string `json:"failed_before"`
	FailedAfter  string `json:"failed_after"`
}

// filter returns the store's filter of b.
func (b FilterBody) filter(now time.Time) (store.DeadLetterFilter, error) {
	v := url.Values{}
	for name, s := range map[string]string{"kind": b.Kind, "queue": b.Queue, "reason": b.Reason, "failed_before": b.FailedBefore, "failed_after": b.FailedAfter} {
		if s != "" {
			v.Set(name, s)
		}
	}
	if b.JobID != 0 {
		v.Set("job_id", strconv.FormatInt(b.JobID, 10))
	}
	q := &query{v: v}
	f := q.deadLetterFilter(now)
	if q.err != nil {
		return store.DeadLetterFilter{}, fmt.Errorf("filter: %w", q.err)
	}
	return f, nil
}

// decodeBody reads r's JSON body, at most max bytes, into v: one object,
// with no unknown field and no key given twice. Every handler that reads a
// body reads it here.
func decodeBody(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	if err := checkJSONType(r); err != nil {
		return &badRequest{status: http.StatusUnsupportedMediaType, msg: err.Error()}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err == nil {
		err = checkDuplicateKeys(body)
	}
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		err = dec.Decode(v)
		if err == nil {
			// One value only: anything after it but space is an error.
			if _, err2 := dec.Token(); err2 != io.EOF {
				err = errors.New("more than one JSON value")
			}
		}
	}
	var mbe *http.MaxBytesError
	var dup *duplicateKeyError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &mbe):
		return &badRequest{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("request body over %d bytes", mbe.Limit)}
	case errors.As(err, &dup):
		return bad("bad JSON body: %v", dup)
	case errors.Is(err, io.EOF):
		return bad("empty request body: want a JSON object")
	default:
		return bad("bad JSON body: %v", err)
	}
}

// duplicateKeyError is a JSON object that names a key twice, which a
// decoder would take silently, the last value winning.
type duplicateKeyError struct{ path string }

func (e *duplicateKeyError) Error() string {
	return fmt.Sprintf("key %s given twice: give each key once", clip(e.path))
}

// checkDuplicateKeys returns a *duplicateKeyError naming the first key that
// an object of the JSON text data gives twice, as its path ("filter.kind").
// Keys are compared as the decoder matches them to fields, without regard
// to case: "ids" and "IDs" are one key. Text that is not JSON is left to
// the decoder to refuse.
func checkDuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		object bool
		keys   map[string]bool
		path   string // of the object or array
		key    string // the key whose value is read next (objects)
		atKey  bool   // the next token of an object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or not JSON: the decoder says which
		}
		top := (*frame)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.atKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			key, _ := tok.(string)
			fold := strings.ToLower(key)
			p := key
			if top.path != "" {
				p = top.path + "." + key
			}
			if top.keys[fold] {
				return &duplicateKeyError{path: p}
			}
			top.keys[fold] = true
			top.key, top.atKey = p, false
			continue
		}
		// A value (or the end of an array): of the object's key, of an
		// array, or the top.
		path := ""
		if top != nil {
			if top.object {
				path = top.key
				top.atKey = true
			} else {
				path = top.path + "[]"
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, keys: map[string]bool{}, path: path, atKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{path: path})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// idsBody is the body of a bulk operation by id.
type idsBody struct {
	IDs []int64 `json:"ids"`
}

// checkIDs returns ids each once, in their order, or an error when there
// are none, too many, or one is not positive.
func checkIDs(ids []int64) ([]int64, error) {
	if len(ids) == 0 {
		return nil, bad(`no ids: want {"ids": [1, 2, ...]}`)
	}
	if len(ids) > MaxBulkIDs {
		return nil, bad("%d ids: at most %d at a time", len(ids), MaxBulkIDs)
	}
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		if id < 1 {
			return nil, bad("id %d is not positive", id)
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// pathID reads the path's {id} as a positive id.
func pathID(r *http.Request, what string) (int64, error) {
	s := r.PathValue("id")
	id, err := parseID(s)
	if err != nil {
		return 0, bad("%s id %s: want a positive whole number", what, clip(s))
	}
	return id, nil
}
