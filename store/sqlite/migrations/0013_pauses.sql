-- Pauses: the queues, and kinds within queues, whose waiting jobs the
-- claim skips. kind '' is the whole queue. cause is what holds it: an
-- operator (until resumed), a kind's open breaker (until its probe
-- succeeds; until_at is when the next probe may run, open_for the
-- microseconds it is held after each probe taken, probe_job the job last
-- taken as the probe), or a server's Retry-After (until until_at). Times
-- are INTEGER microseconds since the Unix epoch, UTC.
CREATE TABLE weir_pauses (
    queue     TEXT    NOT NULL CHECK (queue <> ''),
    kind      TEXT    NOT NULL DEFAULT '',
    cause     TEXT    NOT NULL CHECK (cause IN ('operator', 'breaker', 'retry_after')),
    paused_by TEXT    NOT NULL DEFAULT '',
    reason    TEXT    NOT NULL DEFAULT '',
    paused_at INTEGER NOT NULL,
    until_at  INTEGER,
    open_for  INTEGER NOT NULL DEFAULT 0 CHECK (open_for >= 0),
    probe_job INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, kind, cause)
) WITHOUT ROWID;

-- The claim reads each waiting job's kind, to skip those a pause holds:
-- the claim indexes carry it, so that the claim still reads them alone,
-- not the table, for each job it passes.
DROP INDEX weir_jobs_available;
DROP INDEX weir_jobs_scheduled;
CREATE INDEX weir_jobs_available ON weir_jobs (queue, priority DESC, scheduled_at, id, kind)
    WHERE state = 'available';
CREATE INDEX weir_jobs_scheduled ON weir_jobs (queue, priority DESC, scheduled_at, id, kind)
    WHERE state = 'scheduled';
