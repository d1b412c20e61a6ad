package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/migration"
	"github.com/weirhq/weir/weirtype"
)

// The migration that gives a store its identity, run on a store whose
// outbox already holds messages (a weir upgraded), records the highest
// outbox id, so that those messages keep the broker ids they may have been
// published with.
func TestStoreIdentityMigrationKeepsOlderMessagesIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migratedStore(t)
	now := time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)
	ids, err := s.Executor().AddOutbox(ctx, now, []store.OutboxMessage{{Topic: "t"}, {Topic: "t"}, {Topic: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := s.Executor().OutboxIdentity(ctx)
	if err != nil || fresh.LegacyThrough != 0 {
		t.Fatalf("identity of a store made by this weir: %+v, %v; want no legacy messages", fresh, err)
	}
	for _, q := range []string{"DROP TABLE weir_store_identity", migrationSQL(t, "store_identity")} {
		if _, err := s.DB().ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	upgraded, err := s.Executor().OutboxIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if upgraded.LegacyThrough != ids[2] || upgraded.StoreID == fresh.StoreID || len(upgraded.StoreID) != 16 {
		t.Fatalf("identity made over 3 messages: %+v (before: %+v); want legacy through %d and a new id", upgraded, fresh, ids[2])
	}
}

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

// openStore returns a store, not yet migrated, on a file in the test's
// temporary directory, closed when the test ends.
func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), Config{Path: filepath.Join(t.TempDir(), "weir.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// migratedStore is openStore's store, migrated.
func migratedStore(t *testing.T) *Store {
	t.Helper()
	s := openStore(t)
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// migrationSQL returns the SQL of the migration named name.
func migrationSQL(t *testing.T, name string) string {
	t.Helper()
	ms, err := migration.Load(migrationFS, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Name == name {
			return m.SQL
		}
	}
	t.Fatalf("no %s migration", name)
	return ""
}
