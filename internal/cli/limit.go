package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/weirhq/weir/admin"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// limitsSubcommand is "weir jobs limits".
func limitsSubcommand() subcommand {
	return subcommand{
		name: "limits",
		summary: "list the limits across processes (KindConfig.MaxRunning and Rate, as the clients recorded them) " +
			"with the attempts running and the starts in the rate's window, as a table or JSON lines",
		usage: "weir jobs limits [-json]",
		setup: setupJobsLimits,
	}
}

func setupJobsLimits(fs *flag.FlagSet) subRun {
	return setupListing(fs, func(ctx context.Context, ex store.Executor) ([]*weirtype.Limit, error) { return ex.ListLimits(ctx) },
		func(l *weirtype.Limit) any { return admin.LimitOf(l) },
		func(w io.Writer, ls []*weirtype.Limit) error { return writeLimits(w, ls, time.Now()) })
}

// writeLimits writes ls as a table, the starts counted in the rate's
// window as of now.
func writeLimits(w io.Writer, ls []*weirtype.Limit, now time.Time) error {
	return writeTable(w, "limits", "KEY\tKINDS\tRUNNING\tRATE\tSTARTED", ls, func(l *weirtype.Limit) string {
		return strings.Join([]string{printable(l.Key), printable(strings.Join(l.Kinds, ",")), limitRunning(l),
			limitRate(l), limitStarted(l, now)}, "\t")
	})
}

// limitRunning is "running/max", or "running" without a maximum.
func limitRunning(l *weirtype.Limit) string {
	if l.MaxRunning == 0 {
		return fmt.Sprint(l.Running)
	}
	return fmt.Sprintf("%d/%d", l.Running, l.MaxRunning)
}

// limitRate is "N per D", or "-" without a rate.
func limitRate(l *weirtype.Limit) string {
	if l.Rate == 0 {
		return "-"
	}
	return fmt.Sprintf("%d per %v", l.Rate, l.Per)
}

// limitStarted is the starts counted in the rate window that holds now, and
// since when, or "-" without a rate.
func limitStarted(l *weirtype.Limit, now time.Time) string {
	if l.Rate == 0 {
		return "-"
	}
	w := store.LimitWindow(now, l.Per)
	n := l.WindowStarts
	if l.WindowStart.Before(w) {
		n = 0
	}
	return fmt.Sprintf("%d since %s", n, w.UTC().Format(time.RFC3339))
}

// formatLimits is the lines of "weir status" on the limits: none when
// there is none.
func formatLimits(ls []*weirtype.Limit, now time.Time) string {
	var b strings.Builder
	for _, l := range ls {
		fmt.Fprintf(&b, "limit:        %s (%s): running %s", printable(l.Key), printable(strings.Join(l.Kinds, ",")), limitRunning(l))
		if l.Rate > 0 {
			fmt.Fprintf(&b, ", rate %s, started %s", limitRate(l), limitStarted(l, now))
		}
		b.WriteString("\n")
	}
	return b.String()
}
