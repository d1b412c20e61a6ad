package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/storetest"
	"github.com/weirhq/weir/weirtype"
)

// Relays that claim, publish, fail and retry at once, on leases so short
// that they often expire under a relay still working (its late retries and
// publishes then race the others' claims), never publish a keyed message
// before every earlier message of its key has been published. A claim
// skips the rows other writers have locked: a retry of an expired lease
// racing a claim once let the claim take a key's later message without the
// earlier one, which the retry then sent to wait out its backoff.
func TestOutboxKeyOrderUnderRacingRelays(t *testing.T) {
	t.Parallel()
	s := migrated(t)
	ctx := context.Background()
	const n, keys = 600, 5
	msgs := storetest.KeyedMessages(n, keys, 4)
	ids, err := s.Executor().AddOutbox(ctx, now, msgs)
	if err != nil {
		t.Fatal(err)
	}
	// earlier[id] are the ids of the messages of id's key added before it.
	earlier := make(map[int64][]int64, n)
	byKey := map[string][]int64{}
	for i, id := range ids {
		if k := msgs[i].Key; k != "" {
			earlier[id] = append([]int64(nil), byKey[k]...)
			byKey[k] = append(byKey[k], id)
		}
	}

	// The clock moves a millisecond at each call; a lease lasts three.
	var ticks atomic.Int64
	clock := func() time.Time { return now.Add(time.Duration(ticks.Add(1)) * time.Millisecond) }
	var (
		mu        sync.Mutex
		published = make(map[int64]bool, n)
		errs      []error
		wg        sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	deadline := time.Now().Add(time.Minute)
	for r := range 6 {
		wg.Go(func() {
			owner := fmt.Sprint("relay-", r)
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			for time.Now().Before(deadline) {
				got, err := s.Executor().ClaimOutbox(ctx, store.OutboxClaimParams{Now: clock(), Limit: 1 + rng.IntN(20), Owner: owner, LeaseFor: 3 * time.Millisecond})
				if err != nil {
					fail(err)
					return
				}
				if len(got) == 0 {
					mu.Lock()
					done := len(published) == n
					mu.Unlock()
					if done {
						return
					}
					continue
				}
				// Publish in id order; a key whose message fails has the
				// rest of its messages in the batch retried with it.
				var sent, retry []int64
				failed := map[string]bool{}
				for _, m := range got {
					if failed[m.Key] || rng.IntN(5) == 0 {
						if m.Key != "" {
							failed[m.Key] = true
						}
						retry = append(retry, m.ID)
						continue
					}
					if err := publish(&mu, published, earlier, m); err != nil {
						fail(err)
						return
					}
					sent = append(sent, m.ID)
				}
				at := clock()
				if _, err := s.Executor().RetryOutbox(ctx, at, owner, retry, "nack", at.Add(time.Duration(rng.IntN(3))*time.Millisecond)); err != nil {
					fail(err)
					return
				}
				if _, err := s.Executor().MarkPublished(ctx, clock(), owner, sent); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	if len(published) != n {
		t.Fatalf("%d of %d messages published before the deadline", len(published), n)
	}
}

// publish records that m was published (again, if it was before), and
// fails if an earlier message of its key has not been published yet.
func publish(mu *sync.Mutex, published map[int64]bool, earlier map[int64][]int64, m *weirtype.OutboxMessage) error {
	mu.Lock()
	defer mu.Unlock()
	for _, e := range earlier[m.ID] {
		if !published[e] {
			return fmt.Errorf("message %d of key %q published by %s before message %d of its key", m.ID, m.Key, m.LeaseOwner, e)
		}
	}
	published[m.ID] = true
	return nil
}
