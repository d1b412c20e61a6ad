-- The claims never plan a sequential scan of weir_jobs. PL/pgSQL keeps a
-- statement's generic plan, once it has chosen one, for the session until
-- the table's statistics change, and with no ANALYZE (autovacuum off, or
-- not yet run on a new table) they never do: weir_claim_from's UPDATE of the ids it took, planned
-- generic while the table held a few pages, read the whole table at each
-- claim once it had grown (4.7 ms a claim of 20 jobs with 10,000 rows in
-- the table, on connections that planned it early, none on the others).
-- Every statement of the claims has an index to read instead. Runs with
-- search_path set to weir's schema.
ALTER FUNCTION weir_claim(timestamptz, text, bigint, text, timestamptz) SET enable_seqscan = off;
ALTER FUNCTION weir_claim_from(timestamptz, text, bigint, text, timestamptz, integer, timestamptz, bigint) SET enable_seqscan = off;
