package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// jobsGroup is "weir jobs": the jobs of the store.
func jobsGroup() group {
	return group{name: "jobs", subs: append([]subcommand{
		{
			name:    "list",
			summary: "list jobs, newest first, as a table or JSON lines",
			usage:   "weir jobs list [-state S] [-kind K] [-queue Q] [-limit N] [-before ID] [-json]",
			setup:   setupJobsList,
		},
		{
			name:    "show",
			summary: "print one job in full, its error history included, as indented JSON",
			usage:   "weir jobs show ID",
			setup:   setupJobsShow,
		},
		{
			name: "retry",
			summary: "make jobs run again now: a scheduled one at once, a completed, cancelled or dead one " +
				"with at least one attempt left (a running job must be cancelled first)",
			usage: "weir jobs retry ID...",
			setup: setupJobsRetry,
		},
		{
			name:    "cancel",
			summary: "cancel jobs that are waiting or running (a running job's worker finds its lease lost)",
			usage:   "weir jobs cancel ID...",
			setup:   setupJobsCancel,
		},
	}, append(pauseSubcommands(), limitsSubcommand())...)}
}

func setupJobsList(fs *flag.FlagSet) subRun {
	var states, kinds listFlag
	fs.Var(&states, "state", "only jobs in this `state` (available, scheduled, running, completed, cancelled, dead); repeat it or separate states by commas")
	fs.Var(&kinds, "kind", "only jobs of this `kind`; repeat it or separate kinds by commas")
	queue := fs.String("queue", "", "only jobs of this `queue`")
	limit := fs.Int("limit", store.DefaultJobListLimit, fmt.Sprintf("list at most `N` jobs (at most %d)", store.MaxJobListLimit))
	before := fs.Int64("before", 0, "list jobs with an id below `ID`: the last id of the previous page")
	asJSON := fs.Bool("json", false, "print one JSON object a line instead of a table")
	return func(ctx context.Context, s streams, sf storeFlags, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		f := store.JobFilter{Kinds: kinds, Queue: *queue, Before: *before, Limit: *limit}
		for _, st := range states {
			if !weirtype.State(st).Valid() {
				return usageError{fmt.Sprintf("-state %q is unknown: want one of %s", st, stateNames())}
			}
			f.States = append(f.States, weirtype.State(st))
		}
		switch {
		case *limit < 1 || *limit > store.MaxJobListLimit:
			return flagError("limit", "%d: want 1 to %d", *limit, store.MaxJobListLimit)
		case *before < 0:
			return flagError("before", "%d: want 0 or more: the last id of the previous page", *before)
		}
		return withExecutor(ctx, sf, func(ex store.Executor) error {
			jobs, err := ex.ListJobs(ctx, f)
			if err != nil {
				return err
			}
			if *asJSON {
				err = writeJSONLines(s.stdout, jobs, func(j *weirtype.Job) any { return jobRecordOf(j) })
			} else {
				err = writeJobTable(s.stdout, jobs)
			}
			if err != nil {
				return err
			}
			if len(jobs) == f.Limit {
				fmt.Fprintf(s.stderr, "more may follow: add -before %d for the next page\n", jobs[len(jobs)-1].ID)
			}
			return nil
		})
	}
}

func stateNames() string {
	names := make([]string, 0, 6)
	for _, st := range weirtype.States() {
		names = append(names, string(st))
	}
	return strings.Join(names, ", ")
}

func writeJobTable(w io.Writer, jobs []*weirtype.Job) error {
	return writeTable(w, "jobs", "ID\tKIND\tQUEUE\tSTATE\tATTEMPT\tSCHEDULED AT\tUPDATED AT\tLAST ERROR", jobs, func(j *weirtype.Job) string {
		last := ""
		if n := len(j.Errors); n > 0 {
			last = j.Errors[n-1].Message
		}
		return fmt.Sprintf("%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s", j.ID, oneLine(j.Kind, 30), oneLine(j.Queue, 20), j.State,
			j.Attempt, j.MaxAttempts, j.ScheduledAt.UTC().Format(time.RFC3339), j.UpdatedAt.UTC().Format(time.RFC3339), oneLine(last, 60))
	})
}

// jobRecord is the JSON shape of a job that jobs list -json and jobs show
// print: snake_case names, as deadletter.Record's, times in RFC 3339 UTC,
// and the times a job does not have yet left out.
type jobRecord struct {
	ID             int64                   `json:"id"`
	Kind           string                  `json:"kind"`
	Queue          string                  `json:"queue"`
	State          weirtype.State          `json:"state"`
	Attempt        int                     `json:"attempt"`
	MaxAttempts    int                     `json:"max_attempts"`
	Priority       int                     `json:"priority"`
	IdempotencyKey string                  `json:"idempotency_key,omitempty"`
	Source         string                  `json:"source,omitempty"`
	Payload        json.RawMessage         `json:"payload"`
	ScheduledAt    time.Time               `json:"scheduled_at"`
	CreatedAt      time.Time               `json:"created_at"`
	UpdatedAt      time.Time               `json:"updated_at"`
	AttemptedAt    *time.Time              `json:"attempted_at,omitempty"`
	FinalizedAt    *time.Time              `json:"finalized_at,omitempty"`
	LeaseOwner     string                  `json:"lease_owner,omitempty"`
	LeaseExpiresAt *time.Time              `json:"lease_expires_at,omitempty"`
	DeadlineAt     *time.Time              `json:"deadline_at,omitempty"`
	Errors         []weirtype.AttemptError `json:"errors"`
	// Progress is the latest an attempt recorded; Output what the
	// latest success returned. Both are left out when there is none.
	Progress *weirtype.Progress `json:"progress,omitempty"`
	Output   json.RawMessage    `json:"output,omitempty"`
}

func jobRecordOf(j *weirtype.Job) jobRecord {
	opt := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		t = t.UTC()
		return &t
	}
	payload := j.Payload
	if !json.Valid(payload) {
		payload, _ = json.Marshal(string(payload)) // a damaged row: keep its text
	}
	errs := make([]weirtype.AttemptError, len(j.Errors))
	for i, e := range j.Errors {
		e.At = e.At.UTC()
		errs[i] = e
	}
	return jobRecord{
		ID: j.ID, Kind: j.Kind, Queue: j.Queue, State: j.State, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts,
		Priority: j.Priority, IdempotencyKey: j.IdempotencyKey, Source: j.Source, Payload: payload,
		ScheduledAt: j.ScheduledAt.UTC(), CreatedAt: j.CreatedAt.UTC(), UpdatedAt: j.UpdatedAt.UTC(),
		AttemptedAt: opt(j.AttemptedAt), FinalizedAt: opt(j.FinalizedAt), LeaseOwner: j.LeaseOwner,
		LeaseExpiresAt: opt(j.LeaseExpiresAt), DeadlineAt: opt(j.DeadlineAt), Errors: errs,
		Progress: j.Progress, Output: j.Output,
	}
}

func setupJobsShow(fs *flag.FlagSet) subRun {
	return showByID("job", "job", func(ctx context.Context, ex store.Executor, id int64) (any, error) {
		j, err := ex.GetJob(ctx, id)
		if err != nil {
			return nil, err
		}
		return jobRecordOf(j), nil
	})
}

// showByID is a "show ID" subcommand: get reads the item with the id,
// what names it ("dead letter"), in an ID's name ("dead-letter ID") idName,
// and its record is printed as indented JSON.
func showByID(what, idName string, get func(ctx context.Context, ex store.Executor, id int64) (any, error)) subRun {
	return func(ctx context.Context, s streams, sf storeFlags, args []string) error {
		if len(args) != 1 {
			return usageError{"want one " + idName + " ID"}
		}
		ids, err := parseIDs(idName, args)
		if err != nil {
			return err
		}
		return withExecutor(ctx, sf, func(ex store.Executor) error {
			v, err := get(ctx, ex, ids[0])
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("no %s %d", what, ids[0])
			}
			if err != nil {
				return err
			}
			return writeIndented(s.stdout, v)
		})
	}
}

func setupJobsRetry(fs *flag.FlagSet) subRun {
	return eachJob("retry", func(ctx context.Context, ex store.Executor, now time.Time, id int64) (string, error) {
		j, err := ex.RetryJob(ctx, now, id)
		switch {
		case errors.Is(err, store.ErrConflict):
			return "", fmt.Errorf("job %d is running: cancel it first (weir jobs cancel %d)", id, id)
		case err != nil:
			return "", err
		}
		return fmt.Sprintf("job %d: %s, attempt %d of %d next", j.ID, j.State, j.Attempt+1, j.MaxAttempts), nil
	})
}

func setupJobsCancel(fs *flag.FlagSet) subRun {
	return eachJob("cancel", func(ctx context.Context, ex store.Executor, now time.Time, id int64) (string, error) {
		j, err := ex.Cancel(ctx, now, id)
		if err != nil {
			if errors.Is(err, store.ErrFinal) {
				if cur, gerr := ex.GetJob(ctx, id); gerr == nil {
					return "", fmt.Errorf("job %d is %s already: nothing to cancel", id, cur.State)
				}
			}
			return "", err
		}
		return fmt.Sprintf("job %d: %s", j.ID, j.State), nil
	})
}

// eachJob is the run of a subcommand that does op to each job of its
// arguments: it goes on past a job that fails, prints a line for each one
// done, and fails if any did.
func eachJob(op string, do func(ctx context.Context, ex store.Executor, now time.Time, id int64) (string, error)) subRun {
	return func(ctx context.Context, s streams, sf storeFlags, args []string) error {
		if len(args) == 0 {
			return usageError{"want at least one job ID"}
		}
		ids, err := parseIDs("job", args)
		if err != nil {
			return err
		}
		return withExecutor(ctx, sf, func(ex store.Executor) error {
			var errs []error
			for _, id := range ids {
				line, err := do(ctx, ex, time.Now(), id)
				if errors.Is(err, store.ErrNotFound) {
					err = fmt.Errorf("no job %d", id)
				}
				if err != nil {
					errs = append(errs, err)
					continue
				}
				if _, err := fmt.Fprintln(s.stdout, line); err != nil {
					return err
				}
			}
			if len(errs) > 0 && len(ids) > 1 {
				return errors.Join(append([]error{fmt.Errorf("%s: %d of %d jobs failed", op, len(errs), len(ids))}, errs...)...)
			}
			return errors.Join(errs...)
		})
	}
}
