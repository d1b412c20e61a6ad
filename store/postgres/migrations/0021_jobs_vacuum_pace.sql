-- The job table is vacuumed at full speed: autovacuum_vacuum_cost_delay 0
-- on weir_jobs, for the server's autovacuum and for the vacuum weir runs
-- where autovacuum is off (Store.VacuumJobs takes the table's own pace
-- first). At autovacuum's default pace (a 2 ms sleep every 200 cost
-- units) a pass over a job table held full took 80 to 190 s, asleep most
-- of it, while the claims and completions beside it left dead rows
-- faster than it removed them: after ten minutes at 15,000 jobs/s the
-- table held 7.2 million dead rows in 10.3 GB. Without the sleeps each
-- pass took 5 to 16 s, and four runs of the same ten minutes ended with
-- 1.5 to 3.2 million dead rows in 5.6 to 6.7 GB, at the same rate over
-- the run. A slower pace (5 ms) was slower in every minute.
--
-- A pace an operator set on the table already is kept.
DO $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_class AS c, pg_options_to_table(c.reloptions) AS o
        WHERE c.oid = 'weir_jobs'::regclass AND o.option_name = 'autovacuum_vacuum_cost_delay'
    ) THEN
        ALTER TABLE weir_jobs SET (autovacuum_vacuum_cost_delay = 0);
    END IF;
END
$$;
