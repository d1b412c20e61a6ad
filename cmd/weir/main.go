// Command weir runs and operates the weir pipeline engine. The commands live
// in package internal/cli; run "weir help" for the list.
package main

import (
	"os"

	"github.com/weirhq/weir/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
