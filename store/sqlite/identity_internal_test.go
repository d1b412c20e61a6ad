package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/migration"
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
