package loadbench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// sample is one second of a phase.
type sample struct {
	At    float64 `json:"t"` // seconds since the phase began
	Rate  float64 `json:"rate"`
	P50   float64 `json:"p50_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	Depth int64   `json:"depth"`
	Dead  int64   `json:"dead_tuples"`
	Live  int64   `json:"live_tuples"`
	Size  int64   `json:"size_bytes"`
	// Claims counts the scans of the claim index in the second and
	// Entries the index entries each read on average.
	Claims  int64   `json:"claim_scans"`
	Entries float64 `json:"claim_index_entries_per_scan"`
	Blocks  float64 `json:"claim_index_blocks_per_scan"`
}

// observer samples a system once a second: its completions and pickup
// latencies (from the collector), its queue depth, its job table's tuples
// and size, the CPU time of its backends, and the wait events of its
// active backends.
type observer struct {
	admin *pgxpool.Pool
	t     *target
	col   *collector
	prod  *producer
	apps  []string

	lastDone int64
	lastAt   time.Time
	lastCnt  counters
	// backend CPU: the last CPU time read of each backend pid, and the
	// total of the increases seen, in all and of the producer's backends.
	backends           map[int]time.Duration
	backendCPU, prodDB time.Duration
	waits              map[string]int // "state/wait_event_type:wait_event" of active backends, per sample
	errs               int
}

func newObserver(admin *pgxpool.Pool, t *target, col *collector, prod *producer) *observer {
	return &observer{
		admin: admin, t: t, col: col, prod: prod,
		apps:     []string{appName(t.system, "producer"), appName(t.system, "worker")},
		backends: map[int]time.Duration{},
		waits:    map[string]int{},
	}
}

// mark starts a new interval: the next sample's rate is measured from now.
func (o *observer) mark(ctx context.Context) {
	o.lastDone, _ = o.col.takeWindow()
	o.lastAt = time.Now()
	o.lastCnt = o.counters(ctx)
}

// sample reads one sample; phaseStart is when the phase began.
func (o *observer) sample(ctx context.Context, phaseStart time.Time) sample {
	now := time.Now()
	done, h := o.col.takeWindow()
	s := sample{At: now.Sub(phaseStart).Seconds(), Depth: o.prod.estimate()}
	if dt := now.Sub(o.lastAt).Seconds(); dt > 0 {
		s.Rate = float64(done-o.lastDone) / dt
	}
	o.lastDone, o.lastAt = done, now
	s.P50, s.P95, s.P99 = ms(h.quantile(0.50)), ms(h.quantile(0.95)), ms(h.quantile(0.99))
	if err := o.admin.QueryRow(ctx, `SELECT coalesce(n_live_tup, 0), coalesce(n_dead_tup, 0), pg_total_relation_size($3::regclass)
FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = $2`, o.t.schema, o.t.table, o.t.qualified).Scan(&s.Live, &s.Dead, &s.Size); err != nil {
		o.errs++
	}
	o.readBackends(ctx)
	c := o.counters(ctx)
	if s.Claims = c.claimScans - o.lastCnt.claimScans; s.Claims > 0 {
		s.Entries = float64(c.claimEntries-o.lastCnt.claimEntries) / float64(s.Claims)
		s.Blocks = float64(c.claimBlocks-o.lastCnt.claimBlocks) / float64(s.Claims)
	}
	o.lastCnt = c
	return s
}

// readBackends adds the CPU time its backends used since the last read to
// backendCPU, and counts their wait events. A backend first seen counts
// all of its CPU time: it was opened for the system.
func (o *observer) readBackends(ctx context.Context) {
	rows, err := o.admin.Query(ctx, `SELECT pid, application_name, coalesce(state, ''), coalesce(wait_event_type, ''), coalesce(wait_event, '')
FROM pg_stat_activity WHERE application_name = ANY($1)`, o.apps)
	if err != nil {
		o.errs++
		return
	}
	defer rows.Close()
	seen := map[int]bool{}
	for rows.Next() {
		var pid int
		var app, state, wtype, wevent string
		if err := rows.Scan(&pid, &app, &state, &wtype, &wevent); err != nil {
			o.errs++
			return
		}
		seen[pid] = true
		if state == "active" || strings.HasPrefix(state, "idle in transaction") {
			key := state
			if wtype != "" {
				key += " " + wtype + ":" + wevent
			} else {
				key += " on CPU"
			}
			o.waits[key]++
		}
		cpu, err := procCPU(pid)
		if err != nil {
			continue // gone since, or not on this machine
		}
		d := cpu
		if prev, ok := o.backends[pid]; ok {
			d = max(0, cpu-prev)
		}
		o.backendCPU += d
		if app == o.apps[0] {
			o.prodDB += d
		}
		o.backends[pid] = cpu
	}
	for pid := range o.backends {
		if !seen[pid] {
			delete(o.backends, pid)
		}
	}
}

// counters are cumulative statistics of the job table: scans of its claim
// index and the entries they read, the buffer accesses (hits and reads)
// of the table and of its indexes, and its row updates, all and HOT.
type counters struct {
	claimScans, claimEntries, claimBlocks int64
	heapBlocks, indexBlocks               int64
	updates, hotUpdates                   int64
}

func (o *observer) counters(ctx context.Context) (c counters) {
	err := o.admin.QueryRow(ctx, `SELECT
	coalesce((SELECT idx_scan FROM pg_stat_user_indexes WHERE schemaname = $1 AND indexrelname = $3), 0),
	coalesce((SELECT idx_tup_read FROM pg_stat_user_indexes WHERE schemaname = $1 AND indexrelname = $3), 0),
	coalesce((SELECT idx_blks_hit + idx_blks_read FROM pg_statio_user_indexes WHERE schemaname = $1 AND indexrelname = $3), 0),
	coalesce((SELECT coalesce(heap_blks_hit, 0) + coalesce(heap_blks_read, 0) FROM pg_statio_user_tables WHERE schemaname = $1 AND relname = $2), 0),
	coalesce((SELECT coalesce(idx_blks_hit, 0) + coalesce(idx_blks_read, 0) FROM pg_statio_user_tables WHERE schemaname = $1 AND relname = $2), 0),
	coalesce((SELECT n_tup_upd FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = $2), 0),
	coalesce((SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = $2), 0)`,
		o.t.schema, o.t.table, o.t.claimIndex).Scan(&c.claimScans, &c.claimEntries, &c.claimBlocks, &c.heapBlocks, &c.indexBlocks, &c.updates, &c.hotUpdates)
	if err != nil {
		o.errs++
	}
	return c
}

// takeWaits returns the wait-event counts since the last take.
func (o *observer) takeWaits() map[string]int {
	w := o.waits
	o.waits = map[string]int{}
	return w
}

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which Linux fixes at 100 for user space.
const clockTick = 10 * time.Millisecond

// procCPU returns the user and system CPU time of process pid from
// /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces;
	// utime and stime are fields 14 and 15, the 12th and 13th after it.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return time.Duration(ut+st) * clockTick, nil
}

func ms(us int64) float64 { return float64(us) / 1000 }

// loadAverage returns /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
