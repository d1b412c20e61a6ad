// Package ui is weir's operator console: a single-page web UI embedded in
// the binary (plain HTML, CSS and JavaScript; no CDN, no external fonts or
// scripts) that calls the JSON API (/api/status, /metrics) and the admin
// API (/api/admin/) with fetch. New returns a plain http.Handler that
// serves it under /ui/ (mount it there); Redirect sends "/" to it.
//
// Pages, as hash routes of /ui/:
//
//	#/overview          jobs by state, throughput and dead letters over time
//	                    (sampled every few seconds in the browser), breakers,
//	                    stuck work, outbox backlog
//	#/jobs              jobs filtered by state, kind and queue, paged; a
//	                    job's detail with its error history, retry and cancel
//	#/dead-letters      dead letters filtered by kind, queue and reason,
//	                    paged; detail; requeue and purge by selection or by
//	                    the filter
//	#/workflows         workflows and a workflow's state history
//	#/reindex           start a reconciliation and follow its progress
//
// With WEIR_ADMIN_TOKEN set on the server, the page asks for the token
// once, keeps it in sessionStorage and sends it as "Authorization: Bearer".
//
// # Caching
//
// index.html and the assets are answered with a strong ETag (a digest of
// their content) and "Cache-Control: no-cache": the browser keeps them and
// revalidates each load, getting 304 until the binary changes. Every answer
// carries a Content-Security-Policy that allows only the page's own origin.
package ui
