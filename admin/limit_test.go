package admin_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
)

// The limits the clients recorded are listed with their running attempts
// and the rate's window.
func TestLimitsListedThroughTheAPI(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "s3cret")
	ctx := context.Background()
	res := fx.do(http.MethodGet, "/api/admin/limits", "")
	if ls, ok := res.body["limits"].([]any); res.code != http.StatusOK || !ok || len(ls) != 0 {
		t.Fatalf("limits of a store without any: %d %s", res.code, res.raw)
	}
	if _, err := fx.ex.SetLimit(ctx, t0, store.LimitParams{Key: "llm", Kinds: []string{"extract", "summarize"},
		MaxRunning: 4, Rate: 60, Per: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.ex.Insert(ctx, t0, []store.InsertParams{{Kind: "extract", Queue: "docs"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.ex.Claim(ctx, store.ClaimParams{Now: t0, Queue: "docs", Limit: 5, Owner: "w", LeaseFor: time.Minute}); err != nil {
		t.Fatal(err)
	}
	res = fx.do(http.MethodGet, "/api/admin/limits", "")
	for _, want := range []string{`"key": "llm"`, `"max_running": 4`, `"running": 1`, `"rate": 60`, `"per_seconds": 60`,
		`"window_starts": 1`, `"extract"`, `"summarize"`} {
		if res.code != http.StatusOK || !strings.Contains(res.raw, want) {
			t.Fatalf("limits: %d %s; want %s", res.code, res.raw, want)
		}
	}
	if res := fx.do(http.MethodGet, "/api/admin/limits?x=1", ""); res.code != http.StatusBadRequest {
		t.Fatalf("limits with a query: %d %s, want 400", res.code, res.raw)
	}
}
