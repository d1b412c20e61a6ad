// Package metrics is weir's Prometheus instrumentation: the collectors the
// job engine feeds through the hooks of [Metrics], and a scrape-time
// collector that reads job counts from the store.
//
// [New] registers everything on a prometheus.Registerer the caller passes
// in; weir never touches the global default registry. Every hook is cheap,
// safe for concurrent use, and a no-op on a nil *Metrics, so an engine
// built without metrics simply holds nil.
//
// # Metrics
//
// The retry_job_* names and their labels are those of weir's document
// retry policy spec, exactly, with no namespace prefix, so that its alert
// rules work unchanged; the spec's "collection" is weir's job kind. The
// weir_* names are weir's own.
//
//	name                                            type       labels                   meaning (hook)
//	weir_jobs_enqueued_total                        counter    kind, queue, outcome     inserts, by weirtype.InsertOutcome (Enqueued)
//	weir_job_attempt_duration_seconds               histogram  kind, queue, outcome     attempt durations, 5 ms to 10 min, by Outcome (AttemptDone)
//	weir_jobs_completed_total                       counter    kind, queue              attempts that completed their job (AttemptDone, Completed)
//	weir_jobs_failed_total                          counter    kind, queue              attempts that failed (AttemptDone, Failed)
//	weir_jobs_late_total                            counter    kind, queue              attempts that succeeded after the job's deadline (AttemptDone, Late)
//	weir_jobs_dead_lettered_total                   counter    kind, queue, reason      jobs abandoned, by weirtype.AbandonReason (DeadLettered)
//	weir_jobs_rescued_total                         counter    -                        expired leases taken back (Rescued)
//	retry_job_documents_requeued_total              counter    collection               stuck jobs the sweep requeued (Swept)
//	retry_job_documents_skipped_backoff_total       counter    collection               stuck jobs the sweep left to their backoff (Swept)
//	retry_job_documents_max_retries_exceeded_total  counter    collection               stuck jobs the sweep abandoned, out of attempts (Swept)
//	retry_job_runs_total                            counter    status                   sweep runs: success or failure (SweepRun)
//	retry_job_duration_seconds                      histogram  -                        sweep run durations (SweepRun)
//	retry_job_errors_total                          counter    error_type               failed sweep runs: timeout, cancelled or store (SweepRun)
//
// With [Options.Store] set, these are read from the store at scrape time
// (store.Executor.CountJobs, a scrape waiting for it at most
// [Options.ScrapeTimeout]; see Counts below):
//
//	name                        type   labels              meaning
//	weir_jobs                   gauge  queue, kind, state  jobs in each state (queue depth); every state of a queue and kind the store knows, zeros included
//	retry_job_stuck_documents   gauge  collection          jobs of the kind running, or due and waiting, for longer than Options.StuckAfter
//	retry_job_failed_documents  gauge  collection          jobs of the kind in state dead
//
// [NewBreakerCollector] returns a collector, registered separately, that
// reads circuit breakers (resilience/breaker) at scrape time:
//
//	name                               type   labels   meaning
//	weir_breaker_state                 gauge  breaker  0 closed, 1 half-open, 2 open
//	weir_breaker_failures              gauge  breaker  failures counted in the breaker's current period
//	weir_breaker_successes             gauge  breaker  successes counted in the breaker's current period
//	weir_breaker_consecutive_failures  gauge  breaker  the current run of failures
//	weir_breaker_rejected              gauge  breaker  calls refused while open or half-open
//
// The alert rules and the Grafana dashboard built on these names are in
// deploy/; their tests check every name they use against this package.
//
// retry_job_runs_total{status} and retry_job_errors_total{error_type} start
// at zero for each of their label values; the other labelled series appear
// at their first event (Swept adds zeros so that a sweep's series exist
// after its first run). Label values that are not valid UTF-8 are made
// valid rather than allowed to panic.
//
// # Counts
//
// The count reads every job the store keeps, finished ones included (24 h
// of completed jobs by default), so its cost grows with the table. A
// count that took 100 ms or more is not run again sooner than twenty
// times its duration after it began: the scrapes between serve its counts
// (a count of 2 s is at most 40 s old), and the database spends at most
// about a twentieth of one connection counting. A faster count runs at
// every scrape. One count runs at a time; a count that outlasts the
// scrape timeout goes on (for up to a minute, or the scrape timeout when
// longer) and its scrape serves the counts before it, so that a table
// grown past what one scrape can count still has its gauges.
//
// # Scrape errors
//
// When the store's count query fails, or outlasts the scrape timeout with
// no earlier counts to serve, the scrape-time collector reports the error
// as an invalid metric, so the registry's Gather returns it and the
// scrape fails visibly (promhttp answers 500 by default) instead of
// reporting zeros. The failure is not counted in
// retry_job_errors_total, which belongs to the stuck sweep: an alert on
// sweep errors should not fire because monitoring could not read the
// store.
package metrics
