// Package deadletter is the operator's side of weir's dead-letter store:
// the operations that sit above the store's [store.DeadLetters] role and
// that the CLI and the admin API call; they take that role alone.
//
// The store itself lists ([store.DeadLetters.ListDeadLetters]), shows
// ([store.DeadLetters.GetDeadLetter]), requeues with attempts reset
// ([store.DeadLetters.RequeueDeadLetters]) and purges by filter, returning
// the count ([store.DeadLetters.PurgeDeadLetters]). This package adds what needs
// more than one query:
//
//   - [Record], the stable JSON shape of one dead letter, with the field
//     names of the DLQ payload in weir's retry spec (original_event,
//     idempotency_key, attempt_count, last_error, error_type,
//     abandoned_reason, timestamp) and the rest in the same snake_case;
//   - [Export], which writes the dead letters that match a filter as JSON
//     Lines, one [Record] a line, paging through the store so that memory
//     stays bounded however many there are;
//   - [Retention], which enforces the spec's DLQ retention (max age 7 days,
//     max count 10,000) by archiving what is due to a JSON Lines file and
//     only then purging it.
//
// # Nothing is dropped silently
//
// [Retention.Enforce] deletes a dead letter only after a complete archive
// file holding it is durable on disk: the archive is written to a temporary
// file in the archive directory, fsynced, given its final name without
// replacing any existing file, and the directory fsynced; only then are
// exactly the archived ids purged, batch by batch. A crash, or an error, at
// any point therefore leaves every dead letter in the store, in a complete
// archive file, or in both. Both happens when a run stops after its archive
// is durable and before its purge finished: the next run archives the
// letters still in the store again, in a new file. Such duplicates carry
// the same "id", so whoever reads the archives can drop them.
package deadletter
