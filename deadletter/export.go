package deadletter

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// DefaultBatchSize is how many dead letters Export and Retention read from
// the store at a time, and how many ids Retention purges at a time.
const DefaultBatchSize = 500

// Export writes the dead letters that match f to w as JSON Lines: one
// Record a line, lowest id first. It reads the store DefaultBatchSize
// letters at a time (paging by id from f.AfterID), so that its memory stays
// bounded however many letters match, and writes f.Limit records at most
// (0: no limit).
//
// It returns how many records it wrote. A letter that reaches the store
// while the export runs is written when its id is above the page being
// read, and not otherwise. On an error, n counts the records known to have
// been written in full; w may end in part of a line.
func Export(ctx context.Context, ex store.DeadLetters, f store.DeadLetterFilter, w io.Writer) (n int, err error) {
	if f.Limit < 0 {
		return 0, fmt.Errorf("export dead letters: %w: limit %d is negative", store.ErrInvalid, f.Limit)
	}
	bw := bufio.NewWriter(w)
	enc := newEncoder(bw)
	err = eachPage(ctx, ex, f, f.Limit, DefaultBatchSize, func(page []*weirtype.DeadLetter) error {
		for _, dl := range page {
			if err := enc.Encode(RecordOf(dl)); err != nil {
				return err
			}
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		n += len(page)
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("export dead letters: %w", err)
	}
	return n, nil
}

// newEncoder returns the JSON Lines encoder of records: Encode writes one
// line, and leaves <, > and & as they are so that payloads read as sent.
func newEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// eachPage calls fn with the dead letters that match f, lowest id first,
// batch at a time, starting after f.AfterID and stopping after total
// letters (0: no limit), or at fn's first error.
func eachPage(ctx context.Context, ex store.DeadLetters, f store.DeadLetterFilter, total, batch int, fn func([]*weirtype.DeadLetter) error) error {
	seen := 0
	for total == 0 || seen < total {
		if err := ctx.Err(); err != nil {
			return err
		}
		f.Limit = batch
		if total > 0 {
			f.Limit = min(batch, total-seen)
		}
		page, err := ex.ListDeadLetters(ctx, f)
		if err != nil {
			return err
		}
		if len(page) > f.Limit {
			// The store ignored the limit; never hand on more than asked.
			page = page[:f.Limit]
		}
		if len(page) == 0 {
			return nil
		}
		if err := fn(page); err != nil {
			return err
		}
		seen += len(page)
		if len(page) < f.Limit {
			return nil
		}
		last := page[len(page)-1].ID
		if last <= f.AfterID {
			// Guards against a store that does not page: looping on it
			// would never end.
			return fmt.Errorf("store listed dead letter %d after id %d: ids do not ascend", last, f.AfterID)
		}
		f.AfterID = last
	}
	return nil
}
