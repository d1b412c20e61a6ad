package parse_test

import (
	"fmt"

	"github.com/weirhq/weir/ingest/parse"
)

func ExampleFile_markdown() {
	src := "# Release *notes*\n\nSee [the changelog](https://example.com/changes) for `v1.2`.\n"
	docs, err := parse.File("NOTES.md", []byte(src))
	if err != nil {
		panic(err)
	}
	d := docs[0]
	fmt.Printf("%q %q\n%s\n", d.Key, d.Title, d.Text)
	// Output:
	// "" "Release notes"
	// Release notes
	//
	// See the changelog for v1.2.
}

func ExampleFile_mbox() {
	mbox := "From a@example.com Mon Jan 19 09:00:00 2026\n" +
		"From: a@example.com\n" +
		"Subject: =?UTF-8?Q?Caf=C3=A9?=\n" +
		"Content-Type: text/plain; charset=utf-8\n" +
		"Content-Transfer-Encoding: quoted-printable\n" +
		"\n" +
		"See you at the caf=C3=A9.\n" +
		">From the kitchen: soup.\n" +
		"\n" +
		"From b@example.com Mon Jan 19 10:00:00 2026\n" +
		"this message has no headers\n"
	docs, err := parse.File("inbox.mbox", []byte(mbox))
	if err != nil {
		panic(err)
	}
	for _, d := range docs {
		fmt.Printf("%s %q %q parse_error=%q\n", d.Key, d.Title, d.Text, d.Meta["parse_error"])
	}
	// Output:
	// #1 "Café" "See you at the café.\nFrom the kitchen: soup." parse_error=""
	// #2 "" "this message has no headers\n" parse_error="read message: malformed header line: this message has no headers"
}

func ExampleFile_unsupported() {
	_, err := parse.File("scan.pdf", []byte("%PDF-1.7"))
	fmt.Println(err)
	// Output:
	// parse "scan.pdf": extension ".pdf" (want .txt, .text, .md, .markdown or .mbox): unsupported file format
}
