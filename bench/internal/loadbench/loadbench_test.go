package loadbench

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestHistogramQuantilesWithinBucketError(t *testing.T) {
	var h histogram
	for us := int64(1); us <= 100_000; us++ {
		h.record(time.Duration(us) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want float64
	}{{0.5, 50_000}, {0.95, 95_000}, {0.99, 99_000}, {1, 100_000}} {
		got := float64(h.quantile(c.q))
		if math.Abs(got-c.want)/c.want > 0.032 {
			t.Errorf("quantile(%v) = %v µs, want %v within 3.2%%", c.q, got, c.want)
		}
	}
	if h.max != 100_000 {
		t.Errorf("max %d µs, want 100000", h.max)
	}
	// Below 64 µs every value has its own bucket.
	var small histogram
	for _, us := range []int64{3, 3, 7, 63} {
		small.record(time.Duration(us) * time.Microsecond)
	}
	if got := small.quantile(0.5); got != 3 {
		t.Errorf("small quantile(0.5) = %d, want 3", got)
	}
}

func TestHistogramSparseRoundTrips(t *testing.T) {
	var a, b histogram
	for _, d := range []time.Duration{time.Millisecond, 2 * time.Second, 40 * time.Microsecond, time.Hour} {
		a.record(d)
	}
	for _, kv := range a.sparse() {
		b.addBucket(int(kv[0]), kv[1])
	}
	if a.total != b.total || a.counts != b.counts {
		t.Fatalf("after sparse/addBucket: total %d counts differ %v; want %d and equal", b.total, a.counts != b.counts, a.total)
	}
	for _, q := range []float64{0.25, 0.5, 0.75, 1} {
		if a.quantile(q) != b.quantile(q) && q != 1 {
			t.Errorf("quantile(%v): %d after the round trip, want %d", q, b.quantile(q), a.quantile(q))
		}
	}
}

func TestParsePhases(t *testing.T) {
	ps, err := ParsePhases("clean:90s, idle-in-tx,repeated-kill:5s", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := []Phase{{Clean, 90 * time.Second}, {IdleInTx, time.Minute}, {RepeatedKill, 5 * time.Second}}
	if len(ps) != len(want) {
		t.Fatalf("got %v, want %v", ps, want)
	}
	for i := range want {
		if ps[i] != want[i] {
			t.Errorf("phase %d: %v, want %v", i, ps[i], want[i])
		}
	}
	for _, bad := range []string{"", "clean:zero", "vacuum", "clean:-1s", "clean:0s"} {
		if _, err := ParsePhases(bad, time.Minute); err == nil {
			t.Errorf("ParsePhases(%q) accepted", bad)
		}
	}
}

func TestValidateNamesTheBadSetting(t *testing.T) {
	c := Default()
	c.Depth = 100 // with the default rate: both set
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "exactly one of the rate") {
		t.Errorf("rate and depth both set: %v", err)
	}
	c = Default()
	c.FetchCooldown = time.Microsecond
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "fetch-cooldown") {
		t.Errorf("fetch cooldown below River's minimum: %v", err)
	}
	if err := Quick(Default()).Validate(); err != nil {
		t.Errorf("quick config: %v", err)
	}
}

// The exactly-once check counts a job without a completed row as lost, a
// second completed row as a duplicate, a failed insert without a row as
// not inserted (not lost), and a completion at a later attempt as a rerun.
func TestSeqCheckCountsLostDuplicatesAndReruns(t *testing.T) {
	c := newSeqCheck(6, [][2]int64{{3, 5}})
	seq := func(n int64) *int64 { return &n }
	c.add(seq(0), "completed", 1)
	c.add(seq(1), "completed", 1)
	c.add(seq(1), "completed", 1) // inserted and completed twice
	// 2: no row at all: lost
	// 3: insert failed, no row: not inserted
	c.add(seq(4), "completed", 2) // insert failed but the row exists; run again after a kill
	c.add(seq(5), "running", 1)   // not finished: lost
	c.add(seq(99), "completed", 1)
	c.add(nil, "completed", 1)
	var r RunResult
	c.finish(&r)
	want := RunResult{Produced: 5, NotInserted: 1, Lost: 2, DupCompleted: 1, DupRows: 1, Reruns: 1, Unfinished: 1, Foreign: 2}
	if r.Produced != want.Produced || r.NotInserted != want.NotInserted || r.Lost != want.Lost || r.DupCompleted != want.DupCompleted ||
		r.DupRows != want.DupRows || r.Reruns != want.Reruns || r.Unfinished != want.Unfinished || r.Foreign != want.Foreign {
		t.Errorf("got %+v\nwant %+v", r, want)
	}
}

func TestProcCPUReadsThisProcess(t *testing.T) {
	end := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(end) {
	}
	d, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d <= 0 {
		t.Errorf("CPU time %v of a process that just spun 50 ms, want > 0", d)
	}
}

func TestWithAppName(t *testing.T) {
	got := withAppName("postgres://u@h:5432/db?sslmode=disable", "x-y")
	if !strings.Contains(got, "application_name=x-y") || !strings.Contains(got, "sslmode=disable") {
		t.Errorf("URL form: %s", got)
	}
	if got := withAppName("host=h dbname=db", "x"); got != "host=h dbname=db application_name=x" {
		t.Errorf("DSN form: %s", got)
	}
}

// A depth count that takes long is spaced by twenty times its duration,
// not run every -depth-poll: without a vacuum it would take a growing
// share of the database from the system measured.
func TestDepthCountIsSpacedByItsCost(t *testing.T) {
	p := newProducer(Config{}, nil, func() int64 { return 0 }, nil)
	var calls atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	p.pollDepth(ctx, func(context.Context) (int64, error) {
		calls.Add(1)
		time.Sleep(20 * time.Millisecond)
		return 7, nil
	}, time.Millisecond)
	// 20 × 20 ms = 400 ms apart: two counts in 500 ms (one at 0, one
	// after 420 ms), where a count every millisecond would make 24.
	if n := calls.Load(); n < 1 || n > 2 {
		t.Errorf("%d counts in 500 ms, want 1 or 2", n)
	}
	if got := p.estimate(); got != 7 {
		t.Errorf("estimate %d after a count of 7 and nothing since, want 7", got)
	}
}

// The parent counts the 8-byte records of finished work per sequence
// number, across a process's partial last record.
func TestFinishedWorkCountsOnceAndTwice(t *testing.T) {
	var b []byte
	for _, seq := range []int64{1, 2, 2, 3, 3, 3} {
		b = binary.LittleEndian.AppendUint64(b, uint64(seq))
	}
	b = append(b, 9, 9, 9) // a record cut short: not counted
	f := newFinishedWork()
	f.read(bytes.NewReader(b))
	f.read(bytes.NewReader(binary.LittleEndian.AppendUint64(nil, 1))) // a second incarnation
	if once, twice := f.counts(); once != 3 || twice != 3 {
		t.Fatalf("counts: %d finished, %d twice; want 3 and 3", once, twice)
	}
}
