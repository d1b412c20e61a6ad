-- Listing jobs for operators (ListJobs, "weir jobs list"): the jobs of a
-- state, newest first, paged by id. id is the rowid, which every index
-- ends with already; naming it says what the index is for. Unlike the
-- partial indexes of 0004_claim_indexes.sql it holds every job, completed
-- ones too, so a claim and a completion each rewrite one more index entry:
-- the price of listing the completed, cancelled or dead jobs without
-- reading the whole table. A listing without a state walks the rowid
-- backwards instead.
CREATE INDEX weir_jobs_state ON weir_jobs (state, id);
