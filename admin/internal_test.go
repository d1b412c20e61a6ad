package admin

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
)

// fail answers a store.ErrInvalid with a generic message, and logs the
// store's text, which may name the driver.
func TestFailHidesStoreText(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	h := &handler{log: slog.New(slog.NewTextHandler(&logs, nil))}
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/api/admin/workflows/x", nil)
	h.fail(rec, r, fmt.Errorf("pq: invalid byte sequence for encoding \"UTF8\": 0x00: %w", store.ErrInvalid))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"invalid parameter"`) || strings.Contains(rec.Body.String(), "pq") {
		t.Errorf("status %d, %s; want 400 \"invalid parameter\" without the driver's text", rec.Code, rec.Body)
	}
	if !strings.Contains(logs.String(), "pq: invalid byte sequence") {
		t.Errorf("the store's text was not logged: %s", logs.String())
	}
}

// parseTime refuses the zero time and any time before 1970, which would
// make failed_before match nothing and failed_after everything.
func TestParseTimeRefusesBefore1970(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)
	for _, s := range []string{"0001-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "1900-06-01T00:00:00+02:00"} {
		if got, err := parseTime(s, now); err == nil || !strings.Contains(err.Error(), "1970") {
			t.Errorf("parseTime(%q) = %v, %v; want an error naming 1970", s, got, err)
		}
	}
	for _, s := range []string{"1970-01-01T00:00:00Z", "2026-01-21T00:00:00Z", "72h", "0s"} {
		if _, err := parseTime(s, now); err != nil {
			t.Errorf("parseTime(%q): %v", s, err)
		}
	}
}
