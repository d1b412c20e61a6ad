package tempstore

import (
	"context"
	"os"
	"testing"
)

// Open gives a migrated store; Close removes its directory.
func TestOpenMigratesAndCloseRemoves(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx)
	if err != nil {
		t.Fatal(err)
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
