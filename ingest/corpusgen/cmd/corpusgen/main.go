// Command corpusgen writes the sample corpus of the weir repository.
//
//	go run ./ingest/corpusgen/cmd/corpusgen -out corpus
//
// It overwrites the corpus files in the output directory and writes
// MANIFEST.json there. Files in the directory that the corpus does not have
// are reported and the command exits with status 1, because the
// repository's test compares the directory with the generator's output
// and would fail on them; remove them by hand.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/weirhq/weir/ingest/corpusgen"
)

func main() {
	out := flag.String("out", "corpus", "directory to write the corpus into")
	seed := flag.Uint64("seed", corpusgen.DefaultSeed, "seed of the corpus; the committed one uses the default")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "corpusgen: unexpected arguments %q\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	m, err := corpusgen.Generate(*out, *seed)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	t := m.Totals
	fmt.Printf("corpusgen: seed %d: wrote %d files (%d text, %d markdown, %d mbox with %d messages, %d poison), %d bytes, to %s: %d documents expected to succeed\n",
		m.Seed, t.Files, t.Text, t.Markdown, t.Mbox, t.MboxMessages, t.Poison, t.Bytes, *out, t.Documents)
	extra, err := corpusgen.Extra(*out, m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "corpusgen:", err)
		os.Exit(1)
	}
	if len(extra) > 0 {
		fmt.Fprintf(os.Stderr, "corpusgen: %d files in %s are not part of the corpus; remove them:\n", len(extra), *out)
		for _, p := range extra {
			fmt.Fprintln(os.Stderr, "\t"+p)
		}
		os.Exit(1)
	}
}
