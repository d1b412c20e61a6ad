package tempstore

import (
	"context"
	"os"
	"strings"
	"testing"
)

// Open gives a migrated store with the tables asked for; Close removes
// its directory.
func TestOpenMigratesAndCloseRemoves(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(ctx, `CREATE TABLE orders (id INTEGER PRIMARY KEY)`)
	if _, err := s.DB().ExecContext(ctx, `INSERT INTO orders (id) VALUES (1)`); err != nil {
		t.Fatalf("the example's table: %v", err)
	}
	cur, latest, err := s.SchemaVersion(ctx)
	if err != nil || cur == 0 || cur != latest {
		t.Fatalf("schema version %d of %d, %v: want migrated", cur, latest, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Fatalf("%s after Close: %v, want it removed", s.Dir, err)
	}
}

// A statement that fails fails Open, naming it, and leaves no directory.
func TestOpenFailsOnABadTable(t *testing.T) {
	_, err := Open(context.Background(), `CREATE TABLE`)
	if err == nil || !strings.Contains(err.Error(), "CREATE TABLE") {
		t.Fatalf("Open with a bad statement: %v, want an error naming it", err)
	}
}
