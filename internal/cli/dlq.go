package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weirhq/weir/deadletter"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// dlqGroup is "weir dlq": the dead-letter store.
func dlqGroup() group {
	return group{name: "dlq", subs: []subcommand{
		{
			name:    "list",
			summary: "list dead letters, oldest first, as a table or JSON lines",
			usage:   "weir dlq list [-kind K] [-queue Q] [-reason R] [-limit N] [-after ID] [-json]",
			setup:   setupDLQList,
		},
		{
			name:    "show",
			summary: "print one dead letter in full, as indented JSON",
			usage:   "weir dlq show ID",
			setup:   setupDLQShow,
		},
		{
			name:    "export",
			summary: "write dead letters as JSON lines, to stdout or a file",
			usage:   "weir dlq export [-o FILE] [-kind K] [-queue Q] [-reason R] [-limit N]",
			setup:   setupDLQExport,
		},
		{
			name:    "requeue",
			summary: "make the jobs of dead letters run again, their attempts starting from 1",
			usage:   "weir dlq requeue (ID... | -all | [-kind K] [-queue Q])",
			setup:   setupDLQRequeue,
		},
		{
			name:    "purge",
			summary: "delete dead letters and their jobs for good",
			usage:   "weir dlq purge (ID... | -all -yes | [-kind K] [-queue Q] [-before AGE|TIME] -yes)",
			setup:   setupDLQPurge,
		},
	}}
}

// dlqFilterFlags are the selection flags of list, export, requeue and
// purge.
type dlqFilterFlags struct {
	kind, queue, reason string
	job                 int64
}

func (d *dlqFilterFlags) declare(fs *flag.FlagSet, reason bool) {
	fs.StringVar(&d.kind, "kind", "", "only the dead letters of this job `kind`")
	fs.StringVar(&d.queue, "queue", "", "only the dead letters of this `queue`")
	fs.Int64Var(&d.job, "job", 0, "only the dead letters of the job with this `id`")
	if reason {
		fs.StringVar(&d.reason, "reason", "", "only those abandoned for this `reason`: "+reasonNames())
	}
}

// reasonNames lists the abandon reasons for a help text or an error.
func reasonNames() string {
	var names []string
	for _, r := range weirtype.AbandonReasons() {
		names = append(names, string(r))
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func (d dlqFilterFlags) filter() (store.DeadLetterFilter, error) {
	f := store.DeadLetterFilter{Kind: d.kind, Queue: d.queue, Reason: weirtype.AbandonReason(d.reason), JobID: d.job}
	if d.job < 0 {
		return f, flagError("job", "%d: want a job's id, a positive whole number", d.job)
	}
	if f.Reason == "" || f.Reason.Valid() {
		return f, nil
	}
	return f, usageError{fmt.Sprintf("-reason %q is unknown: want %s", printable(d.reason), reasonNames())}
}

// filterOnly is the filter of a command that takes no arguments.
func (d dlqFilterFlags) filterOnly(args []string) (store.DeadLetterFilter, error) {
	if err := noArgs(args); err != nil {
		return store.DeadLetterFilter{}, err
	}
	return d.filter()
}

func (d dlqFilterFlags) set() bool {
	return d.kind != "" || d.queue != "" || d.reason != "" || d.job != 0
}

func noArgs(args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", args[0])}
	}
	return nil
}

// withExecutor opens the existing store sf names and calls fn with its
// Executor.
func withExecutor(ctx context.Context, sf storeFlags, fn func(ex store.Executor) error) error {
	o, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer o.close()
	return fn(o.store.Executor())
}

func setupDLQList(fs *flag.FlagSet) subRun {
	var sel dlqFilterFlags
	sel.declare(fs, true)
	limit := fs.Int("limit", 50, "list at most `N` dead letters (0: all)")
	after := fs.Int64("after", 0, "list those with an id above `ID`: the last id of the previous page")
	asJSON := fs.Bool("json", false, "print one JSON record a line (deadletter.Record) instead of a table")
	return func(ctx context.Context, s streams, sf storeFlags, args []string) error {
		f, err := sel.filterOnly(args)
		if err != nil {
			return err
		}
		switch {
		case *limit < 0:
			return flagError("limit", "%d: want 0 or more (0: all)", *limit)
		case *after < 0:
			return flagError("after", "%d: want 0 or more: the last id of the previous page", *after)
		}
		f.Limit, f.AfterID = *limit, *after
		return withExecutor(ctx, sf, func(ex store.Executor) error {
			dls, err := ex.ListDeadLetters(ctx, f)
			if err != nil {
				return err
			}
			if *asJSON {
				err = writeJSONLines(s.stdout, dls, func(dl *weirtype.DeadLetter) any { return deadletter.RecordOf(dl) })
			} else {
				err = writeDeadLetterTable(s.stdout, dls)
			}
			if err != nil {
				return err
			}
			if *limit > 0 && len(dls) == *limit {
				fmt.Fprintf(s.stderr, "more may follow: add -after %d for the next page\n", dls[len(dls)-1].ID)
			}
			return nil
		})
	}
}

func writeDeadLetterTable(w io.Writer, dls []*weirtype.DeadLetter) error {
	return writeTable(w, "dead letters", "ID\tJOB\tKIND\tQUEUE\tREASON\tATTEMPTS\tFAILED AT\tLAST ERROR", dls, func(dl *weirtype.DeadLetter) string {
		return fmt.Sprintf("%d\t%d\t%s\t%s\t%s\t%d\t%s\t%s", dl.ID, dl.JobID, oneLine(dl.Kind, 30), oneLine(dl.Queue, 20),
			oneLine(string(dl.Reason), 30), dl.Attempts, dl.FailedAt.UTC().Format(time.RFC3339), oneLine(dl.LastError, 60))
	})
}

// writeTable writes a row a line under header, in aligned columns (the
// cells of header and of each row separated by tabs), or "no what" when
// there are no rows.
func writeTable[T any](w io.Writer, what, header string, rows []T, row func(T) string) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintf(w, "no %s\n", what)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, row(r))
	}
	return tw.Flush()
}

// writeJSONLines writes record(v) for each of vs, one JSON value a line,
// safe for a terminal (terminalJSON).
func writeJSONLines[T any](w io.Writer, vs []T, record func(T) any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, v := range vs {
		b.Reset()
		if err := enc.Encode(record(v)); err != nil {
			return err
		}
		if _, err := w.Write(terminalJSON(b.Bytes())); err != nil {
			return err
		}
	}
	return nil
}

// writeIndented writes v as indented JSON, safe for a terminal
// (terminalJSON).
func writeIndented(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(terminalJSON(b.Bytes()))
	return err
}

func setupDLQShow(fs *flag.FlagSet) subRun {
	return showByID("dead letter", "dead-letter", func(ctx context.Context, ex store.Executor, id int64) (any, error) {
		dl, err := ex.GetDeadLetter(ctx, id)
		if err != nil {
			return nil, err
		}
		return deadletter.RecordOf(dl), nil
	})
}

func setupDLQExport(fs *flag.FlagSet) subRun {
	var sel dlqFilterFlags
	sel.declare(fs, true)
	out := fs.String("o", "", "write to `FILE` (made, or replaced once the export succeeds) instead of stdout")
	limit := fs.Int("limit", 0, "export at most `N` dead letters (0: all)")
	return func(ctx context.Context, s streams, sf storeFlags, args []string) error {
		f, err := sel.filterOnly(args)
		if err != nil {
			return err
		}
		if *limit < 0 {
			return flagError("limit", "%d: want 0 or more (0: all)", *limit)
		}
		f.Limit = *limit
		return withExecutor(ctx, sf, func(ex store.Executor) error {
			if *out == "" {
				_, err := deadletter.Export(ctx, ex, f, s.stdout)
				return err
			}
			n, err := exportToFile(ctx, ex, f, *out)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(s.stderr, "exported %d dead letters to %s\n", n, printable(*out))
			return err
		})
	}
}

// exportToFile exports to a temporary file beside path, then renames it to
// path: a failed export leaves no partial file, and an earlier one intact.
func exportToFile(ctx context.Context, ex store.Executor, f store.DeadLetterFilter, path string) (int, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".weir-export-*")
	if err != nil {
		return 0, fmt.Errorf("export: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails once renamed
	n, err := deadletter.Export(ctx, ex, f, tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return 0, fmt.Errorf("export to %s: %w", path, err)
	}
	return n, nil
}

// dlqSelection reads the selection of requeue and purge: ids, or -all, or
// filters, never two of them.
func dlqSelection(args []string, all bool, sel dlqFilterFlags, extra bool) (store.DeadLetterFilter, []int64, error) {
	ids, err := parseIDs("dead-letter", args)
	if err != nil {
		return store.DeadLetterFilter{}, nil, err
	}
	byFilter := sel.set() || extra
	n := 0
	for _, b := range []bool{len(ids) > 0, all, byFilter} {
		if b {
			n++
		}
	}
	switch {
	case n == 0:
		return store.DeadLetterFilter{}, nil, usageError{"select the dead letters: give their IDs, -all, or filters such as -kind K"}
	case n > 1:
		return store.DeadLetterFilter{}, nil, usageError{"give dead-letter IDs, -all, or filters, not more than one of them"}
	case len(ids) > 0:
		return store.DeadLetterFilter{IDs: ids}, ids, nil
	case all:
		return store.DeadLetterFilter{}, nil, nil
	}
	f, err := sel.filter()
	return f, nil, err
}

// checkDeadLetters returns an error naming the ids that are no dead
// letter's, so that a requeue or purge of a mistyped id changes nothing.
func checkDeadLetters(ctx context.Context, ex store.Executor, ids []int64) error {
	found, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{IDs: ids})
	if err != nil {
		return err
	}
	var missing []string
	for _, id := range ids {
		if !slices.ContainsFunc(found, func(dl *weirtype.DeadLetter) bool { return dl.ID == id }) {
			missing = append(missing, strconv.FormatInt(id, 10))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no dead letter %s (nothing changed)", strings.Join(missing, ", "))
	}
	return nil
}

func setupDLQRequeue(fs *flag.FlagSet) subRun {
	var sel dlqFilterFlags
	sel.declare(fs, true)
	all := fs.Bool("all", false, "requeue every dead letter")
	return func(ctx context.Context, s streams, sf storeFlags, args []string) error {
		f, ids, err := dlqSelection(args, *all, sel, false)
		if err != nil {
			return err
		}
		return withExecutor(ctx, sf, func(ex store.Executor) error {
			if ids != nil {
				if err := checkDeadLetters(ctx, ex, ids); err != nil {
					return err
				}
			}
			jobs, err := ex.RequeueDeadLetters(ctx, time.Now(), f)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(s.stdout, "requeued %d jobs%s\n", len(jobs), idSuffix(jobs))
			return err
		})
	}
}

// idSuffix is ": 1, 2, 3" for a few ids, and nothing for none or many.
func idSuffix(ids []int64) string {
	if len(ids) == 0 || len(ids) > 20 {
		return ""
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return ": " + strings.Join(s, ", ")
}

func setupDLQPurge(fs *flag.FlagSet) subRun {
	var sel dlqFilterFlags
	sel.declare(fs, true)
	all := fs.Bool("all", false, "purge every dead letter (with -yes)")
	before := fs.String("before", "", "only those that failed before `AGE|TIME`: an age such as 72h or 30d, or an RFC 3339 time or a date (2026-01-21)")
	yes := fs.Bool("yes", false, "confirm a purge by -all or by filters (a list of IDs needs none)")
	return func(ctx context.Context, s streams, sf storeFlags, args []string) error {
		now := time.Now()
		f, ids, err := dlqSelection(args, *all, sel, *before != "")
		if err != nil {
			return err
		}
		if *before != "" {
			if f.FailedBefore, err = parseBefore(*before, now); err != nil {
				return err
			}
		}
		if ids == nil && !*yes {
			return usageError{"a purge deletes dead letters and their jobs for good: add -yes to confirm (only a list of dead-letter IDs needs no -yes)"}
		}
		return withExecutor(ctx, sf, func(ex store.Executor) error {
			if ids != nil {
				if err := checkDeadLetters(ctx, ex, ids); err != nil {
					return err
				}
			}
			n, err := ex.PurgeDeadLetters(ctx, f)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(s.stdout, "purged %d dead letters and their jobs\n", n)
			return err
		})
	}
}

// parseBefore reads -before: an age before now (a Go duration, or whole
// days such as 30d), an RFC 3339 time, or a date (midnight UTC).
func parseBefore(v string, now time.Time) (time.Time, error) {
	if d, ok := strings.CutSuffix(v, "d"); ok {
		if n, err := strconv.Atoi(d); err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return time.Time{}, usageError{fmt.Sprintf("-before %q: the age must not be negative", v)}
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usageError{fmt.Sprintf("-before %q: want an age such as 72h or 30d, an RFC 3339 time, or a date such as 2026-01-21", v)}
}
