package ingest

import (
	"context"
	"fmt"

	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/ingest/search"
)

// noIndex stands for a search index that was never made (a data
// directory weir migrate made, that no service has run on), in a
// read-only service: it holds nothing, and a search in it says so. A
// read-only service does not make the file.
type noIndex struct{ where string }

var _ pipeline.Index = noIndex{}

func (n noIndex) err() error {
	return fmt.Errorf("no search index at %s: weir run, weir ingest or weir reindex makes it", n.where)
}

func (n noIndex) Put(context.Context, ...search.Doc) error        { return n.err() }
func (n noIndex) Delete(context.Context, ...string) (int, error)  { return 0, n.err() }
func (n noIndex) Get(context.Context, string) (search.Doc, error) { return search.Doc{}, n.err() }
func (n noIndex) Count(context.Context) (int, error)              { return 0, nil }
func (n noIndex) Close() error                                    { return nil }
func (n noIndex) Search(context.Context, string, int) ([]search.Hit, error) {
	return nil, n.err()
}
func (n noIndex) Entries(context.Context, string, int) ([]search.Entry, error) {
	return nil, nil
}
