package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/weirhq/weir/admin"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// pauseSubcommands are "weir jobs pause", "resume" and "paused".
func pauseSubcommands() []subcommand {
	return []subcommand{
		{
			name: "pause",
			summary: "pause a queue, or a kind within it, in the store: no process claims its jobs until resumed " +
				"(running jobs finish)",
			usage: "weir jobs pause -queue Q [-kind K] [-by NAME] [-reason TEXT]",
			setup: setupJobsPause,
		},
		{
			name:    "resume",
			summary: "end the pauses of a queue, or of a kind within it: an operator's, a breaker's, a Retry-After's",
			usage:   "weir jobs resume -queue Q [-kind K] [-cause operator|breaker|retry_after]",
			setup:   setupJobsResume,
		},
		{
			name:    "paused",
			summary: "list what is paused, by whom and since when, as a table or JSON lines",
			usage:   "weir jobs paused [-json]",
			setup:   setupJobsPaused,
		},
	}
}

// pauseTarget declares -queue and -kind.
func pauseTarget(fs *flag.FlagSet) (queue, kind *string) {
	queue = fs.String("queue", "", "the `queue` (required)")
	kind = fs.String("kind", "", "only the jobs of this `kind` within the queue; it must have a job there")
	return queue, kind
}

// checkPauseTarget refuses arguments and a missing -queue; verb is what
// the command does to the queue.
func checkPauseTarget(args []string, queue, verb string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	if queue == "" {
		return flagError("queue", "is required: name the queue to %s", verb)
	}
	return nil
}

func setupJobsPause(fs *flag.FlagSet) subRun {
	queue, kind := pauseTarget(fs)
	by := fs.String("by", "", "who pauses, shown with the pause (default the user's login name)")
	reason := fs.String("reason", "", "why, shown with the pause")
	return func(ctx context.Context, s streams, sf storeFlags, args []string) error {
		if err := checkPauseTarget(args, *queue, "pause"); err != nil {
			return err
		}
		if *by == "" {
			*by = os.Getenv("USER")
		}
		return withExecutor(ctx, sf, func(ex store.Executor) error {
			p, err := ex.Pause(ctx, time.Now(), store.PauseParams{Queue: *queue, Kind: *kind, By: *by, Reason: *reason})
			switch {
			case errors.Is(err, store.ErrNotFound) && *kind == "":
				return fmt.Errorf("queue %q has no job and no pause: check the name (weir jobs list); "+
					"a client that works the queue can pause it before its first job (Client.Pause)", *queue)
			case errors.Is(err, store.ErrNotFound):
				return fmt.Errorf("queue %q has no job of kind %q: check the names (weir jobs list -queue %s)", *queue, *kind, *queue)
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(s.stdout, "paused %s since %s\n", pauseTargetName(p), p.PausedAt.UTC().Format(time.RFC3339))
			return err
		})
	}
}

func setupJobsResume(fs *flag.FlagSet) subRun {
	queue, kind := pauseTarget(fs)
	cause := fs.String("cause", "", "end only the pause of this `cause`: operator, breaker or retry_after (default every cause)")
	return func(ctx context.Context, s streams, sf storeFlags, args []string) error {
		if err := checkPauseTarget(args, *queue, "resume"); err != nil {
			return err
		}
		if c := weirtype.PauseCause(*cause); c != "" && !c.Valid() {
			return flagError("cause", "%q: want operator, breaker or retry_after", *cause)
		}
		return withExecutor(ctx, sf, func(ex store.Executor) error {
			ended, err := ex.Resume(ctx, *queue, *kind, weirtype.PauseCause(*cause))
			if errors.Is(err, store.ErrNotFound) {
				what := pauseTargetName(&weirtype.Pause{Queue: *queue, Kind: *kind})
				if *cause != "" {
					return fmt.Errorf("%s has no %s pause: nothing to resume (weir jobs paused)", what, *cause)
				}
				return fmt.Errorf("%s is not paused: nothing to resume (weir jobs paused)", what)
			}
			if err != nil {
				return err
			}
			for _, p := range ended {
				if _, err := fmt.Fprintf(s.stdout, "resumed %s (%s pause)\n", pauseTargetName(p), p.Cause); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

func setupJobsPaused(fs *flag.FlagSet) subRun {
	return setupListing(fs, func(ctx context.Context, ex store.Executor) ([]*weirtype.Pause, error) {
		return ex.ListPauses(ctx, time.Now())
	},
		func(p *weirtype.Pause) any { return admin.PauseOf(p) }, writePauses)
}

// pauseTargetName names what p pauses: "queue q" or "kind k of queue q".
func pauseTargetName(p *weirtype.Pause) string {
	if p.Kind == "" {
		return "queue " + printable(p.Queue)
	}
	return "kind " + printable(p.Kind) + " of queue " + printable(p.Queue)
}

// writePauses writes ps as a table.
func writePauses(w io.Writer, ps []*weirtype.Pause) error {
	return writeTable(w, "pauses", "QUEUE\tKIND\tCAUSE\tBY\tSINCE\tUNTIL\tREASON", ps, func(p *weirtype.Pause) string {
		until := "resumed"
		if !p.Until.IsZero() {
			until = p.Until.UTC().Format(time.RFC3339)
		}
		kind := p.Kind
		if kind == "" {
			kind = "(all)"
		}
		return strings.Join([]string{printable(p.Queue), printable(kind), string(p.Cause), printable(p.By),
			p.PausedAt.UTC().Format(time.RFC3339), until, printable(p.Reason)}, "\t")
	})
}

// statusRecord is "weir status -json": the pipeline's status, what is
// paused and the limits.
type statusRecord struct {
	pipeline.Status
	Pauses []admin.Pause `json:"pauses"`
	Limits []admin.Limit `json:"limits"`
}

func statusRecordOf(st pipeline.Status, ps []*weirtype.Pause, ls []*weirtype.Limit) statusRecord {
	r := statusRecord{Status: st, Pauses: []admin.Pause{}, Limits: []admin.Limit{}}
	for _, p := range ps {
		r.Pauses = append(r.Pauses, admin.PauseOf(p))
	}
	for _, l := range ls {
		r.Limits = append(r.Limits, admin.LimitOf(l))
	}
	return r
}

// formatPauses is the lines of "weir status" on what is paused: none when
// nothing is.
func formatPauses(ps []*weirtype.Pause) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "paused:       %s (%s", pauseTargetName(p), p.Cause)
		if p.By != "" {
			fmt.Fprintf(&b, " by %s", printable(p.By))
		}
		fmt.Fprintf(&b, ") since %s", p.PausedAt.UTC().Format(time.RFC3339))
		if !p.Until.IsZero() {
			fmt.Fprintf(&b, " until %s", p.Until.UTC().Format(time.RFC3339))
		}
		if p.Reason != "" {
			fmt.Fprintf(&b, ": %s", printable(p.Reason))
		}
		b.WriteString("\n")
	}
	return b.String()
}
