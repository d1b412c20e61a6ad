package main

// THROWAWAY EXPERIMENT: a pipelined relay loop (claim next batch while the
// current one publishes; mark in the background), to size the gain of
// pipelining outbox.Relay. Not part of the deliverable.

import (
	"context"
	"database/sql"
	"strconv"
	"time"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

func sketchRun(ctx context.Context, ex store.Executor, b broker.Broker, batch int) error {
	claimed := make(chan []*weirtype.OutboxMessage, 1)
	marks := make(chan []int64, 2)
	errc := make(chan error, 2)
	go func() {
		defer close(claimed)
		for ctx.Err() == nil {
			msgs, err := ex.ClaimOutbox(ctx, store.OutboxClaimParams{Now: time.Now(), Limit: batch, Owner: "sketch", LeaseFor: time.Minute})
			if err != nil {
				errc <- err
				return
			}
			if len(msgs) == 0 {
				time.Sleep(time.Millisecond)
				continue
			}
			select {
			case claimed <- msgs:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		for ids := range marks {
			if _, err := ex.MarkPublished(context.WithoutCancel(ctx), time.Now(), "sketch", ids); err != nil {
				errc <- err
				return
			}
		}
	}()
	defer close(marks)
	for msgs := range claimed {
		bm := make([]broker.Message, len(msgs))
		ids := make([]int64, len(msgs))
		for i, m := range msgs {
			bm[i] = broker.Message{ID: "sketch-" + itoa(m.ID), Topic: m.Topic, Key: m.Key, Body: m.Payload}
			ids[i] = m.ID
		}
		if err := b.Publish(ctx, bm); err != nil {
			return err
		}
		marks <- ids
		select {
		case err := <-errc:
			return err
		default:
		}
	}
	return ctx.Err()
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

// sketchRun2: one loop; while batch k publishes, one transaction marks
// batch k-1 and claims batch k+1.
func sketchRun2(ctx context.Context, st interface {
	RunTx(context.Context, func(*sql.Tx, store.Executor) error) error
}, ts *timingStore, b broker.Broker, batch int) error {
	var prev []int64
	var cur []*weirtype.OutboxMessage
	step := func() ([]*weirtype.OutboxMessage, error) {
		var next []*weirtype.OutboxMessage
		err := st.RunTx(ctx, func(_ *sql.Tx, ex store.Executor) error {
			te := timingExecutor{Executor: ex, s: ts}
			if len(prev) > 0 {
				if _, err := te.MarkPublished(ctx, time.Now(), "sketch", prev); err != nil {
					return err
				}
			}
			var err error
			next, err = te.ClaimOutbox(ctx, store.OutboxClaimParams{Now: time.Now(), Limit: batch, Owner: "sketch", LeaseFor: time.Minute})
			return err
		})
		return next, err
	}
	for ctx.Err() == nil {
		pubErr := make(chan error, 1)
		var ids []int64
		if len(cur) > 0 {
			bm := make([]broker.Message, len(cur))
			ids = make([]int64, len(cur))
			for i, m := range cur {
				bm[i] = broker.Message{ID: "sketch-" + itoa(m.ID), Topic: m.Topic, Key: m.Key, Body: m.Payload}
				ids[i] = m.ID
			}
			go func() { pubErr <- b.Publish(ctx, bm) }()
		} else {
			pubErr <- nil
		}
		next, err := step()
		if err != nil {
			return err
		}
		if err := <-pubErr; err != nil {
			return err
		}
		prev, cur = ids, next
		if len(cur) == 0 && len(prev) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	return ctx.Err()
}
