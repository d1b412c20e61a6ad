// Command relaybench compares weir's outbox relay with publishing the same
// messages straight through the broker's own client, with confirms, in one
// run.
//
//	cd bench && go run ./cmd/relaybench -broker rabbitmq -n 50000
//	cd bench && go run ./cmd/relaybench -broker nats -n 50000
//
// The relay side makes a fresh SQLite store in a temporary directory,
// commits n messages to its outbox (-insert-batch per transaction, not
// timed), declares a fresh topic through weir's broker driver, then starts
// an outbox.Relay and times it from its start until its marks have
// recorded all n messages published (each MarkPublished returns once its
// transaction has committed); the store's count is checked afterwards.
//
// The raw side declares a queue (RabbitMQ: a durable quorum queue) or a
// stream (NATS: file storage, a duplicate window) of its own and publishes
// the same n messages with the client library alone, as a careful user
// would: -batch at a time, each persistent with its message id, all of a
// batch sent before waiting for the batch's confirms (amqp091-go deferred
// confirmations; jetstream PublishMsgAsync and its PubAcks). It is timed
// from the first publish to the last confirm.
//
// Both sides hold the run's n messages in memory, so that their timed
// phases run on one heap, and each starts after a collection that returns
// the memory of what ran before it to the operating system.
//
// Every queue and stream the run made is deleted at the end. It prints the
// settings, a table (with each side's CPU time and heap allocations in
// this process per message: the broker's own are not counted), and last a
// line
// "ratio relay/raw: X.XX" (messages per second of the relay over the raw
// publisher's).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/weirhq/weir/bench/internal/program"
)

// settings are the flags, shared by both sides.
type settings struct {
	broker      string
	n           int
	batch       int
	insertBatch int
	keys        int
	size        int
	poll        time.Duration
	url         string
	program.Flags
}

func main() {
	var s settings
	flag.StringVar(&s.broker, "broker", "", "broker: rabbitmq or nats (required)")
	flag.IntVar(&s.n, "n", 50000, "messages to publish, on each side")
	flag.IntVar(&s.batch, "batch", 500, "the relay's Batch, and the raw side's messages per wait for confirms")
	flag.IntVar(&s.insertBatch, "insert-batch", 1000, "messages per outbox transaction (not timed)")
	flag.IntVar(&s.keys, "keys", 0, "spread the messages over this many keys (0: no key)")
	flag.IntVar(&s.size, "size", 200, "body size in bytes (a JSON object)")
	flag.DurationVar(&s.poll, "poll", 10*time.Millisecond, "the relay's PollEvery (it waits only when the outbox is empty)")
	flag.StringVar(&s.url, "url", "", "broker URL (default: the driver's, amqp://guest:guest@127.0.0.1:5672/ or nats://127.0.0.1:4222)")
	s.Register(10*time.Minute, "a side", "the relay's timed phase", "relay's and driver's")
	flag.Parse()
	program.Main("relaybench", func(ctx context.Context, out io.Writer) error { return run(ctx, out, s) })
}

func run(ctx context.Context, out io.Writer, s settings) error {
	switch {
	case s.broker != "rabbitmq" && s.broker != "nats":
		return fmt.Errorf("-broker %q: want rabbitmq or nats", s.broker)
	case s.n <= 0 || s.batch <= 0 || s.insertBatch <= 0 || s.poll <= 0 || s.Timeout <= 0:
		return errors.New("-n, -batch, -insert-batch, -poll and -timeout must be positive")
	case s.keys < 0:
		return errors.New("-keys must not be negative")
	case s.size < minBodySize:
		return fmt.Errorf("-size must be at least %d", minBodySize)
	}
	logger := program.Logger(s.Verbose)
	var sides sides
	switch s.broker {
	case "rabbitmq":
		sides = rabbitSides()
	case "nats":
		sides = natsSides()
	}

	printSettings(out, s, sides)
	// Both sides run with the run's messages in memory: the raw side
	// publishes from them and the relay side filled its outbox from them.
	// Kept to the end, they give the two timed phases one heap, and so
	// the same pace of garbage collection; the relay's phase would
	// otherwise run on a heap of a few MB, collected many times as often
	// as the raw side's, which holds them as its input.
	msgs := messages(s)
	defer runtime.KeepAlive(msgs)
	var results []result
	relay := func(ctx context.Context, s settings, msgs []message, logger *slog.Logger) (result, error) {
		return runRelay(ctx, s, msgs, logger, sides.open)
	}
	for _, side := range []side{relay, sides.raw} {
		rctx, cancel := context.WithTimeout(ctx, s.Timeout)
		r, err := side(rctx, s, msgs, logger)
		cancel()
		if err != nil {
			return err
		}
		results = append(results, r)
		fmt.Fprintf(out, "# %s: %s\n", r.system, r.note)
	}
	fmt.Fprintln(out)
	printTable(out, s, results)
	fmt.Fprintf(out, "ratio relay/raw: %.2f\n", results[0].rate()/results[1].rate())
	return nil
}

// side publishes msgs one way and measures it.
type side func(ctx context.Context, s settings, msgs []message, logger *slog.Logger) (result, error)

// sides are one broker's two ways of publishing, and what to say about
// them in the header: the relay publishes through the topic open
// declares, raw with the broker's own client.
type sides struct {
	open      func(context.Context, settings, *slog.Logger) (*weirTopic, error)
	raw       side
	relayDesc string
	rawDesc   string
}

// urlOr returns -url, or def when it is not set.
func (s settings) urlOr(def string) string {
	if s.url != "" {
		return s.url
	}
	return def
}

// result is one side's measurement.
type result struct {
	system   string
	messages int
	elapsed  time.Duration
	cpu      time.Duration // this process's CPU time (user and system) over elapsed
	allocs   uint64        // heap allocations of this process over elapsed
	note     string        // a line for the header: the phases' times
}

func (r result) rate() float64 { return float64(r.messages) / r.elapsed.Seconds() }

func printSettings(out io.Writer, s settings, sd sides) {
	keys := "none"
	if s.keys > 0 {
		keys = fmt.Sprint(s.keys)
	}
	fmt.Fprintf(out, "# relaybench: broker=%s messages=%d batch=%d (both) body=%dB keys=%s GOMAXPROCS=%d %s\n",
		s.broker, s.n, s.batch, s.size, keys, runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Fprintf(out, "# relay: %s\n", sd.relayDesc)
	fmt.Fprintf(out, "# raw: %s\n", sd.rawDesc)
}

func printTable(out io.Writer, s settings, rs []result) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tbroker\tmessages\tseconds\tmsgs/s\tCPU µs/msg\tallocs/msg\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.3f\t%.0f\t%.1f\t%.1f\t\n", r.system, s.broker, r.messages, r.elapsed.Seconds(), r.rate(),
			float64(r.cpu.Microseconds())/float64(r.messages), float64(r.allocs)/float64(r.messages))
	}
	_ = tw.Flush()
}

// cpuTime returns the CPU time, user and system, that this process has
// used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// settle collects the garbage of what ran before a side's timed phase
// (filling the outbox, building the messages, the other side) and returns
// the freed memory to the operating system, so that neither side's timed
// phase pays for it: its GC cycles and the runtime's scavenger.
func settle() { debug.FreeOSMemory() }

// publishRaw times the raw side's publishing of msgs, a batch of -batch
// at a time, and records the time, CPU and allocations in r: send
// publishes message i and returns its pending confirm, and wait waits for
// it, after the whole batch has been sent.
func publishRaw[C any](s settings, msgs []message, r *result, send func(i int, m message) (C, error), wait func(i int, c C) error) error {
	pending := make([]C, 0, s.batch)
	settle()
	cpu0, allocs0 := cpuTime(), mallocs()
	t0 := time.Now()
	for i := 0; i < len(msgs); i += s.batch {
		pending = pending[:0]
		for j, m := range msgs[i:min(i+s.batch, len(msgs))] {
			c, err := send(i+j, m)
			if err != nil {
				return fmt.Errorf("raw: publish %d: %w", i+j, err)
			}
			pending = append(pending, c)
		}
		for j, c := range pending {
			if err := wait(i+j, c); err != nil {
				return err
			}
		}
	}
	r.elapsed = time.Since(t0)
	r.cpu, r.allocs = cpuTime()-cpu0, mallocs()-allocs0
	return nil
}

// checkRaw checks that the raw side's queue or stream holds the run's
// messages, counted as held (or failing with err).
func checkRaw(s settings, where string, held int, err error) error {
	if err != nil {
		return fmt.Errorf("raw: count the messages on %s: %w", where, err)
	}
	if held != s.n {
		return fmt.Errorf("raw: %s holds %d messages, want %d", where, held, s.n)
	}
	return nil
}

// mallocs returns how many heap objects this process has allocated so far.
func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}
