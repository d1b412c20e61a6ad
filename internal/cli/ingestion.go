package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirhq/weir/ingest"
	"github.com/weirhq/weir/ingest/api"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/internal/redact"
)

// newLogger logs to w at level, as text.
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// setupRun declares "weir run".
func setupRun(fs *flag.FlagSet) runFunc {
	var f serviceFlags
	f.declare(fs)
	listen := fs.String("listen", "127.0.0.1:8080", "`address` of the HTTP API, health checks and /metrics")
	brokerSpec := fs.String("broker", "", "publish an event per saved or failed document through the outbox to this `broker`: embedded (NATS in <data>/nats), nats://… or amqp://…; empty: no events")
	topic := fs.String("events-topic", ingest.DefaultEventsTopic, "the broker `topic` of the events")
	otlp := fs.String("otlp-endpoint", "", "send OpenTelemetry spans (a job attempt, a relay publish) over OTLP/HTTP to this `URL` (http://host:4318); empty: none")
	adminToken := fs.String("admin-token", "", "bearer `token` the admin API (/api/admin/) requires, and which opens the read API too; required when -listen is not a loopback address (prefer WEIR_ADMIN_TOKEN: a flag shows in ps)")
	readToken := fs.String("read-token", "", "bearer `token` that opens the read API (search, documents, status, /metrics) but not the admin API; without any token the read API answers only a loopback Host (prefer WEIR_READ_TOKEN)")
	return func(s streams, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if err := checkListen(*listen); err != nil {
			return err
		}
		if !ingest.Loopback(*listen) {
			if *adminToken == "" {
				return flagError("listen", "%s is not a loopback address, and the admin API would be open to the network: set -admin-token (or WEIR_ADMIN_TOKEN), or listen on 127.0.0.1 or localhost", *listen)
			}
			if err := ingest.CheckToken(*adminToken); err != nil {
				return usageError{fmt.Sprintf("-listen %s is not a loopback address: -admin-token (or WEIR_ADMIN_TOKEN) %v", *listen, err)}
			}
			if *readToken != "" {
				if err := ingest.CheckToken(*readToken); err != nil {
					return usageError{fmt.Sprintf("-listen %s is not a loopback address: -read-token (or WEIR_READ_TOKEN) %v", *listen, err)}
				}
			}
		}
		if *brokerSpec != "" {
			if err := checkBroker(*brokerSpec); err != nil {
				return err
			}
			if *topic == "" {
				return usageError{"-events-topic is empty: want the broker topic of the events"}
			}
		}
		if err := f.check(); err != nil {
			return err
		}
		if *otlp != "" && !ingest.HTTPURL(*otlp) {
			return flagError("otlp-endpoint", "%q: want an http:// or https:// URL with a host", redact.URL(*otlp))
		}
		ctx, stop := commandContext()
		defer stop()
		logger := newLogger(s.stderr, slog.LevelInfo)
		f.sweepEvery = pipeline.DefaultSweepEvery
		cfg := f.config(logger)
		cfg.Listen, cfg.AdminToken, cfg.ReadToken = *listen, *adminToken, *readToken
		cfg.TokenHint, cfg.OTLPEndpoint = "WEIR_READ_TOKEN or WEIR_ADMIN_TOKEN", *otlp
		if *brokerSpec != "" {
			b, err := openBroker(ctx, *brokerSpec, f.store.data, logger)
			if err != nil {
				return err
			}
			defer b.Close()
			cfg.Broker, cfg.Pipeline.EventsTopic = b, *topic
		}
		svc, err := f.open(ctx, openCreate, cfg)
		if err != nil {
			return err
		}
		defer svc.close()
		if err := svc.Start(ctx); err != nil {
			return err
		}
		fmt.Fprintf(s.stdout, "weir run: watching %s; API on http://%s (search: /api/search?q=…)\n",
			f.folder(0), svc.Addr())
		serveErr := svc.Wait(ctx)
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := svc.Stop(sctx); err != nil {
			return err
		}
		return serveErr
	}
}

// checkListen returns a usage error unless addr is host:port with a port
// from 0 to 65535 (the host may be empty: every interface).
func checkListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return flagError("listen", "%q is not host:port: want an address such as 127.0.0.1:8080, localhost:8080 or [::1]:8080", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return flagError("listen", "%q: the port %q is not a number from 0 to 65535", addr, port)
	}
	return nil
}

// checkBroker returns a usage error unless spec is a broker -broker
// takes: embedded, a nats:// URL, or an amqp:// or amqps:// URL with a
// host. It never repeats a password.
func checkBroker(spec string) error {
	if spec == "embedded" {
		return nil
	}
	u, err := url.Parse(spec)
	if err != nil || u.Host == "" || (u.Scheme != "nats" && u.Scheme != "amqp" && u.Scheme != "amqps") {
		return flagError("broker", "%q: want embedded, a nats:// URL or an amqp:// (amqps://) URL with a host", redact.URL(spec))
	}
	return nil
}

// setupIngest declares "weir ingest".
func setupIngest(fs *flag.FlagSet) runFunc {
	var f serviceFlags
	f.declare(fs)
	source := fs.String("source", "ingest", "the `source` folder under incoming/ the files are copied to")
	timeout := fs.Duration("timeout", 30*time.Minute, "how long to wait for the documents before giving up (they go on in weir run)")
	return func(s streams, args []string) error {
		if len(args) == 0 {
			return usageError{"want at least one file or folder to ingest"}
		}
		if *timeout <= 0 {
			return flagError("timeout", "%v: want a positive duration such as 30m", *timeout)
		}
		if *source == "" || strings.ContainsAny(*source, `/\`) || strings.HasPrefix(*source, ".") || strings.ContainsFunc(*source, unsafeRune) {
			return flagError("source", "%q: want a plain folder name under incoming/ (no / or \\, not starting with a dot)", *source)
		}
		ctx, stop := commandContext()
		defer stop()
		f.sweepEvery, f.reindexAt = 500*time.Millisecond, pipeline.NoSchedule
		svc, err := f.open(ctx, openCreate, f.config(newLogger(s.stderr, slog.LevelWarn+1)))
		if err != nil {
			return err
		}
		defer svc.close()
		pipe := svc.Pipeline()
		files, skipped, err := pipe.Ingest(ctx, *source, args)
		if err != nil {
			return err
		}
		for _, p := range skipped {
			fmt.Fprintf(s.stderr, "skipped %s: not a format weir reads (.txt, .md, .mbox)\n", printable(p))
		}
		ids := make([]string, len(files))
		for i, fl := range files {
			ids[i] = fl.ID
		}
		fmt.Fprintf(s.stdout, "copied %d files to %s and enqueued them\n", len(files), f.folder(0, *source))
		if err := svc.Start(ctx); err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = svc.Stop(sctx)
		}()
		bar := newProgressBar(s.stderr)
		deadline := time.Now().Add(*timeout)
		var (
			last     pipeline.Progress
			lastMove = time.Now()
			waiting  string // what the progress waits for, once it stops
			asked    time.Time
		)
		for {
			p, err := pipe.FileProgress(ctx, ids)
			if err != nil {
				return err
			}
			now := time.Now()
			if p != last {
				last, lastMove, waiting = p, now, ""
			} else if now.Sub(lastMove) >= time.Second && now.Sub(asked) >= time.Second {
				// The progress stopped: say whether other workers hold
				// the jobs (a process killed with them, whose lease has
				// to end first).
				asked = now
				if w, err := heldJobs(ctx, svc.DB().Store.Executor(), pipe.Client().ID(), now); err == nil {
					waiting = w
				}
			}
			what := fmt.Sprintf("files; %d documents saved, %d indexed, %d failed", p.Saved, p.Indexed, p.Failed)
			if waiting != "" {
				what += "; " + waiting
			}
			bar.show(p.FilesDone+p.FilesFailed, p.Files, what)
			if p.Done() {
				bar.done()
				fmt.Fprintf(s.stdout, "%d files processed, %d failed; %d documents saved, %d failed\n", p.FilesDone, p.FilesFailed, p.Saved, p.Failed)
				if p.Failed+p.FilesFailed > 0 {
					fmt.Fprintf(s.stdout, "failures are in %s (each with error.json); weir dlq list shows them\n", f.folder(2))
				}
				return nil
			}
			if time.Now().After(deadline) {
				bar.done()
				return fmt.Errorf("%d of %d files not done after %v; weir run goes on with them", p.Files-p.FilesDone-p.FilesFailed, p.Files, *timeout)
			}
			select {
			case <-ctx.Done():
				bar.done()
				return fmt.Errorf("interrupted; weir run goes on with the files enqueued")
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// setupSearch declares "weir search".
func setupSearch(fs *flag.FlagSet) runFunc {
	var f serviceFlags
	f.declare(fs)
	limit := fs.Int("limit", 10, "most hits to show")
	asJSON := fs.Bool("json", false, "print the hits as JSON")
	return func(s streams, args []string) error {
		if len(args) == 0 {
			return usageError{"want the words to search for"}
		}
		if *limit < 1 || *limit > api.MaxSearchLimit {
			return flagError("limit", "%d: want 1 to %d", *limit, api.MaxSearchLimit)
		}
		ctx := context.Background()
		svc, err := f.open(ctx, openReadOnly, f.config(newLogger(s.stderr, slog.LevelError)))
		if err != nil {
			return err
		}
		defer svc.close()
		q := strings.Join(args, " ")
		hits, err := svc.Pipeline().Search(ctx, q, *limit)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeIndented(s.stdout, hits)
		}
		if len(hits) == 0 {
			_, err := fmt.Fprintf(s.stdout, "no documents match %q\n", q)
			return err
		}
		var b strings.Builder
		for i, h := range hits {
			fmt.Fprintf(&b, "%d. %s\n   %s\n   %s\n   id %s\n", i+1, printable(h.Title), printable(h.Source), printable(h.Snippet), printable(h.ID))
		}
		_, err = io.WriteString(s.stdout, b.String())
		return err
	}
}

// setupStatus declares "weir status".
func setupStatus(fs *flag.FlagSet) runFunc {
	var f serviceFlags
	f.declare(fs)
	asJSON := fs.Bool("json", false, "print the status as JSON")
	stuck := fs.Duration("stuck-after", 10*time.Minute, "how long a job may go before it counts as stuck")
	return func(s streams, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if *stuck <= 0 {
			return flagError("stuck-after", "%v: want a positive duration such as 10m", *stuck)
		}
		ctx := context.Background()
		svc, err := f.open(ctx, openReadOnly, f.config(newLogger(s.stderr, slog.LevelError)))
		if err != nil {
			return err
		}
		defer svc.close()
		st, err := svc.Pipeline().Status(ctx, *stuck)
		if err != nil {
			return err
		}
		ex := svc.DB().Store.Executor()
		now := time.Now()
		pauses, err := ex.ListPauses(ctx, now)
		if err != nil {
			return err
		}
		limits, err := ex.ListLimits(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeIndented(s.stdout, statusRecordOf(st, pauses, limits))
		}
		_, err = io.WriteString(s.stdout, formatStatus(st)+formatPauses(pauses)+formatLimits(limits, now))
		return err
	}
}

// formatStatus is the text of "weir status".
func formatStatus(st pipeline.Status) string {
	var b strings.Builder
	counts := func(m map[string]int) string {
		var parts []string
		for _, k := range []string{"parsed", "saved", "processed", "failed"} {
			if n, ok := m[k]; ok {
				parts = append(parts, fmt.Sprintf("%s %d", k, n))
			}
		}
		if len(parts) == 0 {
			return "none"
		}
		return strings.Join(parts, ", ")
	}
	fmt.Fprintf(&b, "files:        %s\n", counts(st.Files))
	fmt.Fprintf(&b, "documents:    %s\n", counts(st.Documents))
	if st.IndexDown != "" {
		fmt.Fprintf(&b, "index:        not answering (%s), %d documents waiting for reconciliation\n", printable(st.IndexDown), st.IndexErrors)
	} else {
		fmt.Fprintf(&b, "index:        %d entries, %d documents waiting for reconciliation\n", st.Indexed, st.IndexErrors)
	}
	fmt.Fprintf(&b, "jobs:\n")
	for _, kind := range []string{pipeline.KindParse, pipeline.KindExtract, pipeline.KindSave, pipeline.KindIndex, pipeline.KindReindex} {
		m := st.Jobs[kind]
		if len(m) == 0 {
			continue
		}
		var parts []string
		for state, n := range m {
			parts = append(parts, fmt.Sprintf("%s %d", state, n))
		}
		slices.Sort(parts)
		fmt.Fprintf(&b, "  %-18s %s\n", kind, printable(strings.Join(parts, ", ")))
	}
	fmt.Fprintf(&b, "stuck:        %d\n", st.Stuck)
	fmt.Fprintf(&b, "dead letters: %d (weir dlq list)\n", st.DeadLetters)
	for name, state := range st.Breakers {
		fmt.Fprintf(&b, "breaker:      %s %s\n", printable(name), printable(state))
	}
	if r := st.LastReindex; r != nil {
		fmt.Fprintf(&b, "last reindex: #%d %s (%s), checked %d/%d, repaired %d\n", r.ID, printable(r.Status), printable(r.Trigger), r.Checked, r.Total, r.Repaired)
	}
	return b.String()
}

// setupReindex declares "weir reindex".
func setupReindex(fs *flag.FlagSet) runFunc {
	var f serviceFlags
	f.declare(fs)
	return func(s streams, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		ctx, stop := commandContext()
		defer stop()
		svc, err := f.open(ctx, openExisting, f.config(newLogger(s.stderr, slog.LevelError)))
		if err != nil {
			return err
		}
		defer svc.close()
		bar := newProgressBar(s.stderr)
		run, err := svc.Pipeline().Reindex(ctx, pipeline.TriggerCLI, func(r pipeline.ReindexRun) {
			bar.show(r.Checked, r.Total, fmt.Sprintf("documents checked; %d missing, %d stale, %d repaired", r.Missing, r.Stale, r.Repaired))
		})
		bar.done()
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(s.stdout, "reindex run %d: checked %d documents; %d missing, %d stale, %d in the index only (removed); %d repaired\n",
			run.ID, run.Checked, run.Missing, run.Stale, run.Extra, run.Repaired)
		return err
	}
}
