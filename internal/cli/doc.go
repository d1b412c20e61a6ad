// Package cli is the weir command line. [Main] takes the arguments after
// the program name and the two output streams, and returns the exit code,
// so cmd/weir stays a few lines and every path is tested in-process.
//
// Exit codes: 0 on success (help included), 1 when a command fails, 2 for a
// usage error such as an unknown command or flag. Usage text goes to the
// output stream when it was asked for (weir help, -h) and to the error
// stream when it follows a usage error.
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
