package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
)

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
