package cli_test

import (
	"fmt"
	"os"

	"github.com/weirhq/weir/internal/cli"
)

// Main is what cmd/weir calls; it returns the exit code instead of
// exiting.
func ExampleMain() {
	code := cli.Main([]string{"help"}, os.Stdout, os.Stdout)
	fmt.Println("exit code:", code)
	// Output:
	// weir is a durable pipeline engine for Go and a resilient document-ingestion service.
	//
	// Usage:
	//
	// 	weir <command> [arguments]
	//
	// Commands:
	//
	// 	help          show this help, or the help of one command
	// 	config        print the configuration read from WEIR_* variables, refusing bad values
	// 	run           run the ingestion service: watch incoming/, process, index, serve the API
	// 	ingest        copy files or folders into incoming/ and process them, with a progress bar
	// 	search        search the ingested documents
	// 	status        show files and documents by state, jobs, stuck work, dead letters and breakers
	// 	reindex       repair the search index from SQL, with a progress bar
	// 	migrate       bring the store's schema up to date, making the data directory if needed
	// 	dlq           list, show, export, requeue and purge dead letters
	// 	jobs          list, show, retry and cancel jobs
	// 	chaos         kill a weir worker again and again mid-work, then check nothing was lost or done twice
	// 	chaos-worker  run the chaos workload in DIR until stopped (weir chaos runs it)
	// 	version       print the weir version, the Go version and the VCS revision
	//
	// Run 'weir help <command>' for more about a command.
	// exit code: 0
}

// An unknown command is a usage error: a message and a hint on the error
// stream, and exit code 2.
func ExampleMain_unknownCommand() {
	code := cli.Main([]string{"x"}, os.Stdout, os.Stdout)
	fmt.Println("exit code:", code)
	// Output:
	// weir: unknown command "x"
	// Run 'weir help' for usage.
	// exit code: 2
}
