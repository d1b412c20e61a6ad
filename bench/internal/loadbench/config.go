// Package loadbench runs weir and River side by side on PostgreSQL under a
// steady producer and a sequence of pressure phases, and measures each
// phase: completion rate, pickup latency, queue depth, the job table's dead
// tuples and size, CPU per 1,000 jobs of the worker process and of the
// database backends, recovery after a fault, and at the end whether every
// produced job completed exactly once.
//
// The benchmark process is the producer, the observer and the source of
// faults; each system's workers run in a child process, the benchmark
// re-executed with Role set in its environment (see Child), so that the
// workers' CPU is their own and a phase can SIGKILL and restart them.
package loadbench

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirhq/weir"
)

// PhaseKind is what a phase does beside the steady producer.
type PhaseKind string

// The phase kinds.
const (
	Clean          PhaseKind = "clean"           // the producer alone: the baseline
	HighLoad       PhaseKind = "high-load"       // the producer at 1.5x its rate (or depth)
	IdleInTx       PhaseKind = "idle-in-tx"      // a connection holds BEGIN; SELECT txid_current() open
	ActiveReaders  PhaseKind = "active-readers"  // REPEATABLE READ connections scan the job table
	BackendKill    PhaseKind = "pg-backend-kill" // pg_terminate_backend on the system's connections
	PoolExhaustion PhaseKind = "pool-exhaustion" // idle connections held on the server
	RepeatedKill   PhaseKind = "repeated-kill"   // SIGKILL of the worker process, restarted at once
	NoisyNeighbour PhaseKind = "noisy-neighbour" // a CPU-bound process beside the database
)

// AllPhases are the phase kinds in the order a full run takes them.
var AllPhases = []PhaseKind{Clean, HighLoad, IdleInTx, ActiveReaders, BackendKill, PoolExhaustion, RepeatedKill, NoisyNeighbour}

// HighLoadFactor multiplies the producer's rate (or target depth) in a
// high-load phase.
const HighLoadFactor = 1.5

// Phase is one phase of a run.
type Phase struct {
	Kind     PhaseKind     `json:"kind"`
	Duration time.Duration `json:"duration_ns"`
}

// Fault reports whether the phase disturbs the system, so that a recovery
// window follows it.
func (p Phase) Fault() bool { return p.Kind != Clean }

// System names a system under test.
type System string

// The systems.
const (
	Weir  System = "weir"
	River System = "river"
)

// Config is a whole run.
type Config struct {
	URL     string   `json:"-"`
	Systems []System `json:"systems"`
	Workers []int    `json:"workers"`
	Phases  []Phase  `json:"phases"`
	// Warmup runs the producer before the first phase; its samples are
	// not reported.
	Warmup time.Duration `json:"warmup_ns"`
	// Recovery is the window after each fault phase, at the baseline
	// load, in which the recovery time is measured.
	Recovery time.Duration `json:"recovery_ns"`
	// Rate is the producer's fixed rate in jobs/s; Depth, when set
	// instead, the number of waiting jobs it holds.
	Rate  float64 `json:"rate"`
	Depth int     `json:"depth"`
	// Work is how long each job's handler sleeps; Payload the size of a
	// job's arguments in bytes, JSON encoded.
	Work    time.Duration `json:"work_ns"`
	Payload int           `json:"payload"`
	// Batch is the most jobs one insert call carries, and Tick how often
	// the fixed-rate producer sends one.
	Batch int           `json:"batch"`
	Tick  time.Duration `json:"tick_ns"`
	// Inserters is how many insert calls the depth-holding producer keeps
	// in flight at once: one call at a time (a batch of Batch jobs a
	// round trip) caps the rate it can hold a depth at below what the
	// systems drain at many workers. The fixed-rate producer makes one
	// call at a time.
	Inserters int `json:"inserters"`
	// DepthPoll is how often the waiting jobs are counted in the
	// database, at most (a count that takes long is spaced by twenty
	// times its duration); between two counts the depth is estimated
	// from the inserts and the workers' starts.
	DepthPoll time.Duration `json:"depth_poll_ns"`
	// MaxConns is the pool size of each system's worker process.
	MaxConns int `json:"max_conns"`
	// Poll is weir's PollEvery and River's FetchPollInterval;
	// FetchCooldown River's FetchCooldown; ClaimCooldown weir's
	// (Config.ClaimCooldown, weir's default if 0).
	Poll          time.Duration `json:"poll_ns"`
	FetchCooldown time.Duration `json:"fetch_cooldown_ns"`
	ClaimCooldown time.Duration `json:"claim_cooldown_ns,omitempty"`

	// Fault settings.
	KillRate     float64       `json:"kill_rate"`     // pg-backend-kill: terminations per second
	IdleConns    int           `json:"idle_conns"`    // pool-exhaustion: connections to hold
	ReserveConns int           `json:"reserve_conns"` // pool-exhaustion: server slots left free for everyone else
	KillEvery    time.Duration `json:"kill_every_ns"` // repeated-kill: period of the SIGKILL
	Readers      int           `json:"readers"`       // active-readers: REPEATABLE READ connections
	ReaderTx     time.Duration `json:"reader_tx_ns"`  // active-readers: how long each reader's transaction lasts
	ReaderPause  time.Duration `json:"reader_pause_ns"`
	NoisyCPUs    int           `json:"noisy_cpus"` // noisy-neighbour: busy goroutines (cores) of the CPU-bound process

	// VacuumEvery, when set, vacuums each system's job table at that
	// period (the server this was written on runs without autovacuum).
	VacuumEvery time.Duration `json:"vacuum_every_ns"`
	// DrainTimeout bounds the wait, after the last phase, for every
	// produced job to finish before the exactly-once check.
	DrainTimeout time.Duration `json:"drain_timeout_ns"`
	// ProfileDir, when set, receives a CPU profile of each worker
	// process (runtime/pprof), named system-wN-K.pprof.
	ProfileDir string `json:"-"`
	// Keep keeps the schemas at the end, for inspection.
	Keep bool `json:"keep"`
	// Verbose logs the systems' warnings and the samples to the log
	// writer.
	Verbose bool `json:"-"`
	// Quick marks the quick mode (see Quick).
	Quick bool `json:"quick"`
}

// Default returns the configuration of a full run.
func Default() Config {
	phases := make([]Phase, len(AllPhases))
	for i, k := range AllPhases {
		phases[i] = Phase{Kind: k, Duration: time.Minute}
	}
	return Config{
		URL:           "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
		Systems:       []System{Weir, River},
		Workers:       []int{4, 16, 64, 256},
		Phases:        phases,
		Warmup:        5 * time.Second,
		Recovery:      20 * time.Second,
		Rate:          1000,
		Work:          time.Millisecond,
		Payload:       256,
		Batch:         128,
		Tick:          10 * time.Millisecond,
		Inserters:     4,
		DepthPoll:     time.Second,
		MaxConns:      20,
		Poll:          50 * time.Millisecond,
		FetchCooldown: time.Millisecond,
		ClaimCooldown: weir.DefaultClaimCooldown,
		KillRate:      2,
		IdleConns:     300,
		ReserveConns:  25,
		KillEvery:     10 * time.Second,
		Readers:       4,
		ReaderTx:      10 * time.Second,
		ReaderPause:   100 * time.Millisecond,
		NoisyCPUs:     1,
		DrainTimeout:  3 * time.Minute,
	}
}

// Quick returns c reduced to a run of a few seconds per phase, three
// phases and 4 workers. River's rescue of the jobs of a killed worker
// takes its 30 s rescuer interval, so the quick mode has no repeated-kill.
func Quick(c Config) Config {
	c.Quick = true
	c.Workers = []int{4}
	c.Phases = []Phase{{Clean, 2 * time.Second}, {IdleInTx, 2 * time.Second}, {BackendKill, 2 * time.Second}}
	c.Warmup = time.Second
	c.Recovery = time.Second
	c.Rate, c.Depth = 500, 0
	c.KillRate = 4
	// A River job whose completion a killed backend lost stays running
	// until River's rescuer, every 30 s, finds it older than
	// riverRescueAfter: the drain waits that long and more.
	c.DrainTimeout = riverRescueAfter + 30*time.Second + 20*time.Second
	return c
}

// ParsePhases reads a comma-separated list of phases, each a kind with an
// optional ":duration" (clean:60s,idle-in-tx); a phase without one lasts
// def.
func ParsePhases(s string, def time.Duration) ([]Phase, error) {
	var out []Phase
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		name, dur, hasDur := strings.Cut(f, ":")
		p := Phase{Kind: PhaseKind(name), Duration: def}
		known := false
		for _, k := range AllPhases {
			known = known || k == p.Kind
		}
		if !known {
			return nil, fmt.Errorf("phase %q: unknown (known: %s)", name, joinKinds(AllPhases))
		}
		if hasDur {
			d, err := time.ParseDuration(dur)
			if err != nil {
				return nil, fmt.Errorf("phase %q: duration: %w", f, err)
			}
			p.Duration = d
		}
		if p.Duration <= 0 {
			return nil, fmt.Errorf("phase %q: duration %v is not positive", f, p.Duration)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, errors.New("no phases")
	}
	return out, nil
}

func joinKinds(ks []PhaseKind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// ParseWorkers reads a comma-separated list of worker counts.
func ParseWorkers(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("worker count %q: want a positive integer", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("no worker counts")
	}
	return out, nil
}

// ParseSystems reads a comma-separated list of systems.
func ParseSystems(s string) ([]System, error) {
	var out []System
	for _, f := range strings.Split(s, ",") {
		switch sys := System(strings.TrimSpace(f)); sys {
		case Weir, River:
			out = append(out, sys)
		case "":
		default:
			return nil, fmt.Errorf("system %q: want weir or river", f)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no systems")
	}
	return out, nil
}

// hasPhase reports whether the phases include one of kind k.
func (c Config) hasPhase(k PhaseKind) bool {
	return slices.ContainsFunc(c.Phases, func(ph Phase) bool { return ph.Kind == k })
}

// Validate checks c and returns an error naming the first bad setting.
func (c Config) Validate() error {
	switch {
	case c.URL == "":
		return errors.New("the database URL is empty")
	case len(c.Systems) == 0 || len(c.Workers) == 0 || len(c.Phases) == 0:
		return errors.New("systems, workers and phases must each name at least one")
	case (c.Rate > 0) == (c.Depth > 0):
		return fmt.Errorf("set exactly one of the rate (%g) and the depth (%d)", c.Rate, c.Depth)
	case c.Rate < 0 || c.Depth < 0:
		return errors.New("the rate and the depth must not be negative")
	case c.Work < 0 || c.Payload < 0:
		return errors.New("the work time and the payload must not be negative")
	case c.Batch < 1 || c.Tick <= 0 || c.DepthPoll <= 0 || c.Inserters < 1:
		return errors.New("the batch and the inserters must be positive, the tick and the depth poll longer than zero")
	case c.MaxConns < 1:
		return errors.New("max-conns must be positive")
	case c.ClaimCooldown < 0:
		return errors.New("-claim-cooldown is negative")
	case c.Poll <= 0 || c.FetchCooldown < time.Millisecond || c.Poll < c.FetchCooldown:
		return errors.New("poll must be positive, fetch-cooldown at least 1ms (River's minimum) and no longer than poll")
	case c.Warmup < 0 || c.Recovery < 0 || c.DrainTimeout <= 0 || c.VacuumEvery < 0:
		return errors.New("warmup, recovery and vacuum-every must not be negative, drain-timeout positive")
	}
	for _, p := range c.Phases {
		switch p.Kind {
		case BackendKill:
			if c.KillRate <= 0 {
				return errors.New("pg-backend-kill needs a positive kill rate")
			}
		case PoolExhaustion:
			if c.IdleConns < 1 || c.ReserveConns < 0 {
				return errors.New("pool-exhaustion needs a positive idle-conns and a reserve not negative")
			}
		case RepeatedKill:
			if c.KillEvery <= 0 {
				return errors.New("repeated-kill needs a positive kill period")
			}
		case ActiveReaders:
			if c.Readers < 1 || c.ReaderTx <= 0 || c.ReaderPause < 0 {
				return errors.New("active-readers needs positive readers and reader-tx")
			}
		case NoisyNeighbour:
			if c.NoisyCPUs < 1 {
				return errors.New("noisy-neighbour needs at least one CPU")
			}
		}
	}
	return nil
}
