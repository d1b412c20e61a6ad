package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// A batch's runs of jobs without a key are one INSERT over arrays each,
// and its jobs with a key one statement each: every result is the job
// given at its position, whatever the mix, with each of its fields as
// given, and the ids follow the batch's order (which orders the claims of
// jobs of one priority and time).
func TestInsertBatchKeepsEachJobAtItsPosition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migratedStore(t)
	if _, err := s.Executor().Insert(ctx, now, []store.InsertParams{{Kind: "k", IdempotencyKey: "dup"}}); err != nil {
		t.Fatal(err)
	}
	var ps []store.InsertParams
	for i := range 40 {
		p := store.InsertParams{
			Kind:        fmt.Sprintf("kind%d", i),
			Queue:       fmt.Sprintf("q%d", i%3),
			Payload:     json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)),
			MaxAttempts: i + 1,
			Source:      fmt.Sprintf("src%d", i),
			Priority:    i % 5,
		}
		switch {
		case i%7 == 3:
			p.IdempotencyKey = fmt.Sprintf("key%d", i)
		case i == 10:
			p.IdempotencyKey = "dup"
		case i%4 == 1:
			p.ScheduledAt = now.Add(time.Duration(i) * time.Minute)
		case i%5 == 2:
			p.DeadlineAt = now.Add(time.Hour + time.Duration(i)*time.Second)
		}
		ps = append(ps, p)
	}
	res, err := s.Executor().Insert(ctx, now, ps)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(ps) {
		t.Fatalf("%d results for %d jobs", len(res), len(ps))
	}
	prev := int64(0)
	for i, p := range ps {
		r := res[i]
		want := weirtype.Inserted
		if p.IdempotencyKey == "dup" {
			want = weirtype.DuplicatePending
		}
		if r.Outcome != want || r.Job == nil {
			t.Fatalf("jobs[%d]: outcome %q, job %v; want %q", i, r.Outcome, r.Job, want)
		}
		if want != weirtype.Inserted {
			continue
		}
		j := r.Job
		if j.ID <= prev {
			t.Errorf("jobs[%d] got id %d, after %d: ids out of the batch's order", i, j.ID, prev)
		}
		prev = j.ID
		state, sched := weirtype.StateAvailable, now
		if !p.ScheduledAt.IsZero() {
			state, sched = weirtype.StateScheduled, p.ScheduledAt
		}
		if j.Kind != p.Kind || j.Queue != p.Queue || !sameJSON(j.Payload, p.Payload) || j.MaxAttempts != p.MaxAttempts ||
			j.Source != p.Source || j.Priority != p.Priority || j.IdempotencyKey != p.IdempotencyKey || j.State != state ||
			!j.ScheduledAt.Equal(sched) || !j.DeadlineAt.Equal(p.DeadlineAt) || !j.CreatedAt.Equal(now) {
			t.Errorf("jobs[%d] came back as %+v, want the job given: %+v", i, *j, p)
		}
		got, err := s.Executor().GetJob(ctx, j.ID)
		if err != nil || got.Kind != p.Kind {
			t.Errorf("jobs[%d]: stored job %d is %v (%v), want kind %s", i, j.ID, got, err, p.Kind)
		}
	}
}

// A bad job among many without a key fails the whole insert as the
// caller's bad parameter, and writes nothing.
func TestInsertBatchRefusesABadPayloadWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migratedStore(t)
	ps := []store.InsertParams{{Kind: "a"}, {Kind: "b", Payload: json.RawMessage(`{"s":"\u0000"}`)}, {Kind: "c"}}
	if _, err := s.Executor().Insert(ctx, now, ps); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("insert with a NUL in a payload: %v, want ErrInvalid", err)
	}
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM "+s.schema+".weir_jobs").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d jobs stored (%v), want none", n, err)
	}
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}
