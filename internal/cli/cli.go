package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/weirhq/weir/internal/crashpoint"
	"github.com/weirhq/weir/internal/envconfig"
	"github.com/weirhq/weir/internal/syncio"
)

// Version is the version "weir version" prints. It is "dev" unless set at
// link time:
//
//	go build -ldflags "-X github.com/weirhq/weir/internal/cli.Version=v0.1.0" ./cmd/weir
//
// It is the only variable of the package, and nothing assigns it at run time.
var Version = "dev"

// Exit codes returned by [Main].
const (
	exitOK    = 0 // success, help included
	exitFail  = 1 // the command ran and failed
	exitUsage = 2 // bad command line: unknown command, flag or argument
)

const tagline = "weir is a durable pipeline engine for Go and a resilient document-ingestion service."

// streams are where a command writes. Output that answers the command
// (help, the version, a listing) goes to stdout; diagnostics go to stderr.
type streams struct {
	stdout, stderr io.Writer
}

// runFunc runs a command with its positional arguments, those left after
// its flags were parsed.
type runFunc func(s streams, args []string) error

// command is one entry of the command table.
type command struct {
	name    string
	summary string // one line, shown in the command list
	usage   string // the synopsis, e.g. "weir version"
	help    string // paragraphs shown by "weir help <name>"; may be empty

	// setup declares the command's flags on fs and returns the function
	// that runs it, which reads the parsed flags through the variables
	// setup bound them to.
	setup func(fs *flag.FlagSet) runFunc

	// env: each flag not given on the command line takes its value from
	// the variable WEIR_<FLAG> (upper case, "-" as "_"), if set: -store
	// from WEIR_STORE, -llm-url from WEIR_LLM_URL.
	env bool

	// group: the command is made of subcommands (dlq, jobs). Its own flags
	// come before the subcommand's name, which ends them; the subcommand
	// parses the rest.
	group bool
}

// withoutFlags is the setup of a command that declares no flags and runs
// run.
func withoutFlags(run runFunc) func(*flag.FlagSet) runFunc {
	return func(*flag.FlagSet) runFunc { return run }
}

// commands is the command table, in the order "weir help" lists it. It is
// a function rather than a package variable so the help command can refer
// to the table it belongs to and so the package holds no state.
func commands() []command {
	return []command{
		{
			name:    "help",
			summary: "show this help, or the help of one command",
			usage:   "weir help [command]",
			setup:   withoutFlags(runHelp),
		},
		{
			name:    "config",
			summary: "print the configuration read from WEIR_* variables, refusing bad values",
			usage:   "weir config",
			help: "Each setting is printed with the variable it comes from. A variable with a\n" +
				"value weir cannot use is reported with its name and value, and the command\n" +
				"exits 2, as every command does for a bad WEIR_ variable. The README's\n" +
				"configuration table lists every variable.",
			setup: withoutFlags(runConfig),
		},
		{
			name:    "run",
			summary: "run the ingestion service: watch incoming/, process, index, serve the API",
			usage:   "weir run [-store URL] [-data DIR] [-listen ADDR] [-llm-url URL] [-broker URL] [flags]",
			help: "Watches <data>/incoming/ for plain text, Markdown and mbox files and takes\n" +
				"each through parse, extract, save (SQL) and index, each stage a job with its\n" +
				"attempts and backoff. A processed file moves to <data>/processed/; a document\n" +
				"that fails its last attempt goes to <data>/failed/{source}/{file}/ with\n" +
				"error.json and metadata.json. Serves GET /api/search?q=, GET\n" +
				"/api/documents/{id}, /api/status, /metrics, the admin API under /api/admin/,\n" +
				"the console under /ui/, and /healthz and /readyz (which fails while writes\n" +
				"fail). Without -admin-token and -read-token every endpoint but /healthz and\n" +
				"/readyz answers only a loopback Host; with one, the read API takes either\n" +
				"token, and the admin API the admin token.\n" +
				"Reconciliation runs daily at 02:00 (-reindex-schedule). Stops on SIGINT or\n" +
				"SIGTERM, finishing what runs. Several processes on one -store share the work.",
			setup: setupRun,
			env:   true,
		},
		{
			name:    "ingest",
			summary: "copy files or folders into incoming/ and process them, with a progress bar",
			usage:   "weir ingest [-data DIR] [-source NAME] PATH...",
			help: "Copies each file (folders are walked) into <data>/incoming/<source>/, enqueues\n" +
				"it, and processes the documents in this process, beside any weir run, until\n" +
				"every file is processed or failed. A file ingested again changes nothing.",
			setup: setupIngest,
			env:   true,
		},
		{
			name:    "search",
			summary: "search the ingested documents",
			usage:   "weir search [-data DIR] [-limit N] [-json] WORDS...",
			help: "Words must all match; \"a phrase\" in quotes matches as a phrase, and word*\n" +
				"matches a prefix.",
			setup: setupSearch,
			env:   true,
		},
		{
			name:    "status",
			summary: "show files and documents by state, jobs, stuck work, dead letters and breakers",
			usage:   "weir status [-data DIR] [-json]",
			setup:   setupStatus,
			env:     true,
		},
		{
			name:    "reindex",
			summary: "repair the search index from SQL, with a progress bar",
			usage:   "weir reindex [-data DIR]",
			help: "Compares every saved document (id, updated at) with the index, in batches of\n" +
				"100, and writes what is missing or stale there; removes what SQL does not\n" +
				"have. Progress is kept in the table of reindex runs; a run cut short is taken\n" +
				"up where it stopped.",
			setup: setupReindex,
			env:   true,
		},
		{
			name:    "migrate",
			summary: "bring the store's schema up to date, making the data directory if needed",
			usage:   "weir migrate [-store URL] [-schema S] [-data DIR]",
			help: "Applies the migrations the store lacks, each in its own transaction, and\n" +
				"prints which it applied. Without -store the store is the SQLite file\n" +
				"<data>/weir.db, made with its directory when missing; with a postgres:// URL\n" +
				"it is that database's -schema. Running it again changes nothing. A store\n" +
				"migrated by a newer weir is refused, unchanged.",
			setup: setupMigrate,
			env:   true,
		},
		dlqGroup().command("list, show, export, requeue and purge dead letters"),
		jobsGroup().command("list, show, retry and cancel jobs"),
		{
			name:    "chaos",
			summary: "kill a weir worker again and again mid-work, then check nothing was lost or done twice",
			usage: "weir chaos [-docs N] [-pages N] [-poison-every N] [-kills K] [-seed S] [-dir DIR] [-finish D]\n" +
				"       [-postgres URL [-schema S] [-cuts N] [-restarts N -restart-command CMD]]\n" +
				"       [-broker harness|worker|nats://URL] [-points P,...] [-ack-before-commit]",
			help: "Runs \"weir chaos-worker\" on a workload of documents (pages written as blob\n" +
				"files and an index entry, through a workflow, the effect ledger, the outbox\n" +
				"and a NATS broker outside the killed worker) and kills it with SIGKILL K\n" +
				"times, at seeded random moments and at named crash points, restarting it\n" +
				"each time; then lets it finish and checks every document. It prints the\n" +
				"seed first and last a line \"kills=K lost=0 duplicated=0 orphaned=0\", and\n" +
				"exits 1 if any is not 0.\n" +
				"WEIR_CHAOS_KILLS sets the default of -kills.",
			setup: setupChaos,
		},
		{
			name:    "chaos-worker",
			summary: "run the chaos workload in DIR until stopped (weir chaos runs it)",
			usage:   "weir chaos-worker DIR",
			setup:   setupChaosWorker,
		},
		{
			name:    "version",
			summary: "print the weir version, the Go version and the VCS revision",
			usage:   "weir version",
			help: "The first line is \"weir <version>\"; the next give the Go version and,\n" +
				"when the build recorded one, the VCS revision with its commit time.",
			setup: withoutFlags(runVersion),
		},
	}
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// usageError is a bad command line, or a bad WEIR_ variable. It makes the
// command exit with exitUsage after its usage line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// flagError is the usage error of a value of flag name that is out of
// range or of the wrong form: "-name value: want …".
func flagError(name string, format string, args ...any) usageError {
	return usageError{"-" + name + " " + fmt.Sprintf(format, args...)}
}

// fromEnv adds, to a usage error about a flag (a message that begins with
// "-name", or a subcommand's "sub: -name"), the variable the flag's value
// came from, when it came from one.
func (e usageError) fromEnv(env map[string]bool) usageError {
	msg := e.msg
	if _, rest, ok := strings.Cut(msg, ": "); ok && !strings.HasPrefix(msg, "-") {
		msg = rest // "list: -store: …"
	}
	for name := range env {
		if rest, ok := strings.CutPrefix(msg, "-"+name); ok && (rest == "" || rest[0] == ' ' || rest[0] == ':') {
			e.msg += fmt.Sprintf(" (the value of %s)", envName(name))
			break
		}
	}
	return e
}

// Main runs the weir command line. args are the arguments after the
// program name; the result is the process exit code: 0 on success, 1 when
// a command failed, 2 for a usage error.
func Main(args []string, stdout, stderr io.Writer) int {
	// Commands write from several goroutines (the logs of a running
	// service beside a progress bar): one write at a time.
	stdout, stderr = syncio.NewWriter(stdout), syncio.NewWriter(stderr)
	s := streams{stdout: stdout, stderr: stderr}

	// The top level has no flags yet but -h and --help; parsing with a
	// FlagSet keeps room for global flags and gives the usual errors.
	fs := flag.NewFlagSet("weir", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return writeOrFail(s, writeUsage(stdout))
		}
		fmt.Fprintf(stderr, "weir: %v\n", err)
		writeHint(stderr, "weir help")
		return exitUsage
	}
	args = fs.Args()
	if len(args) == 0 {
		return writeOrFail(s, writeUsage(stdout))
	}
	c, ok := lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "weir: unknown command %q\n", args[0])
		writeHint(stderr, "weir help")
		return exitUsage
	}
	// The crash harness (weir chaos, and the end-to-end tests) names a
	// crash point in the environment of the process it will kill; the
	// library packages read no environment, so the command arms it.
	if err := crashpoint.Arm(os.Getenv(crashpoint.Env)); err != nil {
		fmt.Fprintf(stderr, "weir: %s\n", errorText(err))
		return exitUsage
	}
	return c.exec(s, args[1:])
}

// exec parses the command's flags and runs it.
func (c command) exec(s streams, args []string) int {
	fs := flag.NewFlagSet("weir "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	run := c.setup(fs)
	var err error
	if c.group {
		// The subcommand's name ends the group's flags.
		err = withForms(fs, func() error { return fs.Parse(args) })
		args = fs.Args()
	} else {
		args, err = parseFlags(fs, args)
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return writeOrFail(s, c.writeHelp(s.stdout, fs))
		}
		return c.usageFailure(s, err)
	}
	var env map[string]bool
	if c.env {
		if env, err = flagsFromEnv(fs, os.LookupEnv); err != nil {
			return c.usageFailure(s, err)
		}
	}
	err = run(s, args)
	if ue := (usageError{}); errors.As(err, &ue) {
		return c.usageFailure(s, ue.fromEnv(env))
	}
	if err != nil {
		fmt.Fprintf(s.stderr, "weir %s: %s\n", c.name, errorText(err))
		return exitFail
	}
	return exitOK
}

func (c command) usageFailure(s streams, err error) int {
	fmt.Fprintf(s.stderr, "weir %s: %s\nusage: %s\n", c.name, errorText(err), c.usage)
	writeHint(s.stderr, "weir help "+c.name)
	return exitUsage
}

// parseFlags parses the flags of fs found anywhere among args, and
// returns the other arguments, in their order: "weir search bees -limit 3"
// is "weir search -limit 3 bees". An argument "--" ends the flags: every
// argument after it is positional ("weir search -- -limit"). A flag that
// takes a value takes the next argument, whatever it is, unless it is
// written -flag=value; a lone "-" is positional.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var flags, positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			positional = append(positional, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil && !isBoolFlag(f.Value) && i+1 < len(args) {
			flags = append(flags, args[i+1])
			i++
		}
	}
	if err := withForms(fs, func() error { return fs.Parse(flags) }); err != nil {
		return nil, err
	}
	return positional, nil
}

func isBoolFlag(v flag.Value) bool {
	b, ok := v.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// formValue is a flag's Value whose errors say what form the flag wants:
// "want a whole number" rather than the flag package's "parse error".
type formValue struct {
	flag.Value
	form string
}

func (v formValue) Set(s string) error {
	if err := v.Value.Set(s); err != nil {
		return errors.New(v.form)
	}
	return nil
}

func (v formValue) IsBoolFlag() bool { return isBoolFlag(v.Value) }

// valueForm is what a flag of the kind of v wants, or "" for a kind whose
// Set makes errors of its own (strings, the package's own flag types).
func valueForm(v flag.Value) string {
	g, ok := v.(flag.Getter)
	if !ok {
		return ""
	}
	switch g.Get().(type) {
	case bool:
		return "want true or false"
	case int, int64:
		return "want a whole number"
	case uint, uint64:
		return "want a whole number, 0 or more"
	case float64:
		return "want a number"
	case time.Duration:
		return "want a duration such as 500ms, 30s, 5m or 1h"
	}
	return ""
}

// withForms runs fn (a parse, or settings from the environment) with the
// Values of fs wrapped in formValue, and puts them back after: the help
// text reads the Values' own types.
func withForms(fs *flag.FlagSet, fn func() error) error {
	orig := map[*flag.Flag]flag.Value{}
	fs.VisitAll(func(f *flag.Flag) {
		if form := valueForm(f.Value); form != "" {
			orig[f] = f.Value
			f.Value = formValue{Value: f.Value, form: form}
		}
	})
	defer func() {
		for f, v := range orig {
			f.Value = v
		}
	}()
	return fn()
}

// writeOrFail turns an error writing the answer (a closed pipe, say) into
// exit code 1.
func writeOrFail(s streams, err error) int {
	if err != nil {
		fmt.Fprintf(s.stderr, "weir: %v\n", err)
		return exitFail
	}
	return exitOK
}

func writeHint(w io.Writer, helpCmd string) {
	fmt.Fprintf(w, "Run '%s' for usage.\n", helpCmd)
}

// writeUsage writes the top-level usage: what weir is and its commands.
func writeUsage(w io.Writer) error {
	cmds := commands()
	width := 0
	for _, c := range cmds {
		width = max(width, len(c.name))
	}
	var b strings.Builder
	b.WriteString(tagline + "\n\n")
	b.WriteString("Usage:\n\n\tweir <command> [arguments]\n\nCommands:\n\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "\t%-*s  %s\n", width, c.name, c.summary)
	}
	b.WriteString("\nRun 'weir help <command>' for more about a command.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeHelp writes one command's help: synopsis, text and flags.
func (c command) writeHelp(w io.Writer, fs *flag.FlagSet) error {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s\n\n%s.\n", c.usage, capitalize(c.summary))
	if c.help != "" {
		fmt.Fprintf(&b, "\n%s\n", c.help)
	}
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		if c.env {
			b.WriteString("\nEach flag can also be set by its WEIR_ variable: -store by WEIR_STORE,\n-llm-url by WEIR_LLM_URL; a flag on the command line wins.\n")
		}
		b.WriteString("\nFlags may come before or after the arguments; -- ends them.\n\nFlags:\n")
		fs.SetOutput(&b)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// envName is the variable that sets flag name: WEIR_ and the name in
// upper case, with "_" for "-".
func envName(flag string) string {
	return "WEIR_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// flagsFromEnv sets each flag of fs not given on the command line from
// its variable (envName), when lookup finds it, and returns the names of
// the flags it set. A value the flag refuses is a usage error that names
// the variable, its flag and the form wanted.
func flagsFromEnv(fs *flag.FlagSet, lookup func(string) (string, bool)) (map[string]bool, error) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	set := map[string]bool{}
	var msgs []string
	err := withForms(fs, func() error {
		fs.VisitAll(func(f *flag.Flag) {
			if given[f.Name] {
				return
			}
			if v, ok := lookup(envName(f.Name)); ok {
				if err := fs.Set(f.Name, v); err != nil {
					msgs = append(msgs, fmt.Sprintf("%s=%q (-%s): %v", envName(f.Name), v, f.Name, err))
					return
				}
				set[f.Name] = true
			}
		})
		return nil
	})
	if err == nil && len(msgs) > 0 {
		err = usageError{msg: strings.Join(msgs, "; ")}
	}
	return set, err
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// runHelp is "weir help [command]".
func runHelp(s streams, args []string) error {
	switch len(args) {
	case 0:
		return writeUsage(s.stdout)
	case 1:
		c, ok := lookup(args[0])
		if !ok {
			return usageError{fmt.Sprintf("unknown command %q", args[0])}
		}
		fs := flag.NewFlagSet("weir "+c.name, flag.ContinueOnError)
		c.setup(fs)
		return c.writeHelp(s.stdout, fs)
	default:
		return usageError{fmt.Sprintf("too many arguments: %q", args[1:])}
	}
}

// runConfig is "weir config".
func runConfig(s streams, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	cfg, err := envconfig.EventRetry(envconfig.OS)
	if ee := (*envconfig.Error)(nil); errors.As(err, &ee) {
		return usageError{err.Error()} // a bad value of a variable
	}
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("event retry:\n")
	row := func(name, value string) { fmt.Fprintf(&b, "  %-30s %s\n", name, value) }
	row(envconfig.RetryMaxAttempts, strconv.Itoa(cfg.MaxAttempts))
	row(envconfig.RetryBaseDelayMS, cfg.Backoff.Base.String())
	row(envconfig.RetryBackoffFactor, strconv.FormatFloat(cfg.Backoff.Factor, 'g', -1, 64))
	row(envconfig.RetryMaxDelaySeconds, cfg.Backoff.Cap.String())
	row(envconfig.RetryTTLMinutes, cfg.TTL.String())
	row("jitter", cfg.Backoff.Jitter.String())
	_, err = io.WriteString(s.stdout, b.String())
	return err
}

// runVersion is "weir version".
func runVersion(s streams, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	bi, _ := debug.ReadBuildInfo()
	_, err := io.WriteString(s.stdout, versionText(Version, bi))
	return err
}

// versionText formats what "weir version" prints. bi may be nil, when the
// binary carries no build information.
func versionText(version string, bi *debug.BuildInfo) string {
	// A binary installed with "go install …@v0.1.0" knows its module
	// version even when -ldflags did not set Version.
	if version == "dev" && bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		version = bi.Main.Version
	}
	var b strings.Builder
	fmt.Fprintf(&b, "weir %s\n", version)
	fmt.Fprintf(&b, "go: %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if bi == nil {
		return b.String()
	}
	var revision, when string
	modified := false
	for _, st := range bi.Settings {
		switch st.Key {
		case "vcs.revision":
			revision = st.Value
		case "vcs.time":
			when = st.Value
		case "vcs.modified":
			modified = st.Value == "true"
		}
	}
	if revision != "" {
		fmt.Fprintf(&b, "revision: %s", revision)
		if when != "" {
			fmt.Fprintf(&b, " %s", when)
		}
		if modified {
			b.WriteString(" (modified)")
		}
		b.WriteString("\n")
	}
	return b.String()
}
