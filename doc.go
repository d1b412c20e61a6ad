// Package weir is a durable pipeline engine for Go: work that was accepted is
// never lost and never repeats a side effect.
//
// This root package is the job engine's public API. A job kind is a Go type
// with a Kind method ([JobArgs]); its value, as JSON, is the job's payload.
// A [Worker] for the kind is registered, with its policy ([KindConfig]:
// attempts, backoff, TTL, per-attempt timeout, deadline, queue), in a [Workers]
// registry, and a [Client] on a store (store/sqlite, the embedded default,
// or store/postgres) inserts jobs and runs them:
//
//   - [Client.Insert], [Client.InsertMany] and, inside the caller's own
//     transaction, [Client.InsertTx], with idempotency keys whose outcome
//     (inserted, duplicate, reclaimed) is reported;
//   - a producer per queue claims jobs up to its free worker slots, under a
//     lease the client's heartbeat extends; a worker whose lease is lost, or
//     whose job is cancelled, has its context cancelled;
//   - a worker's error decides what follows: nil completes the job,
//     [JobSnooze] runs it later without using an attempt, an error marked
//     with retry.Permanent sends it to the dead-letter store at once, any
//     other error (or a panic) is retried after the kind's backoff raised
//     to the error's retry.After hint in full (never sooner than the hint;
//     a hint past [KindConfig.MaxRetryAfter], the TTL or the deadline
//     abandons the job at once), until the attempts are spent or the TTL
//     would pass;
//   - jobs of crashed processes are rescued when their leases expire, and a
//     restarted process with the same [Config.ID] takes its own back at
//     once, as a client does after a claim whose reply was lost;
//     [Client.Stop] waits for running jobs, then gives back the rest; an
//     insert of a running job's key never reclaims it while its lease is
//     alive;
//   - the dead-letter store: [Client.ListDeadLetters],
//     [Client.GetDeadLetter], [Client.RequeueDeadLetters] and
//     [Client.PurgeDeadLetters], filtered by job id, kind, queue, reason
//     and age ([DeadLetterFilter]);
//   - periodic jobs ([Config.Periodic], [PeriodicJob]) on interval or cron
//     schedules ("every 15 minutes", "daily at 02:00"): each tick is
//     inserted with an idempotency key made of the job's name and the tick
//     time, so however many clients run, and across restarts, one job is
//     made per tick;
//   - deadlines ([KindConfig.SLA]): past its deadline an unfinished job is
//     abandoned with reason deadline_exceeded, and a success that comes
//     after it is kept as a late result ([Client.LateResults]) that only an
//     operator's [Client.AcceptLateResult] applies;
//   - the stuck sweep ([Client.SweepStuck], every [Config.SweepEvery])
//     takes back attempts that hang past [Config.StuckAfter] once their
//     backoff allows, abandons those on their last attempt, and counts
//     both;
//   - on PostgreSQL, LISTEN/NOTIFY wakes every client's workers when a job
//     is inserted anywhere; polling ([Config.PollEvery]) is the fallback;
//   - [Config.Metrics] receives counts of inserts, attempts, dead
//     letters and sweeps through the small [Metrics] interface, which
//     [github.com/weirhq/weir/metrics] implements on the caller's
//     Prometheus registry (the engine itself imports no metrics library);
//     logs go to [Config.Logger] at INFO for retries, WARN as a
//     job nears its last attempt or its TTL, ERROR for dead letters.
//
// The client does not migrate the store: call its Migrate first. Time comes
// from [Config.Clock], so every decision (leases, backoff, timeouts, polls)
// can be tested on a fake clock.
//
// Beside the engine, weir provides its resilience layer:
//
//   - [github.com/weirhq/weir/resilience]: running a call under several
//     policies in a stated order;
//   - [github.com/weirhq/weir/resilience/backoff], retry, breaker, budget,
//     timeout and transport: the policies themselves;
//   - [github.com/weirhq/weir/clock]: the injected clock that lets every
//     time-dependent policy be tested without sleeping.
package weir
