//go:build unix

package sqlite_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// BenchmarkRelayClaimMark measures the store's side of the outbox relay
// on a file, as the relay drives it: claim a batch of 500 holding the one
// before, then mark that one published. One op is one claim and one mark
// of 500 messages. Beside the wall time, which on a shared machine
// counts the time spent waiting for a CPU, it reports the process's CPU
// time (all threads, the collector's among them) in the claims and in the
// marks, per op. The messages are relaybench's, 200-byte JSON bodies;
// keyed ones also carry one of 5,000 keys (none in two batches in a
// row) and a header.
func BenchmarkRelayClaimMark(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchRelayClaimMark(b, false) })
	b.Run("keyed", func(b *testing.B) { benchRelayClaimMark(b, true) })
}

func benchRelayClaimMark(b *testing.B, keyed bool) {
	const (
		batch = 500
		fill  = 20 * batch // messages added at a time, untimed
	)
	ctx, _, ex := migratedExec(b)
	msgs := make([]store.OutboxMessage, fill)
	for i := range msgs {
		head := fmt.Sprintf(`{"seq":%d,"pad":"`, i)
		msgs[i] = store.OutboxMessage{Topic: "bench", Payload: []byte(head + strings.Repeat("x", 200-len(head)-2) + `"}`)}
		if keyed {
			msgs[i].Key = fmt.Sprint("key-", i%5000)
			msgs[i].Headers = map[string]string{"trace": fmt.Sprint(i)}
		}
	}
	now := t0
	pending := 0
	refill := func() { // untimed
		if pending >= 2*batch {
			return
		}
		b.StopTimer()
		if _, err := ex.AddOutbox(ctx, now, msgs); err != nil {
			b.Fatal(err)
		}
		pending += fill
		b.StartTimer()
	}
	claim := func(holding []int64) []*weirtype.OutboxMessage {
		got, err := ex.ClaimOutbox(ctx, store.OutboxClaimParams{Now: now, Limit: batch, Owner: "bench", LeaseFor: time.Hour, Holding: holding})
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != batch {
			b.Fatalf("claimed %d messages, want %d", len(got), batch)
		}
		pending -= len(got)
		return got
	}
	refill()
	held := messageIDs(claim(nil))
	b.ReportAllocs()
	b.ResetTimer()
	var claimCPU, markCPU time.Duration
	for range b.N {
		refill()
		start := cpuTime(b)
		next := messageIDs(claim(held))
		claimed := cpuTime(b)
		n, err := ex.MarkPublished(ctx, now, "bench", held)
		if err != nil || n != len(held) {
			b.Fatalf("marked %d of %d: %v", n, len(held), err)
		}
		claimCPU += claimed - start
		markCPU += cpuTime(b) - claimed
		held = next
	}
	b.ReportMetric(float64(claimCPU.Nanoseconds())/float64(b.N), "claim-cpu-ns/op")
	b.ReportMetric(float64(markCPU.Nanoseconds())/float64(b.N), "mark-cpu-ns/op")
}

// cpuTime returns the process's CPU time so far, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// messageIDs returns ms' ids.
func messageIDs(ms []*weirtype.OutboxMessage) []int64 {
	ids := make([]int64, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}
