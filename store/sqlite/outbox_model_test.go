package sqlite_test

import (
	"bytes"
	"database/sql"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

var outboxModelSeed = flag.Uint64("outbox-model-seed", 0, "seed of TestOutboxModel (0: a fresh one, printed)")

// TestOutboxModel drives the SQLite outbox with a random mix of adds,
// claims by two relays (each holding its last batches), marks, retries,
// releases, purges and time passing, against a model of which messages
// are published, and checks after every step that no message is lost or
// claimed again after it was published, that a key's messages are claimed
// only in order, and at the end that every unpublished message can still
// be claimed. The seed is printed; -outbox-model-seed replays it.
func TestOutboxModel(t *testing.T) {
	seed := *outboxModelSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -outbox-model-seed=%d)", seed, seed)
	for round := range 4 {
		t.Run(fmt.Sprint("round", round), func(t *testing.T) { outboxModelRound(t, seed+uint64(round)) })
	}
}

func outboxModelRound(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	ctx, s, ex := migratedExec(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const lease = time.Minute

	type msg struct {
		key       string
		published bool
	}
	msgs := map[int64]*msg{}
	var order []int64 // ids in add order
	type relay struct {
		name string
		held [][]int64 // claimed batches not yet marked or retried, oldest first
	}
	relays := []*relay{{name: "r0"}, {name: "r1"}}

	for step := range 400 {
		r := relays[rng.IntN(len(relays))]
		switch op := rng.IntN(10); {
		case op < 2: // add
			var batch []store.OutboxMessage
			for range 1 + rng.IntN(6) {
				k := ""
				if rng.IntN(2) == 0 {
					k = fmt.Sprint("k", rng.IntN(3))
				}
				batch = append(batch, store.OutboxMessage{Topic: "t", Key: k})
			}
			ids, err := ex.AddOutbox(ctx, now, batch)
			if err != nil {
				t.Fatal(err)
			}
			for i, id := range ids {
				msgs[id] = &msg{key: batch[i].Key}
				order = append(order, id)
			}
		case op < 5: // claim
			got, err := ex.ClaimOutbox(ctx, store.OutboxClaimParams{Now: now, Limit: 1 + rng.IntN(5), Owner: r.name, LeaseFor: lease,
				Holding: slices.Concat(r.held...)})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range got {
				if msgs[m.ID] == nil || msgs[m.ID].published {
					t.Fatalf("step %d: %s claimed %d, which is published or unknown", step, r.name, m.ID)
				}
				// No earlier unpublished message of its key may be left
				// out of this claim and the relay's held batches.
				if k := msgs[m.ID].key; k != "" {
					for _, id := range order {
						if id >= m.ID {
							break
						}
						if o := msgs[id]; o.key == k && !o.published && !slices.ContainsFunc(got, func(c *weirtype.OutboxMessage) bool { return c.ID == id }) &&
							!slices.Contains(slices.Concat(r.held...), id) {
							t.Fatalf("step %d: %s claimed %d of key %s before %d", step, r.name, m.ID, k, id)
						}
					}
				}
			}
			if len(got) > 0 {
				ids := make([]int64, len(got))
				for i, m := range got {
					ids[i] = m.ID
				}
				r.held = append(r.held, ids)
			}
		case op < 8: // the oldest held batch: mark some, retry the rest
			if len(r.held) == 0 {
				continue
			}
			batch := r.held[0]
			r.held = r.held[1:]
			cut := rng.IntN(len(batch) + 1)
			// A relay whose lease passed may have held the outbox again
			// since, after another published some of its batch: the mark
			// counts only those still pending.
			want := 0
			for _, id := range batch[:cut] {
				if !msgs[id].published {
					want++
				}
			}
			n, err := ex.MarkPublished(ctx, now, r.name, batch[:cut])
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				for _, id := range batch[:cut] {
					msgs[id].published = true
				}
			}
			if n != 0 && n != want {
				t.Fatalf("step %d: %s marked %d of %d, %d of them pending", step, r.name, n, cut, want)
			}
			if _, err := ex.RetryOutbox(ctx, now, r.name, batch[cut:], "nack", now.Add(time.Duration(rng.IntN(3))*time.Second)); err != nil {
				t.Fatal(err)
			}
		case op < 9: // release, or time passes beyond the leases
			if rng.IntN(2) == 0 {
				if _, err := ex.ReleaseOutbox(ctx, now, r.name, slices.Concat(r.held...)); err != nil {
					t.Fatal(err)
				}
			} else {
				now = now.Add(lease + time.Second)
			}
			for _, r := range relays {
				r.held = nil // given back, or a lease passed: the store may hand them out again
			}
		default: // purge what was published more than an hour ago, or time passes
			if rng.IntN(2) == 0 {
				now = now.Add(time.Duration(rng.IntN(90)) * time.Minute)
				continue
			}
			if _, err := ex.PurgeOutbox(ctx, now.Add(-time.Hour), 1+rng.IntN(10)); err != nil {
				t.Fatal(err)
			}
		}
		checkOutboxModel(t, s, step, func(id int64) (pending, known bool) {
			m := msgs[id]
			return m != nil && !m.published, m != nil
		}, func() int {
			n := 0
			for _, m := range msgs {
				if !m.published {
					n++
				}
			}
			return n
		}())
	}
	// Every message not published can still be claimed, in the end.
	now = now.Add(24 * time.Hour)
	var claimed []int64
	for {
		got, err := ex.ClaimOutbox(ctx, store.OutboxClaimParams{Now: now, Limit: 1000, Owner: "last", LeaseFor: lease, Holding: claimed})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		for _, m := range got {
			claimed = append(claimed, m.ID)
		}
	}
	var want []int64
	for id, m := range msgs {
		if !m.published {
			want = append(want, id)
		}
	}
	slices.Sort(want)
	slices.Sort(claimed)
	if !slices.Equal(claimed, want) {
		t.Fatalf("at the end the claims took %v, want the unpublished %v", claimed, want)
	}
}

// checkOutboxModel checks the pending view against the model: every
// message it lists is one the model says is pending, and it lists all of
// them.
func checkOutboxModel(t *testing.T, s interface{ DB() *sql.DB }, step int, pending func(int64) (bool, bool), wantPending int) {
	t.Helper()
	rows, err := s.DB().Query(`SELECT id FROM weir_outbox_pending`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		if p, known := pending(id); !known || !p {
			t.Fatalf("step %d: the store lists %d as pending; the model says published or unknown", step, id)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != wantPending {
		t.Fatalf("step %d: the store lists %d pending messages, the model %d", step, n, wantPending)
	}
}

// A message held back behind an earlier one of its key does not hold the
// watermark back: the mark parks it, and a later claim still finds it, in
// its key's order.
func TestOutboxWatermarkPassesHeldBackMessages(t *testing.T) {
	ctx, s, ex := migratedExec(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	msgs := []store.OutboxMessage{{Topic: "t", Key: "k"}, {Topic: "t", Key: "k"}}
	for range 5 {
		msgs = append(msgs, store.OutboxMessage{Topic: "t"})
	}
	ids, err := ex.AddOutbox(ctx, now, msgs)
	if err != nil {
		t.Fatal(err)
	}
	k1, k2, free := ids[0], ids[1], ids[2:]
	claim := func(at time.Time) []int64 {
		t.Helper()
		got, err := ex.ClaimOutbox(ctx, store.OutboxClaimParams{Now: at, Limit: 10, Owner: "r1", LeaseFor: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		out := make([]int64, len(got))
		for i, m := range got {
			out[i] = m.ID
		}
		return out
	}
	if got, want := claim(now), append([]int64{k1, k2}, free...); !slices.Equal(got, want) {
		t.Fatalf("first claim %v, want %v", got, want)
	}
	// k1 fails; k2 went with it and fails behind it; the rest are published.
	if _, err := ex.RetryOutbox(ctx, now, "r1", []int64{k1, k2}, "nack", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if n, err := ex.MarkPublished(ctx, now, "r1", free); err != nil || n != len(free) {
		t.Fatalf("mark: %d, %v", n, err)
	}
	// A later message of k, and one without a key: k's waits behind k1.
	more, err := ex.AddOutbox(ctx, now, []store.OutboxMessage{{Topic: "t", Key: "k"}, {Topic: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := claim(now); !slices.Equal(got, more[1:]) {
		t.Fatalf("claim while k1 waits: %v, want %v", got, more[1:])
	}
	if n, err := ex.MarkPublished(ctx, now, "r1", more[1:]); err != nil || n != 1 {
		t.Fatalf("mark: %d, %v", n, err)
	}
	var w int64
	if err := s.DB().QueryRow(`SELECT max(through_id) FROM weir_outbox_marks`).Scan(&w); err != nil || w != more[1] {
		t.Fatalf("watermark %d (%v), want %d: the held-back message must not stop it", w, err, more[1])
	}
	if got := pendingIDs(t, s.DB()); !slices.Equal(got, []int64{k1, k2, more[0]}) {
		t.Fatalf("pending %v, want %v", got, []int64{k1, k2, more[0]})
	}
	// Once k1 is due, k's messages come in order, from below the watermark.
	if got, want := claim(now.Add(time.Minute)), []int64{k1, k2, more[0]}; !slices.Equal(got, want) {
		t.Fatalf("claim once k1 is due: %v, want %v", got, want)
	}
	if n, err := ex.MarkPublished(ctx, now.Add(time.Minute), "r1", []int64{k1, k2, more[0]}); err != nil || n != 3 {
		t.Fatalf("mark k's messages: %d, %v", n, err)
	}
	if got := pendingIDs(t, s.DB()); len(got) != 0 {
		t.Fatalf("pending %v after all were marked", got)
	}
	if n, err := ex.PurgeOutbox(ctx, now.Add(2*time.Hour), 100); err != nil || n != len(ids)+len(more) {
		t.Fatalf("purge: %d, %v; want all %d", n, err, len(ids)+len(more))
	}
}

// pendingIDs lists weir_outbox_pending in id order.
func pendingIDs(t *testing.T, db *sql.DB) []int64 {
	t.Helper()
	rows, err := db.Query(`SELECT id FROM weir_outbox_pending ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A claim's messages carry every field as added, and each its own
// payload, although the claim copies small payloads into shared chunks:
// appending to one does not write over the next, and a later claim does
// not change them.
func TestOutboxClaimKeepsEachMessageWhole(t *testing.T) {
	ctx, _, ex := migratedExec(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 123000, time.UTC)
	add := []store.OutboxMessage{
		{Topic: "a", Key: "k1", Payload: []byte("first"), Headers: map[string]string{"h": "1"}},
		{Topic: "b", Payload: []byte("second")},
		{Topic: "a"}, // no payload
		{Topic: "c", Key: "k2", Payload: bytes.Repeat([]byte("x"), 10<<10)},
	}
	for i := range 200 {
		add = append(add, store.OutboxMessage{Topic: "d", Payload: fmt.Appendf(nil, `{"seq":%d}`, i)})
	}
	ids, err := ex.AddOutbox(ctx, now, add)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ex.ClaimOutbox(ctx, store.OutboxClaimParams{Now: now, Limit: 150, Owner: "r1", LeaseFor: time.Minute})
	if err != nil || len(got) != 150 {
		t.Fatalf("claimed %d messages (%v), want 150", len(got), err)
	}
	check := func(when string) {
		t.Helper()
		for i, m := range got {
			w := add[i]
			if m.ID != ids[i] || m.Topic != w.Topic || m.Key != w.Key || !bytes.Equal(m.Payload, w.Payload) || !maps.Equal(m.Headers, w.Headers) ||
				!m.CreatedAt.Equal(now) || !m.NextAttemptAt.Equal(now) || !m.PublishedAt.IsZero() || m.Attempts != 0 || m.LastError != "" ||
				m.LeaseOwner != "r1" || !m.LeaseExpiresAt.Equal(now.Add(time.Minute)) {
				t.Fatalf("%s: message %d is %+v; added %+v", when, i, *m, w)
			}
		}
	}
	check("claimed")
	for _, m := range got {
		m.Payload = append(m.Payload, "!!!"...)
		m.Payload = m.Payload[:len(m.Payload)-3]
	}
	check("after appending to each payload")
	rest, err := ex.ClaimOutbox(ctx, store.OutboxClaimParams{Now: now, Limit: 100, Owner: "r1", LeaseFor: time.Minute, Holding: ids[:150]})
	if err != nil || len(rest) != len(add)-150 {
		t.Fatalf("claimed %d more (%v), want %d", len(rest), err, len(add)-150)
	}
	check("after another claim")
}
