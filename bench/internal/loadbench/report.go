package loadbench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"
)

// Print writes the settings, a table per phase and the summary.
func (rep *Report) Print(out io.Writer) {
	c := rep.Config
	load := fmt.Sprintf("rate %.0f jobs/s", c.Rate)
	if c.Depth > 0 {
		load = fmt.Sprintf("depth %d jobs held", c.Depth)
	}
	fmt.Fprintf(out, "# loadbench: %s; %s; GOMAXPROCS %d; load average %s at the start, %s at the end\n",
		rep.Server, rep.GoVersion, rep.GOMAXPROCS, rep.LoadStart, rep.LoadEnd)
	if c.Depth > 0 {
		load += fmt.Sprintf(" by %d insert calls in flight", c.Inserters)
	}
	fmt.Fprintf(out, "# producer: %s, batches of up to %d every %v; jobs: %v of work, %d-byte payload; warmup %v, recovery window %v\n",
		load, c.Batch, c.Tick, c.Work, c.Payload, c.Warmup, c.Recovery)
	fmt.Fprintf(out, "# weir: PollEvery %v, ClaimCooldown %v, pool %d; River: FetchPollInterval %v, FetchCooldown %v, pool %d; producer inserts: weir InsertMany, River InsertManyFast\n",
		c.Poll, c.ClaimCooldown, c.MaxConns, c.Poll, c.FetchCooldown, c.MaxConns)
	if c.VacuumEvery > 0 {
		fmt.Fprintf(out, "# VACUUM of each job table every %v\n", c.VacuumEvery)
	}
	fmt.Fprintln(out, "# jobs/s: median (min) of 1 s completion rates; pickup: insert call → handler start, p50/p99 per 1 s window, median/max over the phase;")
	fmt.Fprintln(out, "# dead, size: the job table at the phase's end (pg_stat_user_tables, pg_total_relation_size); CPU: seconds per 1,000 jobs;")
	fmt.Fprintln(out, "# insert ms: the producer's insert calls, p50/p99; depth: waiting jobs (the last count, every -depth-poll or 20x its duration apart, plus inserts, less starts since)")
	fmt.Fprintln(out, "# recovery: after a fault phase, the time until the rate (or depth) is back at the clean phase's; after p99: pickup p99 per 1 s window of the recovery window, median/max")

	for _, ph := range c.Phases {
		fmt.Fprintf(out, "\n== %s (%v) ==\n", ph.Kind, ph.Duration)
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "workers\tsystem\tjobs/s\t(min)\tp50 ms\tp95 ms\tp99 ms\tdepth\tdead tup\tsize MB\twkr CPU\tdb CPU\tinsert ms\trecovery\tafter p99\t")
		for _, w := range c.Workers {
			for _, sys := range c.Systems {
				pr := rep.phase(sys, w, ph.Kind)
				if pr == nil {
					fmt.Fprintf(tw, "%d\t%s\t-\t\t\t\t\t\t\t\t\t\t\t\t\t\n", w, sys)
					continue
				}
				fmt.Fprintf(tw, "%d\t%s\t%.0f\t(%.0f)\t%s\t%s\t%s\t%.0f/%.0f\t%d\t%.1f\t%.3f\t%.3f\t%.1f/%.1f\t%s\t%s\t\n",
					w, sys, pr.Rate, pr.RateMin, medMax(pr.P50), medMax(pr.P95), medMax(pr.P99),
					pr.Depth.Median, pr.Depth.Max, pr.DeadEnd, float64(pr.SizeEnd)/1e6,
					pr.WorkerCPUPer1k, pr.DBCPUPer1k, pr.InsertP50, pr.InsertP99, recovery(pr), after(pr))
			}
			if r := rep.ratio(w, ph.Kind); r != "" {
				fmt.Fprintf(tw, "%d\tweir/river\t%s\t\t\t\t\t\t\t\t\t\t\t\t\t\n", w, r)
			}
		}
		_ = tw.Flush()
		for _, w := range c.Workers {
			for _, sys := range c.Systems {
				pr := rep.phase(sys, w, ph.Kind)
				if pr == nil {
					continue
				}
				fmt.Fprintf(out, "  %s workers=%d: %d claims (%.1f jobs each), %.1f entries and %.1f blocks of the claim index per scan, %.1f heap and %.1f index buffer accesses and %.1f row updates (%.0f%% HOT) per job; db CPU of the inserts %.3f s/1k",
					sys, w, pr.ClaimScans, float64(pr.Completed)/math.Max(1, float64(pr.ClaimScans)), pr.EntriesPerScan, pr.BlocksPerScan,
					pr.HeapBlocksPerJob, pr.IndexBlocksPerJob, pr.UpdatesPerJob, pr.HOTPercent, pr.ProducerDBCPUPer1k)
				if pr.Fault != "" {
					fmt.Fprintf(out, "; %s", pr.Fault)
				}
				fmt.Fprintln(out)
			}
		}
	}
	rep.printSummary(out)
}

func (rep *Report) printSummary(out io.Writer) {
	c := rep.Config
	fmt.Fprintln(out, "\n== summary ==")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "phase\tworkers\t"
	for _, sys := range c.Systems {
		header += string(sys) + " jobs/s\t" + string(sys) + " p99 ms\t"
	}
	if len(c.Systems) == 2 {
		header += "weir/river\t"
	}
	fmt.Fprintln(tw, header)
	for _, ph := range c.Phases {
		for _, w := range c.Workers {
			line := fmt.Sprintf("%s\t%d\t", ph.Kind, w)
			for _, sys := range c.Systems {
				if pr := rep.phase(sys, w, ph.Kind); pr != nil {
					line += fmt.Sprintf("%.0f\t%.1f\t", pr.Rate, pr.P99.Median)
				} else {
					line += "-\t-\t"
				}
			}
			if len(c.Systems) == 2 {
				line += rep.ratio(w, ph.Kind) + "\t"
			}
			fmt.Fprintln(tw, line)
		}
	}
	_ = tw.Flush()
	fmt.Fprintln(out, "\n== every produced job completed exactly once? (checked in the database after the drain) ==")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tworkers\tproduced\tlost\tdup completions\tdup rows\treruns\twork twice\tunfinished\tnot inserted\tdrain s\t")
	for _, r := range rep.Runs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t%.1f\t\n", r.System, r.Workers, r.Produced, r.Lost,
			r.DupCompleted, r.DupRows, r.Reruns, r.workTwice(), r.Unfinished, r.NotInserted, r.DrainSeconds)
	}
	_ = tw.Flush()
	for _, r := range rep.Runs {
		if r.Err != "" {
			fmt.Fprintf(out, "error: %s workers=%d: %s\n", r.System, r.Workers, r.Err)
		}
	}
}

func medMax(s Stat) string { return fmt.Sprintf("%.1f/%.1f", s.Median, s.Max) }

// after is the pickup p99 after the fault (median/max of the recovery
// window's one-second windows), "-" without one.
func after(pr *PhaseResult) string {
	if len(pr.RecoverySamples) == 0 {
		return "-"
	}
	return medMax(pr.AfterP99)
}

func recovery(pr *PhaseResult) string {
	switch {
	case pr.RecoverySeconds < 0:
		return "-"
	case !pr.Recovered:
		return fmt.Sprintf(">%.0fs", pr.RecoverySeconds)
	}
	return fmt.Sprintf("%.0fs", pr.RecoverySeconds)
}

func (rep *Report) phase(sys System, workers int, k PhaseKind) *PhaseResult {
	for i := range rep.Runs {
		r := &rep.Runs[i]
		if r.System != sys || r.Workers != workers {
			continue
		}
		for j := range r.Phases {
			if r.Phases[j].Phase == k {
				return &r.Phases[j]
			}
		}
	}
	return nil
}

// ratio returns weir's median rate over River's in the phase.
func (rep *Report) ratio(workers int, k PhaseKind) string {
	w, r := rep.phase(Weir, workers, k), rep.phase(River, workers, k)
	if w == nil || r == nil || r.Rate == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f", w.Rate/r.Rate)
}

// Failed returns what went wrong in the run, or "" when every run
// finished and every produced job completed exactly once.
func (rep *Report) Failed() string {
	var bad []string
	for _, r := range rep.Runs {
		switch {
		case r.Err != "":
			bad = append(bad, fmt.Sprintf("%s workers=%d: %s", r.System, r.Workers, r.Err))
		case r.Lost > 0 || r.DupCompleted > 0 || r.DupRows > 0:
			bad = append(bad, fmt.Sprintf("%s workers=%d: %d lost, %d completed twice, %d duplicate rows",
				r.System, r.Workers, r.Lost, r.DupCompleted, r.DupRows))
		}
	}
	return strings.Join(bad, "; ")
}

// WriteJSON writes the report to the file path.
func (rep *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
