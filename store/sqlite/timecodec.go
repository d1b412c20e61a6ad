package sqlite

import (
	"database/sql"
	"fmt"
	"math"
	"time"

	"github.com/weirhq/weir/store"
)

// Times are stored as INTEGER microseconds since the Unix epoch, UTC, and
// the zero time as NULL. Sub-microsecond parts are dropped (rounded down,
// toward the past), and times come back in UTC.
var (
	minTime = time.UnixMicro(math.MinInt64).UTC()
	maxTime = time.UnixMicro(math.MaxInt64).UTC()
)

// encodeTime is t's column value: nil (NULL) for the zero time, otherwise
// microseconds since the Unix epoch. t must lie within [minTime, maxTime]
// (about ±292,000 years), which checkTimes ensures for callers' times.
func encodeTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// decodeTime is the time a column holds: the zero time for NULL, otherwise
// the instant in UTC.
func decodeTime(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMicro(v.Int64).UTC()
}

// checkTimes returns an error wrapping store.ErrInvalid when now or one of
// p's times cannot be stored.
func checkTimes(now time.Time, p store.InsertParams) error {
	for _, f := range []struct {
		name string
		t    time.Time
	}{{"now", now}, {"scheduled at", p.ScheduledAt}, {"deadline at", p.DeadlineAt}} {
		if f.t.Before(minTime) || f.t.After(maxTime) {
			return fmt.Errorf("%w: %s %v is out of range", store.ErrInvalid, f.name, f.t)
		}
	}
	if now.IsZero() {
		return fmt.Errorf("%w: now is the zero time", store.ErrInvalid)
	}
	return nil
}
