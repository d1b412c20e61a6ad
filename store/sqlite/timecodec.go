package sqlite

import (
	"math"
	"time"

	"github.com/weirhq/weir/internal/sqlitefile"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// Times are stored as INTEGER microseconds since the Unix epoch, UTC, and
// the zero time as NULL. Sub-microsecond parts are dropped (rounded down,
// toward the past), and times come back in UTC.
var (
	minTime = time.UnixMicro(math.MinInt64).UTC()
	maxTime = time.UnixMicro(math.MaxInt64).UTC()
)

// checkTimes returns an error wrapping store.ErrInvalid when now or one of
// p's times cannot be stored.
func checkTimes(now time.Time, p store.InsertParams) error {
	if err := checkNow(now); err != nil {
		return err
	}
	if err := checkTime("scheduled at", p.ScheduledAt); err != nil {
		return err
	}
	return checkTime("deadline at", p.DeadlineAt)
}

// checkTime returns an error wrapping store.ErrInvalid, naming the field,
// when t cannot be stored. The zero time can: it is NULL.
func checkTime(name string, t time.Time) error {
	if t.Before(minTime) || t.After(maxTime) {
		return weirtype.Invalidf("%s %v is out of range", name, t)
	}
	return nil
}

// checkNow is checkTime for a call's clock, which must also be set.
func checkNow(now time.Time) error {
	return store.FirstError(checkTime("now", now), store.CheckNow(now))
}

// storedTime is t as the database gives it back: UTC, whole microseconds
// (rounded toward the past, as encodeTime does).
func storedTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMicro(t.UnixMicro()).UTC()
}

// encodeTime and decodeTime are sqlitefile's.
var (
	encodeTime = sqlitefile.EncodeTime
	decodeTime = sqlitefile.DecodeTime
)
