-- The job table is vacuumed at full speed: autovacuum_vacuum_cost_delay 0
-- on weir_jobs, for the server's autovacuum and for the vacuum weir runs
-- where autovacuum is off (Store.VacuumJobs takes the table's own pace
-- first). At autovacuum's default pace (2 ms of sleep every 200 cost
-- units) a pass over a job table held full took 80 to 190 s, most of it
-- asleep, while the claims and completions beside it left dead rows
-- faster than it removed them: after ten minutes at 15,000 jobs/s the
-- table held 7.2 million dead rows in 10.3 GB, and the rate swung
-- between 0.89 and 1.07 of the first minute's with the passes. At full
-- speed each pass took 10 to 16 s, the table held 3.2 million dead rows
-- in 6.6 GB, and every minute ran within 0.92 to 1.03 of the first. A
-- slower pace (5 ms) did worse: 0.83 to 0.95.
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
