package search_test

import (
	"fmt"

	"github.com/weirhq/weir/ingest/search"
)

func ExampleParseQuery() {
	terms, err := search.ParseQuery(`deploy "disk full" repl* OR (title:x`)
	if err != nil {
		panic(err)
	}
	for _, t := range terms {
		fmt.Printf("%q phrase=%v prefix=%v\n", t.Text, t.Phrase, t.Prefix)
	}

	_, err = search.ParseQuery("   ")
	fmt.Println(err)
	// Output:
	// "deploy" phrase=false prefix=false
	// "disk full" phrase=true prefix=false
	// "repl" phrase=false prefix=true
	// "OR" phrase=false prefix=false
	// "(title:x" phrase=false prefix=false
	// search: invalid query "   ": it is empty: type a word to search for
}
