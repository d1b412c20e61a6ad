package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/migration"
	"github.com/weirhq/weir/weirtype"
)

// TestLifecycleQueriesUseIndexes protects the lifecycle's efficiency: none
// of its statements reads weir_jobs, weir_dead_letters or
// weir_late_results from end to end, so each costs what it touches, not
// what the tables hold. (Listing dead letters by time alone may scan them
// in id order, stopping at its limit: the planner's choice, and a fair one
// for paging. Listing the pending late results walks a partial index of
// those alone. Releasing an owner's jobs and listing the stuck ones walk
// the running jobs through their partial index: rare queries, and final
// jobs, most of the table, are not in that index. CountJobs, which reads every job by
// design, is not here.) The hot statements use the index made for them:
// the claim the partial indexes of available and scheduled jobs, by
// queue; the writes to one held job, the heartbeat of a worker's leases
// and the completion of many look jobs up by id.
func TestLifecycleQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	s := migratedStore(t)
	// The statements that must look jobs up by id.
	const byID = "SEARCH weir_jobs USING INTEGER PRIMARY KEY (rowid=?)"
	lookUp := map[string]bool{"heartbeat": true, "complete": true, "complete many": true, "retry": true,
		"abandon": true, "snooze": true, "expire held": true, "late result": true, "accept late result": true,
		"retry a final job": true}
	// Steps the plans of the hot statements must have.
	want := map[string][]string{
		"claim": {
			"SEARCH weir_jobs USING COVERING INDEX weir_jobs_available (queue=?)",
			"SEARCH weir_jobs USING COVERING INDEX weir_jobs_scheduled (queue=?)",
		},
		"rescue":               {"SEARCH weir_jobs USING COVERING INDEX weir_jobs_lease_expiry (lease_expires_at<?)"},
		"expire deadlines":     {"SEARCH weir_jobs USING INDEX weir_jobs_deadline (deadline_at<?)"},
		"job by key":           {"SEARCH weir_jobs USING INDEX weir_jobs_idempotency_key (idempotency_key=?)"},
		"list jobs of a state": {"SEARCH weir_jobs USING INDEX weir_jobs_state (state=? AND id<?)"},
		"list jobs of states":  {"SEARCH weir_jobs USING INDEX weir_jobs_state (state=? AND id<?)"},
		"list jobs":            {"SEARCH weir_jobs USING INTEGER PRIMARY KEY (rowid<?)"},
		"list running jobs":    {"SCAN weir_jobs USING INDEX weir_jobs_lease_expiry"},
		"list waiting and running jobs": {
			"SEARCH weir_jobs USING INDEX weir_jobs_state (state=? AND id<?)",
			"SCAN weir_jobs USING INDEX weir_jobs_lease_expiry",
		},
	}
	// The partial indexes of jobs not final that a rare query may walk.
	walks := map[string][]string{
		"release": {"SCAN weir_jobs USING INDEX weir_jobs_lease_expiry"},
		"stuck":   {"SCAN weir_jobs USING INDEX weir_jobs_lease_expiry"},
		// weir_jobs_state holds no running job: they are listed from
		// their own partial index, as few as the workers, and sorted.
		"list running jobs":             {"SCAN weir_jobs USING INDEX weir_jobs_lease_expiry"},
		"list waiting and running jobs": {"SCAN weir_jobs USING INDEX weir_jobs_lease_expiry"},
		"pending late results":          {"SCAN weir_late_results USING INDEX weir_late_results_pending"},
		// The first page of every job: the rowid backwards, stopping at
		// the limit.
		"list jobs from the newest": {"SCAN weir_jobs"},
	}
	listJobs := func(f store.JobFilter) (string, []any) {
		f, err := f.Normalize()
		if err != nil {
			t.Fatal(err)
		}
		return listJobsQuery(f)
	}
	oneState, oneStateArgs := listJobs(store.JobFilter{States: []weirtype.State{weirtype.StateDead}, Before: 10, Kinds: []string{"k"}})
	states, statesArgs := listJobs(store.JobFilter{States: []weirtype.State{weirtype.StateDead, weirtype.StateCompleted}, Before: 10})
	running, runningArgs := listJobs(store.JobFilter{States: []weirtype.State{weirtype.StateRunning}, Before: 10})
	active, activeArgs := listJobs(store.JobFilter{Kinds: []string{"k"}, Before: 10,
		States: []weirtype.State{weirtype.StateAvailable, weirtype.StateScheduled, weirtype.StateRunning}})
	all, allArgs := listJobs(store.JobFilter{Before: 10, Queue: "q"})
	newest, newestArgs := listJobs(store.JobFilter{})
	queries := []struct {
		name, sql string
		args      []any
	}{
		{"job by key", jobByKey, []any{"key"}},
		{"claim", claimJobs, []any{1, "w", 2, "q", 10}},
		{"heartbeat", heartbeatJobs, []any{1, `[[1,"w",1],[2,"w",1]]`}},
		{"complete", completeJob, []any{1, 1, "w", 1}},
		{"complete many", completeJobs, []any{1, `[[1,"w",1],[2,"w",1]]`}},
		{"retry", retryJob, []any{1, 1, "w", 1, "{}", "available", 1}},
		{"abandon", abandonJob, []any{1, 1, "w", 1, "{}"}},
		{"dead letters", insertDeadLetter, []any{"non_retryable", 1, "[1]"}},
		{"snooze", snoozeJob, []any{1, 1, "w", 1, "scheduled", 2}},
		{"cancel", cancelJob, []any{1, 1}},
		{"rescue", rescueExpired, []any{1, "at", 10, "lease_expired"}},
		{"release", releaseOwned, []any{1, 1, "at", "m", "w", "released"}},
		{"list by kind", "SELECT " + deadLetterColumns + " FROM weir_dead_letters WHERE kind = ? ORDER BY id", []any{"k"}},
		{"list by reason", "SELECT " + deadLetterColumns + " FROM weir_dead_letters WHERE reason = ? ORDER BY id", []any{"non_retryable"}},
		{"requeue by ids", requeueJobs(" WHERE id IN (SELECT value FROM json_each(?))"), []any{1, 1, "{}", "[1]"}},
		{"requeue by kind", requeueJobs(" WHERE kind = ?"), []any{1, 1, "{}", "k"}},
		{"purge by reason", purgeJobs(" WHERE reason = ?"), []any{"non_retryable"}},
		{"requeue's delete", "DELETE FROM weir_dead_letters" + and(" WHERE kind = ?", "job_id IN (SELECT value FROM json_each(?))"), []any{"k", "[1]"}},
		{"expire deadlines", expireDeadlines, []any{1, "at", 10}},
		{"expire held", expireHeld, []any{1, "at", 1}},
		{"late result", insertLateResult, []any{1, 1}},
		{"accept late result", acceptLateJob, []any{1, 1, 1, "w"}},
		{"accept's delete", "DELETE FROM weir_dead_letters WHERE job_id = ?", []any{1}},
		{"late results of a job", "SELECT " + lateResultColumns + " FROM weir_late_results WHERE job_id = ? ORDER BY id", []any{1}},
		{"late results by kind", "SELECT " + lateResultColumns + " FROM weir_late_results WHERE kind = ? ORDER BY id", []any{"k"}},
		{"pending late results", "SELECT " + lateResultColumns + " FROM weir_late_results WHERE accepted_at IS NULL ORDER BY id", nil},
		{"stuck", listStuck, []any{1, 10}},
		{"list jobs of a state", oneState, oneStateArgs},
		{"list jobs of states", states, statesArgs},
		{"list running jobs", running, runningArgs},
		{"list waiting and running jobs", active, activeArgs},
		{"list jobs", all, allArgs},
		{"list jobs from the newest", newest, newestArgs},
		{"retry a final job", retryFinalJob, []any{1, "{}", 1, "dead"}},
	}
	for _, q := range queries {
		steps := want[q.name]
		if lookUp[q.name] {
			steps = append(steps, byID)
		}
		checkPlan(t, s, q.name, q.sql, q.args, func(step string) bool { return slices.Contains(walks[q.name], step) }, steps...)
	}
}

// TestRetentionQueriesUseTheirIndex: the retention sweep's statements read
// weir_jobs_finalized (the finished jobs of a kind, by finalized_at), so a
// batch costs the rows it deletes and listing the kinds one probe each,
// whatever the table holds; none scans the table.
func TestRetentionQueriesUseTheirIndex(t *testing.T) {
	t.Parallel()
	s := migratedStore(t)
	walks := func(step string) bool {
		return !strings.HasPrefix(step, "SCAN weir_jobs") || strings.Contains(step, "weir_jobs_finalized")
	}
	checkPlan(t, s, "purge", purgeFinalJobs, []any{"k", 1, 1000}, walks, "SEARCH weir_jobs USING INDEX weir_jobs_finalized (kind=? AND finalized_at<?)")
	checkPlan(t, s, "kinds", finalJobKinds, nil, walks, "SEARCH weir_jobs USING INDEX weir_jobs_finalized (kind>?)")
	checkPlan(t, s, "lease", takeSweepLease, []any{"retention", "p", 2, 1}, walks)
}

// checkPlan checks SQLite's plan of the statement q, named name, with
// args: no step scans a weir_ table unless walks allows the step, and
// every step of want is in it.
func checkPlan(t *testing.T, s *Store, name, q string, args []any, walks func(step string) bool, want ...string) {
	t.Helper()
	plan := queryPlan(t, s, name, q, args...)
	for _, step := range plan {
		if strings.HasPrefix(step, "SCAN weir_") && !walks(step) {
			t.Errorf("%s scans a table:\n%s", name, strings.Join(plan, "\n"))
		}
	}
	for _, step := range want {
		if !slices.Contains(plan, step) {
			t.Errorf("%s does not %s:\n%s", name, step, strings.Join(plan, "\n"))
		}
	}
	t.Logf("%s:\n\t%s", name, strings.Join(plan, "\n\t"))
}

// queryPlan returns the steps of SQLite's plan of the statement q, named
// name, with args.
func queryPlan(t *testing.T, s *Store, name, q string, args ...any) []string {
	t.Helper()
	rows, err := s.write.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return plan
}

// TestHotStatementsArePreparedOnceMigrated: before Migrate the statements
// cannot be prepared, and calls fail as they would anyway; the first write
// after it prepares them all, and the lifecycle then runs on them, in the
// store's transactions and in a caller's.
func TestHotStatementsArePreparedOnceMigrated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t)
	now := time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)
	claim := store.ClaimParams{Now: now, Limit: 1, Owner: "w", LeaseFor: time.Minute}
	if _, err := s.Executor().Claim(ctx, claim); err == nil || !strings.Contains(err.Error(), "no such table") {
		t.Fatalf("claim before Migrate: %v", err)
	}
	if m := s.stmts.stmts.Load(); m != nil {
		t.Fatalf("%d statements cached before Migrate", len(*m))
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Executor().Insert(ctx, now, []store.InsertParams{{Kind: "k"}, {Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	if m := s.stmts.stmts.Load(); m == nil || len(*m) != len(hotQueries) {
		t.Fatalf("statements cached after a write: %v, want %d", m, len(hotQueries))
	}
	jobs, err := s.Executor().Claim(ctx, claim)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v, %v", jobs, err)
	}
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := s.Tx(tx).Complete(ctx, now, store.LeaseOf(jobs[0])); err != nil {
		t.Fatalf("complete in a caller's transaction: %v", err)
	}
	if more, err := s.Tx(tx).Claim(ctx, claim); err != nil || len(more) != 1 {
		t.Fatalf("claim in a caller's transaction: %v, %v", more, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Executor().Claim(ctx, claim); err == nil || errors.Is(err, store.ErrInvalid) {
		t.Fatalf("claim after Close: %v, want the closed database's error", err)
	}
}

// The migration that gives a store its identity, run on a store whose
// outbox already holds messages (a weir upgraded), records the highest
// outbox id, so that those messages keep the broker ids they may have been
// published with.
func TestStoreIdentityMigrationKeepsOlderMessagesIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migratedStore(t)
	now := time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)
	ids, err := s.Executor().AddOutbox(ctx, now, []store.OutboxMessage{{Topic: "t"}, {Topic: "t"}, {Topic: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := s.Executor().OutboxIdentity(ctx)
	if err != nil || fresh.LegacyThrough != 0 {
		t.Fatalf("identity of a store made by this weir: %+v, %v; want no legacy messages", fresh, err)
	}
	for _, q := range []string{"DROP TABLE weir_store_identity", migrationSQL(t, "store_identity")} {
		if _, err := s.DB().ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	upgraded, err := s.Executor().OutboxIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if upgraded.LegacyThrough != ids[2] || upgraded.StoreID == fresh.StoreID || len(upgraded.StoreID) != 16 {
		t.Fatalf("identity made over 3 messages: %+v (before: %+v); want legacy through %d and a new id", upgraded, fresh, ids[2])
	}
}

// The migration that widens the dead letters' reasons makes their table
// again: every row keeps its id and fields, and ids go on from the highest
// ever given, never reusing one.
func TestReasonMigrationKeepsDeadLettersAndTheirIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migratedStore(t)
	ex := s.Executor()
	now := time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)
	abandon := func(key string) *weirtype.DeadLetter {
		t.Helper()
		if _, err := ex.Insert(ctx, now, []store.InsertParams{{Kind: "k", IdempotencyKey: key}}); err != nil {
			t.Fatal(err)
		}
		js, err := ex.Claim(ctx, store.ClaimParams{Now: now, Limit: 1, Owner: "w", LeaseFor: time.Minute})
		if err != nil || len(js) != 1 {
			t.Fatalf("claim: %v, %v", js, err)
		}
		e := weirtype.AttemptError{Attempt: 1, At: now, Message: "boom " + key, Type: "test"}
		if _, err := ex.Fail(ctx, store.FailParams{Now: now, Lease: store.LeaseOf(js[0]), Error: e, Abandon: weirtype.AbandonPermanent}); err != nil {
			t.Fatal(err)
		}
		dls, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{JobID: js[0].ID})
		if err != nil || len(dls) != 1 {
			t.Fatalf("dead letters of job %d: %v, %v", js[0].ID, dls, err)
		}
		return dls[0]
	}
	a, b := abandon("a"), abandon("b")
	// The highest id is purged, so only AUTOINCREMENT's counter remembers it.
	if n, err := ex.PurgeDeadLetters(ctx, store.DeadLetterFilter{IDs: []int64{b.ID}}); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	if _, err := s.DB().ExecContext(ctx, migrationSQL(t, "retry_after_reason")); err != nil {
		t.Fatalf("migration again: %v", err)
	}
	got, err := ex.GetDeadLetter(ctx, a.ID)
	if err != nil || got.JobID != a.JobID || got.LastError != a.LastError || got.Reason != a.Reason || !got.FailedAt.Equal(a.FailedAt) {
		t.Fatalf("dead letter after the migration: %+v, %v; want %+v", got, err, a)
	}
	c := abandon("c")
	if c.ID <= b.ID {
		t.Fatalf("dead letter made after the migration has id %d, not above the highest given before (%d)", c.ID, b.ID)
	}
}

// openStore returns a store, not yet migrated, on a file in the test's
// temporary directory, closed when the test ends.
func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), Config{Path: filepath.Join(t.TempDir(), "weir.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// migratedStore is openStore's store, migrated.
func migratedStore(t *testing.T) *Store {
	t.Helper()
	s := openStore(t)
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// migrationSQL returns the SQL of the migration named name.
func migrationSQL(t *testing.T, name string) string {
	t.Helper()
	ms, err := migration.Load(migrationFS, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Name == name {
			return m.SQL
		}
	}
	t.Fatalf("no %s migration", name)
	return ""
}
