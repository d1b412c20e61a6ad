// Package cli is the weir command line. [Main] takes the arguments after
// the program name and the two output streams, and returns the exit code,
// so cmd/weir stays a few lines and every path is tested in-process.
//
// Exit codes: 0 on success (help included), 1 when a command fails, 2 for a
// usage error such as an unknown command or flag, a value out of range, or
// a WEIR_ variable whose value a flag refuses; its message names the flag
// or the variable and the form wanted. Usage text goes to the output
// stream when it was asked for (weir help, -h) and to the error stream
// when it follows a usage error.
//
// Flags may come anywhere among a command's arguments ("weir search bees
// -limit 3"); "--" ends them. A group (dlq, jobs) takes its own flags
// before the subcommand's name.
//
// The commands that only read (status, search, dlq list, show and export,
// jobs list and show) make nothing: no data directory, no PostgreSQL
// schema, no table, no index file; a store that is not there is an error
// that says to run weir migrate.
//
// Every human-readable output escapes control characters (printable): a
// file name or a title cannot drive the terminal or split a line. JSON
// output stays JSON.
//
// Each command is one entry in the table returned by commands: a name, a
// one-line summary, a usage line, a function that declares its flags on a
// [flag.FlagSet], and a function that runs it. Adding a command (run,
// ingest, status, dlq, …) means adding one entry.
//
// # Version
//
// weir version prints [Version]. Release builds set it at link time:
//
//	go build -ldflags "-X github.com/weirhq/weir/internal/cli.Version=v0.1.0" ./cmd/weir
//
// When it is left at "dev" and the binary was installed as a module at a
// tagged version (go install …/cmd/weir@v0.1.0), that module version is
// printed instead. The Go version is always printed, and the VCS revision
// when the build recorded one (see [runtime/debug.ReadBuildInfo]; go build
// records it when run inside a Git work tree, unless -buildvcs=false).
package cli
