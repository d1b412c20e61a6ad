-- Listing jobs by state keeps no entry for running jobs. Every claim
-- moved a job's entry in weir_jobs_state to the running state and every
-- completion moved it on: two of the index writes of a job's life, for a
-- state whose jobs are as few as the workers and are listed from
-- weir_jobs_lease_expiry (running jobs alone) instead. A listing of
-- states without the running one says so (state <> 'running'), the term
-- SQLite needs to see in a query to read a partial index.
DROP INDEX weir_jobs_state;
CREATE INDEX weir_jobs_state ON weir_jobs (state, id) WHERE state <> 'running';
