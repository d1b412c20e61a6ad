package weirtype_test

import (
	"testing"

	"github.com/weirhq/weir/weirtype"
)

func TestIdempotencyKey(t *testing.T) {
	a := weirtype.IdempotencyKey("incoming", "P001/session.txt", `"0x8DC1"`)
	if len(a) != 64 {
		t.Fatalf("key %q is not hex SHA-256", a)
	}
	if a != weirtype.IdempotencyKey("incoming", "P001/session.txt", `"0x8DC1"`) {
		t.Fatal("same parts, different keys")
	}
	if a == weirtype.IdempotencyKey("incoming", "P001/session.txt", `"0x8DC2"`) {
		t.Fatal("a new ETag kept the key")
	}
	if weirtype.IdempotencyKey("ab", "c") == weirtype.IdempotencyKey("a", "bc") {
		t.Fatal("part boundaries are not part of the key")
	}
}

func TestStates(t *testing.T) {
	for _, s := range weirtype.States() {
		if !s.Valid() {
			t.Errorf("%s not valid", s)
		}
	}
	if weirtype.State("bogus").Valid() {
		t.Error("bogus state is valid")
	}
	if !weirtype.StateDead.Final() || weirtype.StateScheduled.Final() {
		t.Error("Final is wrong")
	}
	if !weirtype.Reclaimed.Runs() || weirtype.DuplicateRunning.Runs() {
		t.Error("Runs is wrong")
	}
}

func TestAbandonReasons(t *testing.T) {
	want := map[weirtype.AbandonReason]bool{
		"max_attempts_exceeded": true, "ttl_exceeded": true, "non_retryable": true,
		"deadline_exceeded": true, "retry_after_exceeds_limit": true,
	}
	got := weirtype.AbandonReasons()
	if len(got) != len(want) {
		t.Fatalf("AbandonReasons() = %v, want the %d stable strings", got, len(want))
	}
	for _, r := range got {
		if !want[r] || !r.Valid() {
			t.Errorf("reason %q: listed %v, valid %v", r, want[r], r.Valid())
		}
	}
	for _, r := range []weirtype.AbandonReason{"", "cancelled", "Non_Retryable"} {
		if r.Valid() {
			t.Errorf("reason %q is valid", r)
		}
	}
}
