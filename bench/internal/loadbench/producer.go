package loadbench

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// producer inserts jobs through a target's client, at a fixed rate or
// holding a depth, each call a batch of up to Config.Batch jobs.
//
// At a fixed rate it earns credit for the real time elapsed since the last
// batch (rate × elapsed), wakes every Tick, and sends the whole jobs of its
// credit, up to Batch a call; it does not sleep while it holds a full
// batch of credit, so a rate above Batch/Tick is still met. Holding a
// depth, it inserts while the estimated depth (the last count of waiting
// jobs, plus what it inserted since that count began, less the jobs the
// workers started since) is under the target, and otherwise sleeps a Tick;
// Config.Inserters goroutines run that loop at once (each may send a
// batch past the target the others' calls in flight already fill).
type producer struct {
	cfg    Config
	t      *target
	logw   io.Writer // receives the first insert errors
	pad    string
	factor atomic.Uint64 // math.Float64bits of the load factor (1 or HighLoadFactor)

	// depth is the last count of waiting jobs; depthBase the jobs
	// inserted and startBase the jobs started when that count began;
	// started counts the jobs the workers started.
	depth, depthBase, startBase atomic.Int64
	started                     func() int64

	// insertHist holds the durations of the insert calls since the last
	// takeInserts.
	histMu     sync.Mutex
	insertHist histogram

	inserted  atomic.Int64 // jobs whose insert returned success
	failed    atomic.Int64 // insert calls that failed
	mu        sync.Mutex
	next      int64      // the next sequence number
	uncertain [][2]int64 // [first, end) of the batches whose insert failed: inserted or not
}

func newProducer(cfg Config, t *target, started func() int64, logw io.Writer) *producer {
	p := &producer{cfg: cfg, t: t, started: started, logw: logw}
	// The JSON of jobArgs without padding is about 45 bytes.
	p.pad = strings.Repeat("x", max(0, cfg.Payload-45))
	p.setFactor(1)
	return p
}

func (p *producer) setFactor(f float64) { p.factor.Store(math.Float64bits(f)) }
func (p *producer) loadFactor() float64 { return math.Float64frombits(p.factor.Load()) }

// run produces until ctx ends.
func (p *producer) run(ctx context.Context) {
	batch := make([]jobArgs, 0, p.cfg.Batch)
	credit := 0.0
	last := time.Now()
	for ctx.Err() == nil {
		var n int
		if p.cfg.Depth > 0 {
			target := int64(float64(p.cfg.Depth) * p.loadFactor())
			est := p.estimate()
			n = int(min(int64(p.cfg.Batch), target-est))
		} else {
			now := time.Now()
			credit += p.cfg.Rate * p.loadFactor() * now.Sub(last).Seconds()
			last = now
			n = min(p.cfg.Batch, int(credit))
			credit -= float64(max(n, 0))
		}
		if n <= 0 {
			sleepCtx(ctx, p.cfg.Tick)
			continue
		}
		p.mu.Lock()
		first := p.next
		p.next += int64(n)
		p.mu.Unlock()
		batch = batch[:0]
		now := time.Now().UnixNano()
		for i := range n {
			batch = append(batch, jobArgs{Seq: first + int64(i), T: now, Pad: p.pad})
		}
		t0 := time.Now()
		err := p.t.insert(ctx, batch)
		p.histMu.Lock()
		p.insertHist.record(time.Since(t0))
		p.histMu.Unlock()
		if err != nil {
			if ctx.Err() != nil {
				// The run's end cut the call short: the batch is
				// uncertain, but no failure of the system.
				p.mu.Lock()
				p.uncertain = append(p.uncertain, [2]int64{first, first + int64(n)})
				p.mu.Unlock()
				return
			}
			p.failed.Add(1)
			if p.failed.Load() <= 3 && p.logw != nil {
				fmt.Fprintf(p.logw, "# %s producer: insert of %d jobs failed: %v\n", p.t.system, n, err)
			}
			p.mu.Lock()
			p.uncertain = append(p.uncertain, [2]int64{first, first + int64(n)})
			p.mu.Unlock()
			sleepCtx(ctx, p.cfg.Tick)
			continue
		}
		p.inserted.Add(int64(n))
		if p.cfg.Depth == 0 && credit < float64(p.cfg.Batch) {
			sleepCtx(ctx, p.cfg.Tick-time.Since(last))
		}
	}
}

// estimate returns the number of waiting jobs: the last count, plus the
// jobs inserted since it began, less those started since.
func (p *producer) estimate() int64 {
	return max(0, p.depth.Load()+p.inserted.Load()-p.depthBase.Load()-(p.started()-p.startBase.Load()))
}

// pollDepth counts the waiting jobs until ctx ends, every interval or,
// when a count takes longer than a twentieth of it, twenty times the
// count's duration apart: without a vacuum the count reads the index
// entries of every job claimed since the last one, and counted every
// second it would take a growing share of the database's CPU from the
// system measured. Between counts the estimate follows the inserts and
// the workers' starts.
func (p *producer) pollDepth(ctx context.Context, count func(context.Context) (int64, error), interval time.Duration) {
	for ctx.Err() == nil {
		base, sbase := p.inserted.Load(), p.started()
		t0 := time.Now()
		if n, err := count(ctx); err == nil {
			p.depth.Store(n)
			p.depthBase.Store(base)
			p.startBase.Store(sbase)
		}
		sleepCtx(ctx, max(interval, depthPollSpacing*time.Since(t0)))
	}
}

// depthPollSpacing is how many times its own duration apart the depth
// count runs at least.
const depthPollSpacing = 20

// takeInserts returns the histogram of the insert calls' durations since
// the last take, and empties it.
func (p *producer) takeInserts() histogram {
	p.histMu.Lock()
	defer p.histMu.Unlock()
	return p.insertHist.take()
}

// seqs returns the number of sequence numbers handed out and the ranges
// whose insert failed.
func (p *producer) seqs() (int64, [][2]int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next, append([][2]int64(nil), p.uncertain...)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
