package loadbench

import (
	"math/bits"
	"time"
)

// histogram counts durations in microseconds in log-linear buckets: exact
// below 64 µs, then 32 buckets per power of two (a relative error under
// 3.2%), up to 2^40 µs (12 days). Its memory is fixed whatever it counts.
type histogram struct {
	counts [histBuckets]uint64
	total  uint64
	max    int64
}

const (
	histSubBits = 5
	histSub     = 1 << histSubBits // buckets per power of two
	histLinear  = 2 * histSub      // values below this have a bucket each
	histMaxExp  = 40
	histBuckets = histLinear + (histMaxExp-histSubBits-1)*histSub
	histMaxUS   = int64(1)<<histMaxExp - 1
)

// bucketOf returns the bucket of v µs.
func bucketOf(v int64) int {
	v = max(0, min(v, histMaxUS))
	if v < histLinear {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - histSubBits - 1 // v>>e is in [histSub, 2*histSub)
	return histLinear + (e-1)*histSub + int(v>>e) - histSub
}

// bucketValue returns the middle of bucket i, in µs.
func bucketValue(i int) int64 {
	if i < histLinear {
		return int64(i)
	}
	k := i - histLinear
	e := k/histSub + 1
	m := int64(k%histSub + histSub)
	return m<<e + int64(1)<<e/2
}

func (h *histogram) record(d time.Duration) {
	us := d.Microseconds()
	h.counts[bucketOf(us)]++
	h.total++
	h.max = max(h.max, us)
}

func (h *histogram) addBucket(i int, n uint64) {
	if i < 0 || i >= histBuckets || n == 0 {
		return
	}
	h.counts[i] += n
	h.total += n
	h.max = max(h.max, bucketValue(i))
}

func (h *histogram) reset() { *h = histogram{} }

// take returns the histogram and empties it.
func (h *histogram) take() histogram {
	t := *h
	h.reset()
	return t
}

// quantile returns the q-quantile (0 < q ≤ 1) in µs, 0 for an empty
// histogram.
func (h *histogram) quantile(q float64) int64 {
	if h.total == 0 {
		return 0
	}
	rank := uint64(q*float64(h.total) + 0.5)
	rank = max(1, min(rank, h.total))
	var seen uint64
	for i, n := range h.counts {
		seen += n
		if seen >= rank {
			return min(bucketValue(i), max(h.max, 0))
		}
	}
	return h.max
}

// sparse returns the non-empty buckets as pairs of index and count.
func (h *histogram) sparse() [][2]uint64 {
	var out [][2]uint64
	for i, n := range h.counts {
		if n > 0 {
			out = append(out, [2]uint64{uint64(i), n})
		}
	}
	return out
}
