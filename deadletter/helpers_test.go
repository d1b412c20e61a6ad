package deadletter_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/deadletter"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/sqlite"
	"github.com/weirhq/weir/weirtype"
)

var t0 = time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)

// fixture is a migrated SQLite store in the test's own directory.
type fixture struct {
	t   *testing.T
	ex  store.Executor
	seq int // names each bury's queue
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "weir.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ex: s.Executor()}
}

// burial says how bury makes its dead letters.
type burial struct {
	kind     string                 // default "extract"
	reason   weirtype.AbandonReason // default non_retryable
	attempts int                    // failed attempts, the last abandoned; default 1
}

// bury makes n dead letters, all abandoned at at, in a queue of their own,
// and returns them, lowest id first. Each has its own payload (spread over
// lines, with characters HTML escaping would touch), key and source.
func (fx *fixture) bury(at time.Time, n int, b burial) []*weirtype.DeadLetter {
	fx.t.Helper()
	ctx := context.Background()
	if b.kind == "" {
		b.kind = "extract"
	}
	if b.reason == "" {
		b.reason = weirtype.AbandonPermanent
	}
	b.attempts = max(b.attempts, 1)
	fx.seq++
	queue := fmt.Sprintf("q%d", fx.seq)
	jobs := make([]store.InsertParams, n)
	for i := range jobs {
		jobs[i] = store.InsertParams{
			Kind:           b.kind,
			Queue:          queue,
			Payload:        fmt.Appendf(nil, "{\n  \"doc\": %d,\n  \"path\": \"in/<%s>&%d.txt\"\n}", i, queue, i),
			IdempotencyKey: fmt.Sprintf("key-%s-%d", queue, i),
			Source:         fmt.Sprintf("incoming/%s/%d.txt", queue, i),
			MaxAttempts:    b.attempts,
		}
	}
	start := at.Add(-time.Duration(b.attempts+1) * time.Minute)
	if _, err := fx.ex.Insert(ctx, start, jobs); err != nil {
		fx.t.Fatal(err)
	}
	for a := 1; a <= b.attempts; a++ {
		claimAt := start.Add(time.Duration(a) * time.Minute)
		failAt := claimAt.Add(30 * time.Second)
		reason := weirtype.AbandonReason("")
		if a == b.attempts {
			failAt, reason = at, b.reason
		}
		claimed, err := fx.ex.Claim(ctx, store.ClaimParams{Now: claimAt, Queue: queue, Limit: n, Owner: "w", LeaseFor: time.Hour})
		if err != nil || len(claimed) != n {
			fx.t.Fatalf("claim of attempt %d: %d jobs, %v; want %d", a, len(claimed), err, n)
		}
		for _, j := range claimed {
			_, err := fx.ex.Fail(ctx, store.FailParams{
				Now: failAt, Lease: store.LeaseOf(j), RetryAt: failAt, Abandon: reason,
				Error: weirtype.AttemptError{Attempt: a, At: failAt, Message: fmt.Sprintf("attempt %d of job %d failed", a, j.ID), Type: "*pipeline.DecodeError"},
			})
			if err != nil {
				fx.t.Fatal(err)
			}
		}
	}
	dls, err := fx.ex.ListDeadLetters(ctx, store.DeadLetterFilter{Queue: queue})
	if err != nil || len(dls) != n {
		fx.t.Fatalf("dead letters of %s: %d, %v; want %d", queue, len(dls), err, n)
	}
	return dls
}

// stored returns the ids of every dead letter in the store.
func (fx *fixture) stored() []int64 {
	fx.t.Helper()
	dls, err := fx.ex.ListDeadLetters(context.Background(), store.DeadLetterFilter{})
	if err != nil {
		fx.t.Fatal(err)
	}
	return idsOf(dls)
}

// mustHold fails t unless the store holds exactly the dead letters want.
func (fx *fixture) mustHold(t *testing.T, want []*weirtype.DeadLetter) {
	t.Helper()
	if got := fx.stored(); !slices.Equal(got, idsOf(want)) {
		t.Fatalf("store holds %v, want %v", got, idsOf(want))
	}
}

func idsOf(dls []*weirtype.DeadLetter) []int64 {
	ids := make([]int64, len(dls))
	for i, dl := range dls {
		ids[i] = dl.ID
	}
	return ids
}

// sorted returns the ids of all of the lists, sorted.
func sorted(lists ...[]int64) []int64 {
	out := slices.Concat(lists...)
	slices.Sort(out)
	return out
}

// parseJSONL parses b as JSON Lines of records, failing the test unless
// every line is one complete JSON object that decodes to a Record with no
// unknown field, and b ends with a newline.
func parseJSONL(t *testing.T, b []byte) []deadletter.Record {
	t.Helper()
	if len(b) == 0 {
		return nil
	}
	if b[len(b)-1] != '\n' {
		t.Fatalf("JSON Lines do not end with a newline: ...%q", b[max(0, len(b)-40):])
	}
	var recs []deadletter.Record
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		if !json.Valid(sc.Bytes()) {
			t.Fatalf("line %d is not valid JSON: %s", line, sc.Bytes())
		}
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		var r deadletter.Record
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("line %d: %v: %s", line, err, sc.Bytes())
		}
		if dec.More() {
			t.Fatalf("line %d holds more than one value: %s", line, sc.Bytes())
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return recs
}

// readArchive parses the archive file at path.
func readArchive(t *testing.T, path string) []deadletter.Record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseJSONL(t, b)
}

func recordIDs(recs []deadletter.Record) []int64 {
	ids := make([]int64, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	return ids
}

// sameRecord reports how a and b differ, or "" when they are equal.
func sameRecord(a, b deadletter.Record) string {
	switch {
	case a.ID != b.ID || a.JobID != b.JobID:
		return "ids"
	case a.Kind != b.Kind || a.Queue != b.Queue || a.Source != b.Source || a.IdempotencyKey != b.IdempotencyKey:
		return "kind, queue, source or key"
	case !bytes.Equal(a.OriginalEvent, b.OriginalEvent):
		return fmt.Sprintf("original_event %s and %s", a.OriginalEvent, b.OriginalEvent)
	case a.AttemptCount != b.AttemptCount || a.LastError != b.LastError || a.ErrorType != b.ErrorType || a.AbandonedReason != b.AbandonedReason:
		return "attempts, last error or reason"
	case !a.JobCreatedAt.Equal(b.JobCreatedAt) || !a.FailedAt.Equal(b.FailedAt) || !a.Timestamp.Equal(b.Timestamp):
		return "times"
	case len(a.ErrorHistory) != len(b.ErrorHistory):
		return "error history length"
	}
	for i := range a.ErrorHistory {
		x, y := a.ErrorHistory[i], b.ErrorHistory[i]
		if x.Attempt != y.Attempt || !x.At.Equal(y.At) || x.Message != y.Message || x.Type != y.Type {
			return fmt.Sprintf("error history entry %d", i)
		}
	}
	return ""
}

// hookedExecutor lets a test see, and fail, the dead-letter calls. It is
// the store's dead-letter role alone: no more than Export and Enforce
// need.
type hookedExecutor struct {
	store.DeadLetters
	list  func(store.DeadLetterFilter) error // before each ListDeadLetters; an error fails the call
	purge func(store.DeadLetterFilter) error // likewise for PurgeDeadLetters
}

func (h *hookedExecutor) ListDeadLetters(ctx context.Context, f store.DeadLetterFilter) ([]*weirtype.DeadLetter, error) {
	if h.list != nil {
		if err := h.list(f); err != nil {
			return nil, err
		}
	}
	return h.DeadLetters.ListDeadLetters(ctx, f)
}

func (h *hookedExecutor) PurgeDeadLetters(ctx context.Context, f store.DeadLetterFilter) (int, error) {
	if h.purge != nil {
		if err := h.purge(f); err != nil {
			return 0, err
		}
	}
	return h.DeadLetters.PurgeDeadLetters(ctx, f)
}

// dirNames lists dir's entries.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}
