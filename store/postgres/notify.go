package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/store"
)

// maxPayloadLen is the longest payload pg_notify accepts, in bytes (its
// limit is "shorter than 8000 bytes"). A queue whose name is longer is not
// announced, rather than failing the write that made its job available:
// its workers find the job when they poll.
const maxPayloadLen = 7999

// closeTimeout bounds the close of Listen's connection after its context
// has ended.
const closeTimeout = 5 * time.Second

var _ store.Notifier = (*Store)(nil)

// notifyChannel is the channel on which the store of schema announces the
// queues of jobs that become available: "weir_" and 16 hex digits of a
// 64-bit FNV-1a hash of the schema's name. A schema's name may be 63 bytes
// of anything, and a channel is an identifier of at most 63 bytes; the hash
// gives every schema a short channel of its own that needs no quoting, so
// that the stores of two schemas on one database never wake each other.
func notifyChannel(schema string) string {
	h := fnv.New64a()
	h.Write([]byte("weir/notify/"))
	h.Write([]byte(schema))
	return fmt.Sprintf("weir_%016x", h.Sum64())
}

// NotifyChannel returns the channel on which the store announces, with
// pg_notify, the queue of every job that becomes available; see Listen.
func (s *Store) NotifyChannel() string { return s.channel }

// Listen calls wake with the queue of every job that becomes available, by
// an insert (or a reclaim), an immediate retry, a rescue, a release or a
// requeue, in any process on the store's schema, until ctx ends; then it
// returns ctx's error. It calls ready once it listens, before any wake.
//
// It takes a connection from the pool and keeps it as its own (the pool
// opens another in its place), runs LISTEN on NotifyChannel there and
// waits for notifications; it closes the connection when it returns. An
// error of the connection ends it: the caller polls meanwhile, and may
// call Listen again.
//
// A write announces each distinct queue once, and in a transaction only
// when the transaction commits (PostgreSQL delivers notifications at
// commit, and drops those of a rollback). A wake is a hint, never a
// promise: the job may have been claimed already by the time the worker
// looks. A queue whose name is 8000 bytes or longer is not announced.
func (s *Store) Listen(ctx context.Context, ready func(), wake func(queue string)) error {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("postgres: listen: acquire a connection: %w", err)
	}
	// A connection that listens must not go back to the pool, where
	// another caller would get it still listening.
	conn := pc.Hijack()
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("postgres: listen on %s: %w", s.channel, err)
	}
	ready()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("postgres: listen on %s: %w", s.channel, err)
		}
		if n.Channel == s.channel {
			wake(n.Payload)
		}
	}
}

// wokenCTE returns a CTE named woken that announces on channel, once each,
// the distinct queues of the rows of from whose state is available. A CTE
// of a plain SELECT runs only when the statement reads it: the statement
// must read it, as readWoken does.
func wokenCTE(channel, from string) string {
	return `woken AS (
	SELECT pg_notify('` + channel + `', queue) FROM ` + from + `
	WHERE state = 'available' AND octet_length(queue) <= ` + fmt.Sprint(maxPayloadLen) + `
	GROUP BY queue
)`
}

// readWoken is a condition that is always true and reads the CTE woken,
// so that its notifications are sent. PostgreSQL evaluates it once, as a
// one-time filter of the statement.
const readWoken = `(SELECT count(*) FROM woken) >= 0`
