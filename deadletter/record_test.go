package deadletter_test

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/deadletter"
	"github.com/weirhq/weir/weirtype"
)

// The record's JSON field names are a format other tools read: they must
// not change by accident.
func TestRecordFieldNames(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	dl := &weirtype.DeadLetter{
		ID: 7, JobID: 42, Kind: "extract", Queue: "default", Source: "incoming/P001.txt", IdempotencyKey: "k1",
		Payload:  json.RawMessage(`{"path": "P001.txt"}`),
		Attempts: 2, LastError: "not UTF-8", ErrorType: "*pipeline.DecodeError", Reason: weirtype.AbandonPermanent,
		Errors: []weirtype.AttemptError{
			{Attempt: 1, At: t0.In(paris), Message: "timeout", Type: "*net.OpError"},
			{Attempt: 2, At: t0.Add(time.Minute), Message: "not UTF-8", Type: "*pipeline.DecodeError"},
		},
		JobCreatedAt: t0.Add(-time.Hour).In(paris),
		FailedAt:     t0.Add(time.Minute).In(paris),
	}
	b, err := json.Marshal(deadletter.RecordOf(dl))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"id", "job_id", "kind", "queue", "source", "idempotency_key", "original_event", "attempt_count",
		"last_error", "error_type", "abandoned_reason", "error_history", "job_created_at", "failed_at", "timestamp",
	}
	if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("fields %v, want %v", got, want)
	}
	checks := map[string]any{
		"id": 7.0, "job_id": 42.0, "idempotency_key": "k1", "attempt_count": 2.0, "last_error": "not UTF-8",
		"error_type": "*pipeline.DecodeError", "abandoned_reason": "non_retryable", "source": "incoming/P001.txt",
		// RFC 3339 in UTC, whatever the zone the times came in.
		"job_created_at": "2026-01-21T14:30:00Z", "failed_at": "2026-01-21T15:31:00Z", "timestamp": "2026-01-21T15:31:00Z",
	}
	for k, v := range checks {
		if m[k] != v {
			t.Errorf("%s = %#v, want %#v", k, m[k], v)
		}
	}
	if ev, ok := m["original_event"].(map[string]any); !ok || ev["path"] != "P001.txt" {
		t.Errorf("original_event = %#v, want the payload as an object", m["original_event"])
	}
	hist, ok := m["error_history"].([]any)
	if !ok || len(hist) != 2 {
		t.Fatalf("error_history = %#v", m["error_history"])
	}
	first := hist[0].(map[string]any)
	if got := slices.Sorted(maps.Keys(first)); !slices.Equal(got, []string{"at", "attempt", "message", "type"}) {
		t.Errorf("error_history entry fields %v", got)
	}
	if first["at"] != "2026-01-21T15:30:00Z" || first["attempt"] != 1.0 || first["message"] != "timeout" || first["type"] != "*net.OpError" {
		t.Errorf("error_history[0] = %#v", first)
	}
}

func TestRecordOfPayloads(t *testing.T) {
	for _, tc := range []struct {
		name, payload, want string
	}{
		{"compacted onto one line", "{\n  \"a\": [1, 2],\n  \"b\": \"<x>\"\n}", `{"a":[1,2],"b":"<x>"}`},
		{"empty is null", "", "null"},
		{"not JSON is kept as a string", `{"a":`, `"{\"a\":"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := deadletter.RecordOf(&weirtype.DeadLetter{Payload: json.RawMessage(tc.payload)})
			if string(r.OriginalEvent) != tc.want {
				t.Fatalf("original_event %s, want %s", r.OriginalEvent, tc.want)
			}
			if _, err := json.Marshal(r); err != nil {
				t.Fatalf("record does not encode: %v", err)
			}
		})
	}
}

func TestRecordOfNoErrorsIsEmptyArray(t *testing.T) {
	b, err := json.Marshal(deadletter.RecordOf(&weirtype.DeadLetter{Payload: json.RawMessage(`{}`)}))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if string(m["error_history"]) != "[]" {
		t.Fatalf("error_history %s, want []", m["error_history"])
	}
}
