-- Listing jobs for operators (ListJobs, "weir jobs list"). Runs with
-- search_path set to weir's schema.

-- The jobs of a state, newest first, paged by id (id < the cursor): one
-- ordered index scan, read backwards, that stops at the page's limit.
-- Unlike weir_jobs_claim it holds every job, the finished ones too, so a
-- claim and a completion each write one more index entry: the price of
-- listing the completed, cancelled or dead jobs without reading the whole
-- table. A listing without a state reads the primary key backwards.
CREATE INDEX weir_jobs_state ON weir_jobs (state, id);
