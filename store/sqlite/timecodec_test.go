package sqlite

import (
	"database/sql"
	"testing"
	"time"
)

func FuzzTimeRoundTrip(f *testing.F) {
	f.Add(int64(0), int64(0), 0)
	f.Add(int64(1768998600), int64(123456789), 3600)
	f.Add(int64(-1), int64(999999999), -7200)
	f.Add(int64(-62135596800), int64(0), 0) // the zero time
	f.Add(int64(-62135596800), int64(1), 0) // just after it
	f.Fuzz(func(t *testing.T, sec, nsec int64, offset int) {
		// Keep within what microseconds in an int64 can hold (±292,000
		// years); checkTimes refuses the rest before they are encoded.
		const limit = 9_000_000_000_000
		sec %= limit
		nsec %= 1_000_000_000
		offset %= 24 * 3600
		in := time.Unix(sec, nsec).In(time.FixedZone("z", offset))

		v := encodeTime(in)
		var col sql.NullInt64
		if v != nil {
			col = sql.NullInt64{Int64: v.(int64), Valid: true}
		}
		out := decodeTime(col)

		if in.IsZero() {
			if v != nil || !out.IsZero() {
				t.Fatalf("zero time encoded as %v, decoded as %v; want NULL and zero", v, out)
			}
			return
		}
		if v == nil {
			t.Fatalf("%v encoded as NULL", in)
		}
		if want := in.Truncate(time.Microsecond); !out.Equal(want) {
			t.Fatalf("%v came back as %v, want %v", in, out, want)
		}
		if out.Location() != time.UTC {
			t.Fatalf("%v came back in %v, want UTC", in, out.Location())
		}
		if out.Nanosecond()%1000 != 0 {
			t.Fatalf("%v came back with sub-microsecond part %v", in, out)
		}
		if out.After(in) {
			t.Fatalf("%v came back later, as %v", in, out)
		}
	})
}
