package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/weirhq/weir/store"
)

// A group is a command made of subcommands, such as "weir dlq list". The
// group's own FlagSet holds the store flags, so that "weir dlq -store URL
// list" works and "weir help dlq" lists them; each subcommand declares
// them again, with the values the group parsed (its command line, then
// the WEIR_ variables) as defaults, so that "weir dlq list -store URL"
// works too. Only the store flags come from the environment: a stray
// WEIR_ALL or WEIR_KIND must never widen a requeue or a purge.
type group struct {
	name string
	subs []subcommand
}

// subcommand is one entry of a group.
type subcommand struct {
	name    string
	summary string
	usage   string // the synopsis, e.g. "weir dlq show ID"
	// setup declares the subcommand's own flags and returns the function
	// that runs it with the store flags and the positional arguments.
	setup func(fs *flag.FlagSet) subRun
}

type subRun func(ctx context.Context, s streams, sf storeFlags, args []string) error

// command is the group as a command of weir, with its summary.
func (g group) command(summary string) command {
	return command{name: g.name, summary: summary, usage: g.usage(), help: g.help(), setup: g.setup, env: true, group: true}
}

// usage is the group's synopsis: each subcommand's, one a line.
func (g group) usage() string {
	lines := make([]string, len(g.subs))
	for i, sc := range g.subs {
		lines[i] = sc.usage
		if i > 0 {
			lines[i] = "       " + sc.usage // under "usage: "
		}
	}
	return strings.Join(lines, "\n")
}

// help is the group's help text: the subcommands and their summaries.
func (g group) help() string {
	var b strings.Builder
	b.WriteString("Subcommands:\n\n")
	width := 0
	for _, sc := range g.subs {
		width = max(width, len(sc.name))
	}
	for _, sc := range g.subs {
		fmt.Fprintf(&b, "\t%-*s  %s\n", width, sc.name, sc.summary)
	}
	fmt.Fprintf(&b, "\nRun 'weir %s <subcommand> -h' for a subcommand's flags.", g.name)
	return b.String()
}

func (g group) names() string {
	names := make([]string, len(g.subs))
	for i, sc := range g.subs {
		names[i] = sc.name
	}
	return strings.Join(names, ", ")
}

// setup is the group's command setup: the store flags, and a run that
// dispatches to the subcommand.
func (g group) setup(fs *flag.FlagSet) runFunc {
	var sf storeFlags
	sf.declare(fs)
	return func(s streams, args []string) error { return g.run(s, sf, args) }
}

func (g group) run(s streams, parent storeFlags, args []string) error {
	if len(args) == 0 {
		return usageError{fmt.Sprintf("missing subcommand: want one of %s", g.names())}
	}
	var sc *subcommand
	for i := range g.subs {
		if g.subs[i].name == args[0] {
			sc = &g.subs[i]
		}
	}
	if sc == nil {
		return usageError{fmt.Sprintf("unknown subcommand %q: want one of %s", args[0], g.names())}
	}
	fs := flag.NewFlagSet("weir "+g.name+" "+sc.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	sf := parent
	sf.declare(fs)
	run := sc.setup(fs)
	rest, err := parseFlags(fs, args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return sc.writeHelp(s.stdout, fs)
		}
		return usageError{fmt.Sprintf("%s: %v", sc.name, err)}
	}
	ctx, stop := commandContext()
	defer stop()
	err = run(ctx, s, sf, rest)
	if ue := (usageError{}); errors.As(err, &ue) {
		return usageError{fmt.Sprintf("%s: %s", sc.name, ue.msg)}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", sc.name, err)
	}
	return nil
}

func (sc subcommand) writeHelp(w io.Writer, fs *flag.FlagSet) error {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s\n\n%s.\n\nThe store flags can also be set by WEIR_STORE, WEIR_SCHEMA and WEIR_DATA;\na flag on the command line wins. Flags may come before or after the arguments;\n-- ends them.\n\nFlags:\n", sc.usage, capitalize(sc.summary))
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	_, err := io.WriteString(w, b.String())
	return err
}

// commandContext is the context of a command that talks to the store: it
// ends at SIGINT or SIGTERM, so that an interrupted command stops its
// queries and closes the store.
func commandContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// setupListing declares -json on fs and returns a subcommand that lists
// what list reads from the store, as a table that table writes or, with
// -json, as JSON lines of each one's record.
func setupListing[T any](fs *flag.FlagSet, list func(context.Context, store.Executor) ([]T, error), record func(T) any,
	table func(io.Writer, []T) error) subRun {
	asJSON := fs.Bool("json", false, "print one JSON object a line instead of a table")
	return func(ctx context.Context, s streams, sf storeFlags, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		return withExecutor(ctx, sf, func(ex store.Executor) error {
			vs, err := list(ctx, ex)
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSONLines(s.stdout, vs, record)
			}
			return table(s.stdout, vs)
		})
	}
}

// parseIDs reads positive int64 ids (of jobs or dead letters).
func parseIDs(what string, args []string) ([]int64, error) {
	ids := make([]int64, 0, len(args))
	for _, a := range args {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id < 1 {
			return nil, usageError{fmt.Sprintf("bad %s id %q: want a positive integer", what, a)}
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// listFlag is a flag that may be repeated and takes comma-separated
// values: -state dead,cancelled -state scheduled.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}
