package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// The migration that widens the dead letters' reasons makes their table
// again: every row keeps its id and fields, and ids go on from the highest
// ever given, never reusing one.
func TestReasonMigrationKeepsDeadLettersAndTheirIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migratedStore(t)
	ex := s.Executor()
	now := time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)
	abandon := func(key string) *weirtype.DeadLetter {
		t.Helper()
		if _, err := ex.Insert(ctx, now, []store.InsertParams{{Kind: "k", IdempotencyKey: key}}); err != nil {
			t.Fatal(err)
		}
		js, err := ex.Claim(ctx, store.ClaimParams{Now: now, Limit: 1, Owner: "w", LeaseFor: time.Minute})
		if err != nil || len(js) != 1 {
			t.Fatalf("claim: %v, %v", js, err)
		}
		e := weirtype.AttemptError{Attempt: 1, At: now, Message: "boom " + key, Type: "test"}
		if _, err := ex.Fail(ctx, store.FailParams{Now: now, Lease: store.LeaseOf(js[0]), Error: e, Abandon: weirtype.AbandonPermanent}); err != nil {
			t.Fatal(err)
		}
		dls, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{JobID: js[0].ID})
		if err != nil || len(dls) != 1 {
			t.Fatalf("dead letters of job %d: %v, %v", js[0].ID, dls, err)
		}
		return dls[0]
	}
	a, b := abandon("a"), abandon("b")
	// The highest id is purged, so only AUTOINCREMENT's counter remembers it.
	if n, err := ex.PurgeDeadLetters(ctx, store.DeadLetterFilter{IDs: []int64{b.ID}}); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	if _, err := s.DB().ExecContext(ctx, migrationSQL(t, "retry_after_reason")); err != nil {
		t.Fatalf("migration again: %v", err)
	}
	got, err := ex.GetDeadLetter(ctx, a.ID)
	if err != nil || got.JobID != a.JobID || got.LastError != a.LastError || got.Reason != a.Reason || !got.FailedAt.Equal(a.FailedAt) {
		t.Fatalf("dead letter after the migration: %+v, %v; want %+v", got, err, a)
	}
	c := abandon("c")
	if c.ID <= b.ID {
		t.Fatalf("dead letter made after the migration has id %d, not above the highest given before (%d)", c.ID, b.ID)
	}
}
