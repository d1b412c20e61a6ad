// Package admin is weir's admin API: a JSON interface for operators over
// the store, the circuit breakers and the ingestion service's
// reconciliation, returned by New as a plain http.Handler that serves the
// paths under /api/admin/ (mount it there).
//
//	GET  /api/admin/jobs                      jobs, newest first, filtered; keyset pages (before)
//	GET  /api/admin/jobs/{id}                 a job with its error history, progress and output
//	POST /api/admin/jobs/{id}/retry           run a job again (store.Operator.RetryJob)
//	POST /api/admin/jobs/{id}/cancel          cancel a job
//	POST /api/admin/jobs/retry                retry jobs by id, {"ids": [...]}
//	POST /api/admin/jobs/cancel               cancel jobs by id, {"ids": [...]}
//	GET  /api/admin/dead-letters              dead letters, oldest first, filtered; pages (after)
//	GET  /api/admin/dead-letters/{id}         a dead letter (deadletter.Record)
//	GET  /api/admin/dead-letters/export       the matching dead letters as JSON Lines
//	POST /api/admin/dead-letters/requeue      requeue by {"ids": [...]} or {"filter": {...}, "confirm": true}
//	POST /api/admin/dead-letters/purge        purge by {"ids": [...]} or {"filter": {...}, "confirm": true}
//	GET  /api/admin/breakers                  every breaker's state and counts
//	GET  /api/admin/breakers/{name}           one breaker
//	POST /api/admin/breakers/{name}/open      trip it open by hand
//	POST /api/admin/breakers/{name}/close     close (reset) it by hand
//	GET  /api/admin/workflows                 workflows by id, filtered; pages (after)
//	GET  /api/admin/workflows/{id}            a workflow with its state history
//	GET  /api/admin/outbox                    the outbox backlog: pending count and oldest age
//	POST /api/admin/reindex                   start a reconciliation (202)
//	GET  /api/admin/reindex                   the latest reconciliation runs and their progress
//	GET  /api/admin/stuck                     running jobs past a threshold, and counts by queue, kind and state
//
// # Authentication
//
// With Config.Token set, every request under /api/admin/, a 404 included,
// must carry "Authorization: Bearer <token>"; any other gets 401. The
// token is compared in constant time (crypto/subtle, over SHA-256 digests
// so that neither its content nor its length leaks through timing).
// Without a token the API is open: the CLI serves it so only on a loopback
// address, and the handler then answers 403 to a request whose Host is not
// a loopback IP or localhost (DNS rebinding).
//
// Protect gives the same defence to the handlers served beside the admin
// API (weir run's read API, its metrics, the console's files): without a
// token only a loopback Host is answered; with tokens, one must be sent.
//
// Against a hostile page in the operator's browser (CSRF), every POST must
// send Content-Type: application/json, with a body or without, or gets
// 415; and an unsafe cross-origin browser request gets 403
// (http.CrossOriginProtection).
//
// # Errors and limits
//
// Every error is JSON, {"error": "..."}. A bad request gets a 4xx that
// names the problem, never a 500: 400 for a bad parameter (an unknown
// parameter or state, a malformed id, time or cursor, a time before 1970,
// a limit out of range, a key given twice in a body), 401 without the token, 403 as above, 404 for an unknown path or a missing
// job, dead letter, workflow or breaker, 405 (with Allow) for a known path
// asked with another method, 409 for an operation the object's state
// refuses (retrying a running job, cancelling a finished one), 413 for a
// body over Config.MaxBodyBytes (default 1 MiB), 415 for a POST without
// Content-Type: application/json. A store's refusal of a parameter is a
// 400 saying only "invalid parameter", its text logged. A failure on the server's side is a 500 whose body says only
// "internal error"; the error goes to Config.Logger. A request whose
// client went away (a cancelled request, a broken pipe) is logged at debug
// level: it is no failure of the server's.
//
// Lists return at most limit items (default 50, at most 500) and a cursor
// to the next page, null on the last one: next_before for jobs (ids
// descend), next_after for dead letters and workflows (ids ascend). Bulk
// operations by id take at most 500 ids and answer per id.
package admin
