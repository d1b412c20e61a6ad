package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/migration"
)

// The migration that gives a schema its identity, run on a schema whose
// outbox already holds messages (a weir upgraded), records the highest
// outbox id, so that those messages keep the broker ids they may have been
// published with.
func TestStoreIdentityMigrationKeepsOlderMessagesIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migratedStore(t)
	ids, err := s.Executor().AddOutbox(ctx, now, []store.OutboxMessage{{Topic: "t"}, {Topic: "t"}, {Topic: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := s.Executor().OutboxIdentity(ctx)
	if err != nil || fresh.LegacyThrough != 0 {
		t.Fatalf("identity of a schema made by this weir: %+v, %v; want no legacy messages", fresh, err)
	}
	sql := identityMigration(t)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, q := range []string{"SET LOCAL search_path TO " + pgx.Identifier{s.schema}.Sanitize(), "DROP TABLE weir_store_identity", sql} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	upgraded, err := s.Executor().OutboxIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if upgraded.LegacyThrough != ids[2] || upgraded.StoreID == fresh.StoreID || len(upgraded.StoreID) != 16 {
		t.Fatalf("identity made over 3 messages: %+v (before: %+v); want legacy through %d and a new id", upgraded, fresh, ids[2])
	}
}

// identityMigration returns the SQL of the migration that makes
// weir_store_identity.
func identityMigration(t *testing.T) string {
	t.Helper()
	ms, err := migration.Load(migrationFS, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Name == "store_identity" {
			return m.SQL
		}
	}
	t.Fatal("no store_identity migration")
	return ""
}

// weir_limit_window and store.LimitWindow agree to the microsecond, before
// 1970 and far after it, so that what the claim counts and what the
// operators' tools show are one window.
func TestLimitWindowAgreesWithGo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migratedStore(t)
	for _, c := range []struct {
		at  time.Time
		per time.Duration
	}{
		{time.Date(2026, 1, 21, 15, 30, 59, 999999000, time.UTC), time.Minute},
		{time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC), time.Minute},
		{time.Date(1969, 12, 31, 23, 59, 59, 500000000, time.UTC), time.Second},
		{time.Date(1900, 6, 1, 0, 0, 0, 123000, time.UTC), 7 * time.Millisecond},
		{time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC), time.Millisecond},
		{time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC), 24 * time.Hour},
		{time.Date(2026, 11, 25, 22, 0, 0, 1000, time.UTC), 90 * time.Second},
	} {
		var got time.Time
		if err := s.pool.QueryRow(ctx, "SELECT "+s.sql.schema+".weir_limit_window($1::timestamptz, $2)",
			c.at, c.per.Microseconds()).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if want := store.LimitWindow(c.at, c.per); !got.Equal(want) {
			t.Errorf("window of %v at %v: PostgreSQL %v, Go %v", c.per, c.at, got.UTC(), want)
		}
	}
}
