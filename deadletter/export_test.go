package deadletter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/deadletter"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// Every exported line parses back to the record of its dead letter.
func TestExportRoundTrips(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	dls := slices.Concat(
		fx.bury(t0, 7, burial{}),
		fx.bury(t0.Add(time.Hour), 5, burial{kind: "embed", reason: weirtype.AbandonMaxAttempts, attempts: 3}),
	)
	var buf bytes.Buffer
	n, err := deadletter.Export(context.Background(), fx.ex, store.DeadLetterFilter{}, &buf)
	if err != nil || n != len(dls) {
		t.Fatalf("Export = %d, %v; want %d", n, err, len(dls))
	}
	if lines := bytes.Count(buf.Bytes(), []byte("\n")); lines != n {
		t.Fatalf("%d lines for %d records", lines, n)
	}
	if bytes.Contains(buf.Bytes(), []byte(`\u003c`)) {
		t.Errorf("payload characters were HTML-escaped:\n%s", buf.Bytes())
	}
	recs := parseJSONL(t, buf.Bytes())
	for i, dl := range dls {
		got, want := recs[i], deadletter.RecordOf(dl)
		if diff := sameRecord(got, want); diff != "" {
			t.Fatalf("line %d differs from dead letter %d in %s:\n%+v\n%+v", i+1, dl.ID, diff, got, want)
		}
		// The payload is the one inserted, as a value.
		var ev, orig any
		if err := json.Unmarshal(got.OriginalEvent, &ev); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(dl.Payload, &orig); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ev, orig) {
			t.Fatalf("original_event %s, want %s", got.OriginalEvent, dl.Payload)
		}
		if !got.Timestamp.Equal(dl.FailedAt) || got.FailedAt.Location() != time.UTC {
			t.Fatalf("timestamp %v, failed_at %v; want %v in UTC", got.Timestamp, got.FailedAt, dl.FailedAt)
		}
	}
	if last := recs[len(recs)-1]; last.AttemptCount != 3 || len(last.ErrorHistory) != 3 || last.AbandonedReason != weirtype.AbandonMaxAttempts {
		t.Fatalf("three-attempt record %+v", last)
	}
}

// Export reads the store a batch at a time, however many letters match,
// and f.Limit caps the total.
func TestExportPagesInBatches(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	const total = deadletter.DefaultBatchSize + 3
	all := idsOf(fx.bury(t0, total, burial{}))

	var limits []int
	ex := &hookedExecutor{DeadLetters: fx.ex, list: func(f store.DeadLetterFilter) error {
		limits = append(limits, f.Limit)
		return nil
	}}
	for _, tc := range []struct {
		name   string
		f      store.DeadLetterFilter
		want   []int64
		limits []int
	}{
		{"all", store.DeadLetterFilter{}, all, []int{500, 500}},
		{"limit over a batch", store.DeadLetterFilter{Limit: 502}, all[:502], []int{500, 2}},
		{"limit of exactly a batch", store.DeadLetterFilter{Limit: 500}, all[:500], []int{500}},
		{"after an id", store.DeadLetterFilter{AfterID: all[99], Limit: 10}, all[100:110], []int{10}},
		{"after an id to the end", store.DeadLetterFilter{AfterID: all[1]}, all[2:], []int{500, 500}},
		{"after an id, one page to the end", store.DeadLetterFilter{AfterID: all[3]}, all[4:], []int{500}},
		{"after an id, exactly a page to the end", store.DeadLetterFilter{AfterID: all[2]}, all[3:], []int{500, 500}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limits = nil
			var buf bytes.Buffer
			n, err := deadletter.Export(context.Background(), ex, tc.f, &buf)
			if err != nil || n != len(tc.want) {
				t.Fatalf("Export = %d, %v; want %d", n, err, len(tc.want))
			}
			if got := recordIDs(parseJSONL(t, buf.Bytes())); !slices.Equal(got, tc.want) {
				t.Fatalf("exported %d ids from %d to %d, want %d", len(got), got[0], got[len(got)-1], len(tc.want))
			}
			if !slices.Equal(limits, tc.limits) {
				t.Fatalf("store read with limits %v, want %v", limits, tc.limits)
			}
		})
	}
}

func TestExportFilters(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	a := idsOf(fx.bury(t0, 3, burial{kind: "extract"}))
	b := idsOf(fx.bury(t0.Add(time.Hour), 4, burial{kind: "embed", reason: weirtype.AbandonMaxAttempts}))
	c := idsOf(fx.bury(t0.Add(2*time.Hour), 2, burial{kind: "extract", reason: weirtype.AbandonTTL}))
	for _, tc := range []struct {
		name string
		f    store.DeadLetterFilter
		want []int64
	}{
		{"kind", store.DeadLetterFilter{Kind: "extract"}, sorted(a, c)},
		{"queue", store.DeadLetterFilter{Queue: "q2"}, b},
		{"reason", store.DeadLetterFilter{Reason: weirtype.AbandonTTL}, c},
		{"failed before", store.DeadLetterFilter{FailedBefore: t0.Add(time.Hour)}, a},
		{"failed after", store.DeadLetterFilter{FailedAfter: t0.Add(time.Hour)}, sorted(b, c)},
		{"ids", store.DeadLetterFilter{IDs: []int64{a[1], c[0]}}, []int64{a[1], c[0]}},
		{"empty ids match none", store.DeadLetterFilter{IDs: []int64{}}, nil},
		{"kind and limit", store.DeadLetterFilter{Kind: "extract", Limit: 4}, sorted(a, c)[:4]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			n, err := deadletter.Export(context.Background(), fx.ex, tc.f, &buf)
			if err != nil || n != len(tc.want) {
				t.Fatalf("Export = %d, %v; want %d", n, err, len(tc.want))
			}
			if got := recordIDs(parseJSONL(t, buf.Bytes())); !slices.Equal(got, tc.want) && len(got)+len(tc.want) > 0 {
				t.Fatalf("exported %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := deadletter.Export(context.Background(), fx.ex, store.DeadLetterFilter{Limit: -1}, &bytes.Buffer{}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Export with limit -1: %v, want ErrInvalid", err)
	}
}

// failingWriter accepts ok bytes, then fails.
type failingWriter struct{ ok int }

var errDiskFull = errors.New("disk full")

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.ok {
		n := w.ok
		w.ok = 0
		return n, errDiskFull
	}
	w.ok -= len(p)
	return len(p), nil
}

func TestExportErrors(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	fx.bury(t0, 3, burial{})
	n, err := deadletter.Export(context.Background(), fx.ex, store.DeadLetterFilter{}, &failingWriter{ok: 10})
	if !errors.Is(err, errDiskFull) || n != 0 {
		t.Fatalf("Export to a failing writer = %d, %v; want 0 and the write error", n, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := deadletter.Export(ctx, fx.ex, store.DeadLetterFilter{}, &bytes.Buffer{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Export with a cancelled context: %v", err)
	}
	broken := &hookedExecutor{DeadLetters: fx.ex, list: func(store.DeadLetterFilter) error { return fmt.Errorf("database is locked") }}
	if _, err := deadletter.Export(context.Background(), broken, store.DeadLetterFilter{}, &bytes.Buffer{}); err == nil {
		t.Fatal("Export with a failing store returned nil")
	}
}
