// Package pipeline is weir's document-ingestion service, built on the job
// engine: documents dropped into incoming/ (plain text, Markdown, mbox
// archives split into one document per message) are parsed, extracted,
// saved in SQL, the source of truth, and indexed in a full-text index,
// each stage a job with its own attempts, backoff and time limit.
//
// # Ids and versions
//
// A file's job id (FileID) is SHA-256 of its container, path and ETag
// (the hash of its content), and is the idempotency key of its parse job:
// an event fired twice, or the same content copied in again, makes no
// second job. It names one version of the file.
//
// A document's id (DocumentID) is SHA-256 of its path and its part (an
// archive's message, "#n"): the same for every version of its file. A new
// version of a file at the same path is parsed as a job of its own, and
// in the transaction that records it replaces the documents of the older
// version in place, deletes those the new version lacks (an archive that
// lost a message) and supersedes the older version if it is still in
// flight; the index follows through the index jobs of that transaction.
// Versions are ordered by the file's status change time, then by the
// parse job's id: a stale job of an older version (a parse, an extraction
// or a save finishing after the newer version's) changes nothing, and a
// content that comes back after a newer one is parsed again, as the
// newest. Reconciliation also deletes the documents of replaced versions
// left by earlier releases, which gave every version documents of its
// own.
//
// # Write order and failures
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
// A document whose last attempt fails, or that is poison, ends in the
// dead-letter store, and the sweep writes it to failed/{source}/{filename}/
// with the original, error.json and metadata.json. Poison is refused at
// once, with its reason: a file the parser cannot read (not text, an
// unknown format), larger than Config.MaxFileSize (never read into
// memory), whose name is not UTF-8, or whose parse outlasts the parse
// stage's time limit; a document the extractor refuses, or one with a
// text SQL cannot hold (a NUL byte, invalid UTF-8: refused alone, the
// other messages of its archive going on, on SQLite and PostgreSQL
// alike).
//
// # Files
//
// The service reads and writes the data directory through an os.Root: no
// path leaves it. It opens the files of incoming/ without following
// symbolic links and checks that what it opened is the regular file its
// scan found, reached through folders only. Copies it makes of a file
// (Ingest's, and an archive's failed message) and the files it writes
// beside them are no more readable than the file.
package pipeline
