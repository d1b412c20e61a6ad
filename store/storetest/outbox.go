package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

func messagingCases() []suiteCase {
	return []suiteCase{
		{"OutboxAddAndClaim", testOutboxAddAndClaim},
		{"OutboxInCallersTransaction", testOutboxTransactional},
		{"OutboxPublishedAndRetried", testOutboxPublishAndRetry},
		{"OutboxKeepsKeyOrder", testOutboxKeyOrder},
		{"OutboxConcurrentClaimsTakeEachOnce", testOutboxConcurrent},
		{"OutboxClaimSkipsWhatTheOwnerHolds", testOutboxHolding},
		{"OutboxReleaseGivesBackAtOnce", testOutboxRelease},
		{"OutboxOneRelayAtATime", testOutboxOneRelay},
		{"OutboxPurge", testOutboxPurge},
		{"InboxRecordsEachMessageOnce", testInbox},
		{"OutboxIdentityIsTheStoresOwn", testOutboxIdentity},
	}
}

func claimOutbox(t *testing.T, ex store.Executor, at time.Time, owner string, limit int) []*weirtype.OutboxMessage {
	t.Helper()
	ms, err := ex.ClaimOutbox(context.Background(), store.OutboxClaimParams{Now: at, Limit: limit, Owner: owner, LeaseFor: lease})
	if err != nil {
		t.Fatalf("claim outbox: %v", err)
	}
	return ms
}

// KeyedMessages returns n outbox messages of the topic t: message i has
// the key k<i%keys>, except every unkeyedEvery-th from the first, which
// has none (unkeyedEvery 0: every message has a key).
func KeyedMessages(n, keys, unkeyedEvery int) []store.OutboxMessage {
	msgs := make([]store.OutboxMessage, n)
	for i := range msgs {
		msgs[i] = store.OutboxMessage{Topic: "t", Key: fmt.Sprint("k", i%keys)}
		if unkeyedEvery > 0 && i%unkeyedEvery == 0 {
			msgs[i].Key = ""
		}
	}
	return msgs
}

func addOutbox(t *testing.T, ex store.Executor, at time.Time, msgs ...store.OutboxMessage) []int64 {
	t.Helper()
	ids, err := ex.AddOutbox(context.Background(), at, msgs)
	if err != nil {
		t.Fatalf("add to the outbox: %v", err)
	}
	if len(ids) != len(msgs) {
		t.Fatalf("add returned %d ids for %d messages", len(ids), len(msgs))
	}
	return ids
}

func testOutboxAddAndClaim(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	in := []store.OutboxMessage{
		{Topic: "grading.request", Key: "sub-1", Payload: []byte(`{"n":1}`), Headers: map[string]string{"type": "grading.request"}},
		{Topic: "grading.request", Payload: []byte{0, 1, 2, 255}},
		{Topic: "index.update", Key: "doc-9", Payload: []byte(`{}`)},
	}
	ids := addOutbox(t, ex, now, in...)
	if !slices.IsSorted(ids) {
		t.Fatalf("ids %v are not in order", ids)
	}
	if _, err := ex.AddOutbox(context.Background(), now, []store.OutboxMessage{{Payload: []byte("x")}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("add without a topic: %v, want ErrInvalid", err)
	}
	got := claimOutbox(t, ex, now, "r1", 10)
	if !slices.Equal(weirtype.OutboxIDs(got), ids) {
		t.Fatalf("claimed %v, want %v", weirtype.OutboxIDs(got), ids)
	}
	for i, m := range got {
		if m.Topic != in[i].Topic || m.Key != in[i].Key || string(m.Payload) != string(in[i].Payload) || !maps.Equal(m.Headers, in[i].Headers) ||
			!m.CreatedAt.Equal(now) || !m.PublishedAt.IsZero() || m.Attempts != 0 || m.LeaseOwner != "r1" || !m.LeaseExpiresAt.Equal(now.Add(lease)) {
			t.Fatalf("claimed message %d: %+v, want %+v held by r1", i, *m, in[i])
		}
	}
	if again := claimOutbox(t, ex, now.Add(lease), "r2", 10); len(again) != 0 {
		t.Fatalf("a held message was claimed again while its lease lasted: %v", weirtype.OutboxIDs(again))
	}
	if after := claimOutbox(t, ex, now.Add(lease+time.Microsecond), "r2", 10); !slices.Equal(weirtype.OutboxIDs(after), ids) {
		t.Fatalf("after the lease: claimed %v, want %v again", weirtype.OutboxIDs(after), ids)
	}
}

func testOutboxTransactional(t *testing.T, h Harness) {
	s := migrated(t, h)
	for _, commit := range []bool{false, true} {
		err := h.Tx(t, s, commit, func(ex store.Executor, _ func(string) error) error {
			_, err := ex.AddOutbox(context.Background(), now, []store.OutboxMessage{{Topic: "t", Payload: []byte(fmt.Sprint(commit))}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	got := claimOutbox(t, s.Executor(), now, "r1", 10)
	if len(got) != 1 || string(got[0].Payload) != "true" {
		t.Fatalf("claimed %d messages, want only the committed one", len(got))
	}
}

func testOutboxPublishAndRetry(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	ids := addOutbox(t, ex, now, store.OutboxMessage{Topic: "t"}, store.OutboxMessage{Topic: "t"})
	claimOutbox(t, ex, now, "r1", 10)
	if n, err := ex.MarkPublished(ctx, now, "r2", ids[:1]); err != nil || n != 0 {
		t.Fatalf("mark published by a relay that does not hold it: %d, %v; want 0", n, err)
	}
	if n, err := ex.MarkPublished(ctx, now.Add(time.Second), "r1", ids[:1]); err != nil || n != 1 {
		t.Fatalf("mark published: %d, %v; want 1", n, err)
	}
	retryAt := now.Add(time.Minute)
	if n, err := ex.RetryOutbox(ctx, now.Add(time.Second), "r1", ids[1:], "broker unreachable", retryAt); err != nil || n != 1 {
		t.Fatalf("retry: %d, %v; want 1", n, err)
	}
	if got := claimOutbox(t, ex, retryAt.Add(-time.Microsecond), "r2", 10); len(got) != 0 {
		t.Fatalf("claimed %v before the retry was due (and the published one must never come back)", weirtype.OutboxIDs(got))
	}
	got := claimOutbox(t, ex, retryAt, "r2", 10)
	if len(got) != 1 || got[0].ID != ids[1] || got[0].Attempts != 1 || got[0].LastError != "broker unreachable" || !got[0].NextAttemptAt.Equal(retryAt) {
		t.Fatalf("claimed %+v, want the retried message with one attempt and its error", got)
	}
}

func testOutboxKeyOrder(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	ids := addOutbox(t, ex, now,
		store.OutboxMessage{Topic: "t", Key: "A"}, store.OutboxMessage{Topic: "t", Key: "A"},
		store.OutboxMessage{Topic: "t", Key: "A"}, store.OutboxMessage{Topic: "t", Key: "B"},
		store.OutboxMessage{Topic: "t"})
	a1, a2, a3, b1, free := ids[0], ids[1], ids[2], ids[3], ids[4]
	if got := claimOutbox(t, ex, now, "r1", 1); !slices.Equal(weirtype.OutboxIDs(got), []int64{a1}) {
		t.Fatalf("first claim %v, want [%d]", weirtype.OutboxIDs(got), a1)
	}
	// While r1 holds A's first message, A's later ones wait, for r1 too.
	got, err := ex.ClaimOutbox(ctx, store.OutboxClaimParams{Now: now, Limit: 10, Owner: "r1", LeaseFor: lease, Holding: []int64{a1}})
	if err != nil || !slices.Equal(weirtype.OutboxIDs(got), []int64{b1, free}) {
		t.Fatalf("second claim %v, %v; want B's and the unkeyed one [%d %d], A's waiting behind %d", weirtype.OutboxIDs(got), err, b1, free, a1)
	}
	if got := claimOutbox(t, ex, now, "r2", 10); len(got) != 0 {
		t.Fatalf("another relay claimed %v: A's messages wait behind %d, and r1 holds the rest", weirtype.OutboxIDs(got), a1)
	}
	if _, err := ex.MarkPublished(ctx, now, "r1", []int64{b1, free}); err != nil {
		t.Fatal(err)
	}
	retryAt := now.Add(time.Minute)
	if _, err := ex.RetryOutbox(ctx, now, "r1", []int64{a1}, "nack", retryAt); err != nil {
		t.Fatal(err)
	}
	// While A's first message waits out its backoff, A's later ones wait too.
	if got := claimOutbox(t, ex, now.Add(time.Second), "r1", 10); len(got) != 0 {
		t.Fatalf("claimed %v while A's first message waits for its retry", weirtype.OutboxIDs(got))
	}
	if got := claimOutbox(t, ex, retryAt, "r3", 10); !slices.Equal(weirtype.OutboxIDs(got), []int64{a1, a2, a3}) {
		t.Fatalf("claim once A's first is due: %v, want [%d %d %d]", weirtype.OutboxIDs(got), a1, a2, a3)
	}
}

func testOutboxConcurrent(t *testing.T, h Harness) {
	s := migrated(t, h)
	ex := s.Executor()
	const n = 300
	msgs := KeyedMessages(n, 7, 3)
	addOutbox(t, ex, now, msgs...)
	var (
		mu   sync.Mutex
		seen = map[int64]int{}
		errs []error
		wg   sync.WaitGroup
	)
	for w := range 4 {
		wg.Go(func() {
			owner := fmt.Sprint("r", w)
			for {
				got, err := s.Executor().ClaimOutbox(context.Background(), store.OutboxClaimParams{Now: now, Limit: 17, Owner: owner, LeaseFor: lease})
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				if len(got) == 0 {
					mu.Lock()
					done := len(seen) == n
					mu.Unlock()
					if done {
						return
					}
					time.Sleep(time.Millisecond)
					continue
				}
				mu.Lock()
				for _, m := range got {
					seen[m.ID]++
				}
				mu.Unlock()
				if _, err := s.Executor().MarkPublished(context.Background(), now, owner, weirtype.OutboxIDs(got)); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("message %d claimed %d times", id, c)
		}
	}
	if len(seen) != n {
		t.Fatalf("%d of %d messages claimed", len(seen), n)
	}
}

// A relay publishing one batch claims the next holding the first: it
// gets none of the first again.
func testOutboxHolding(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	ids := addOutbox(t, ex, now, store.OutboxMessage{Topic: "t"}, store.OutboxMessage{Topic: "t"}, store.OutboxMessage{Topic: "t"},
		store.OutboxMessage{Topic: "t"}, store.OutboxMessage{Topic: "t"})
	first := claimOutbox(t, ex, now, "r1", 2)
	if !slices.Equal(weirtype.OutboxIDs(first), ids[:2]) {
		t.Fatalf("first claim %v, want %v", weirtype.OutboxIDs(first), ids[:2])
	}
	second, err := ex.ClaimOutbox(ctx, store.OutboxClaimParams{Now: now, Limit: 2, Owner: "r1", LeaseFor: lease, Holding: ids[:2]})
	if err != nil || !slices.Equal(weirtype.OutboxIDs(second), ids[2:4]) {
		t.Fatalf("claim holding %v: %v, %v; want %v", ids[:2], weirtype.OutboxIDs(second), err, ids[2:4])
	}
	// The first batch recorded, the second still held.
	if n, err := ex.MarkPublished(ctx, now, "r1", ids[:2]); err != nil || n != 2 {
		t.Fatalf("mark the first batch: %d, %v", n, err)
	}
	third, err := ex.ClaimOutbox(ctx, store.OutboxClaimParams{Now: now, Limit: 10, Owner: "r1", LeaseFor: lease, Holding: ids[2:4]})
	if err != nil || !slices.Equal(weirtype.OutboxIDs(third), ids[4:]) {
		t.Fatalf("claim holding %v: %v, %v; want %v", ids[2:4], weirtype.OutboxIDs(third), err, ids[4:])
	}
}

// Released messages are claimed again at once, by another relay, with no
// attempt counted.
func testOutboxRelease(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	ids := addOutbox(t, ex, now, store.OutboxMessage{Topic: "t", Key: "A"}, store.OutboxMessage{Topic: "t", Key: "A"}, store.OutboxMessage{Topic: "t"})
	claimOutbox(t, ex, now, "r1", 10)
	if n, err := ex.ReleaseOutbox(ctx, now, "r2", ids); err != nil || n != 0 {
		t.Fatalf("release by a relay that holds nothing: %d, %v; want 0", n, err)
	}
	if got := claimOutbox(t, ex, now, "r2", 10); len(got) != 0 {
		t.Fatalf("claimed %v while r1 holds them", weirtype.OutboxIDs(got))
	}
	if n, err := ex.ReleaseOutbox(ctx, now, "r1", ids); err != nil || n != len(ids) {
		t.Fatalf("release: %d, %v; want %d", n, err, len(ids))
	}
	got := claimOutbox(t, ex, now, "r2", 10)
	if !slices.Equal(weirtype.OutboxIDs(got), ids) {
		t.Fatalf("claimed %v after the release, want %v", weirtype.OutboxIDs(got), ids)
	}
	for _, m := range got {
		if m.Attempts != 0 || m.LeaseOwner != "r2" {
			t.Fatalf("message %d after the release: %d attempts, held by %q; want none, r2", m.ID, m.Attempts, m.LeaseOwner)
		}
	}
	if n, err := ex.MarkPublished(ctx, now, "r1", ids); err != nil || n != 0 {
		t.Fatalf("mark by the relay that released them: %d, %v; want 0", n, err)
	}
	if _, err := ex.ReleaseOutbox(ctx, now, "", ids); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("release without an owner: %v, want ErrInvalid", err)
	}
}

// Where one relay at a time holds the outbox, a claim renews its lease,
// another relay gets nothing until the lease has ended, then takes over
// with what the first held; the first, taken over, marks nothing.
func testOutboxOneRelay(t *testing.T, h Harness) {
	s := migrated(t, h)
	if s.Features().ConcurrentRelays {
		t.Skip("relays hold messages, not the outbox: OutboxConcurrentClaimsTakeEachOnce")
	}
	ex := s.Executor()
	ctx := context.Background()
	ids := addOutbox(t, ex, now, store.OutboxMessage{Topic: "t"}, store.OutboxMessage{Topic: "t"})
	held := claimOutbox(t, ex, now, "r1", 1)
	if !slices.Equal(weirtype.OutboxIDs(held), ids[:1]) {
		t.Fatalf("r1 claimed %v, want %v", weirtype.OutboxIDs(held), ids[:1])
	}
	if got := claimOutbox(t, ex, now.Add(lease/2), "r2", 10); len(got) != 0 {
		t.Fatalf("r2 claimed %v while r1 holds the outbox", weirtype.OutboxIDs(got))
	}
	// r1 renews at 3/4 of its lease; r2 waits past the first lease.
	renewAt := now.Add(lease * 3 / 4)
	got, err := ex.ClaimOutbox(ctx, store.OutboxClaimParams{Now: renewAt, Limit: 10, Owner: "r1", LeaseFor: lease, Holding: ids[:1]})
	if err != nil || !slices.Equal(weirtype.OutboxIDs(got), ids[1:]) || !got[0].LeaseExpiresAt.Equal(renewAt.Add(lease)) {
		t.Fatalf("r1's second claim: %+v, %v; want %v held until %v", got, err, ids[1:], renewAt.Add(lease))
	}
	if got := claimOutbox(t, ex, now.Add(lease+time.Second), "r2", 10); len(got) != 0 {
		t.Fatalf("r2 claimed %v though r1 renewed its lease", weirtype.OutboxIDs(got))
	}
	// Past the renewed lease r2 takes the outbox, with both messages.
	if got := claimOutbox(t, ex, renewAt.Add(lease+time.Microsecond), "r2", 10); !slices.Equal(weirtype.OutboxIDs(got), ids) {
		t.Fatalf("r2 after r1's lease: %v, want %v", weirtype.OutboxIDs(got), ids)
	}
	if n, err := ex.MarkPublished(ctx, now, "r1", ids); err != nil || n != 0 {
		t.Fatalf("r1 marked %d (%v) after r2 took over, want 0", n, err)
	}
}

func testOutboxPurge(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	ids := addOutbox(t, ex, now, store.OutboxMessage{Topic: "t"}, store.OutboxMessage{Topic: "t"}, store.OutboxMessage{Topic: "t"}, store.OutboxMessage{Topic: "t"})
	claimOutbox(t, ex, now, "r1", 10)
	if _, err := ex.MarkPublished(ctx, now, "r1", ids[:3]); err != nil {
		t.Fatal(err)
	}
	if n, err := ex.PurgeOutbox(ctx, now.Add(time.Hour), 2); err != nil || n != 2 {
		t.Fatalf("purge with limit 2: %d, %v", n, err)
	}
	if n, err := ex.PurgeOutbox(ctx, now.Add(time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("second purge: %d, %v; want the last published one", n, err)
	}
	if n, err := ex.PurgeOutbox(ctx, now.Add(time.Hour), 100); err != nil || n != 0 {
		t.Fatalf("third purge: %d, %v; the unpublished message must stay", n, err)
	}
	if got := claimOutbox(t, ex, now.Add(time.Hour), "r2", 10); !slices.Equal(weirtype.OutboxIDs(got), ids[3:]) {
		t.Fatalf("claimed %v after purges, want the unpublished [%d]", weirtype.OutboxIDs(got), ids[3])
	}
}

func testInbox(t *testing.T, h Harness) {
	s := migrated(t, h)
	ex := s.Executor()
	ctx := context.Background()
	for _, c := range []struct {
		topic, id string
		first     bool
	}{
		{"t", "m1", true}, {"t", "m1", false}, {"u", "m1", true}, {"t", "m2", true},
	} {
		first, err := ex.RecordInbox(ctx, now, c.topic, c.id)
		if err != nil || first != c.first {
			t.Fatalf("record %s/%s: %v, %v; want first=%v", c.topic, c.id, first, err, c.first)
		}
	}
	// A record in a rolled-back transaction is gone with the effects.
	if err := h.Tx(t, s, false, func(ex store.Executor, _ func(string) error) error {
		first, err := ex.RecordInbox(ctx, now, "t", "m3")
		if err == nil && !first {
			err = errors.New("m3 recorded before")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if first, err := ex.RecordInbox(ctx, now, "t", "m3"); err != nil || !first {
		t.Fatalf("m3 after a rollback: %v, %v; want first", first, err)
	}
	if _, err := ex.RecordInbox(ctx, now, "t", ""); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("record without an id: %v, want ErrInvalid", err)
	}
	if n, err := ex.PurgeInbox(ctx, now.Add(time.Second), 100); err != nil || n != 4 {
		t.Fatalf("purge: %d, %v; want the 4 records", n, err)
	}
	if first, err := ex.RecordInbox(ctx, now, "t", "m1"); err != nil || !first {
		t.Fatalf("m1 after the purge: %v, %v; want first again", first, err)
	}
}

// Each store has an identity of its own, which stays as it is: read twice,
// in a transaction, after messages were added; another store, as a store
// made again in place of a deleted one would be, has another.
func testOutboxIdentity(t *testing.T, h Harness) {
	ctx := context.Background()
	read := func(ex store.Executor) store.OutboxIdentity {
		t.Helper()
		id, err := ex.OutboxIdentity(ctx)
		if err != nil {
			t.Fatalf("outbox identity: %v", err)
		}
		return id
	}
	s := migrated(t, h)
	first := read(s.Executor())
	if len(first.StoreID) != 16 || strings.Trim(first.StoreID, "0123456789abcdef") != "" || first.LegacyThrough != 0 {
		t.Fatalf("identity of a new store: %+v; want 16 hex digits and no legacy messages", first)
	}
	addOutbox(t, s.Executor(), now, store.OutboxMessage{Topic: "t"}, store.OutboxMessage{Topic: "t"})
	if again := read(s.Executor()); again != first {
		t.Fatalf("identity read again: %+v, first %+v", again, first)
	}
	if err := h.Tx(t, s, false, func(ex store.Executor, _ func(string) error) error {
		if inTx := read(ex); inTx != first {
			return fmt.Errorf("identity in a transaction: %+v, outside %+v", inTx, first)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{first.StoreID: true}
	for range 3 {
		other := read(migrated(t, h).Executor())
		if seen[other.StoreID] {
			t.Fatalf("two stores have the identity %s", other.StoreID)
		}
		seen[other.StoreID] = true
	}
}
