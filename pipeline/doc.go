// Package pipeline is weir's document-ingestion service, built on the job
// engine: documents dropped into incoming/ (plain text, Markdown, mbox
// archives split into one document per message) are parsed, extracted,
// saved in SQL, the source of truth, and indexed in a full-text index,
// each stage a job with its own attempts and backoff.
//
// A file's job id is SHA-256 of its container, path and ETag (the hash of
// its content), and is the idempotency key of its parse job: an event
// fired twice, or the same file copied in again, makes no second job.
//
// Write order and failures:
//
//   - save: the extraction is written to SQL; a failure is retried, then
//     the document is dead-lettered and its file stays in incoming/;
//   - move: once every document of a file is saved (or failed) the file
//     moves from incoming/ to processed/; a failure is logged, and the
//     sweep moves it later;
//   - index: the document is written to the index; a failure is retried,
//     then logged and left to reconciliation, which compares SQL with the
//     index and repairs what is missing or stale.
//
// A document whose last attempt fails (or that is poison: not text) ends in
// the dead-letter store, and the sweep writes it to
// failed/{source}/{filename}/ with the original, error.json and
// metadata.json.
package pipeline
