package sqlite

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestRetentionQueriesUseTheirIndex: the retention sweep's statements read
// weir_jobs_finalized (the finished jobs of a kind, by finalized_at), so a
// batch costs the rows it deletes and listing the kinds one probe each,
// whatever the table holds; none scans the table.
func TestRetentionQueriesUseTheirIndex(t *testing.T) {
	t.Parallel()
	s := migratedStore(t)
	for _, q := range []struct {
		name, sql string
		args      []any
		want      string
	}{
		{"purge", purgeFinalJobs, []any{"k", 1, 1000}, "SEARCH weir_jobs USING INDEX weir_jobs_finalized (kind=? AND finalized_at<?)"},
		{"kinds", finalJobKinds, nil, "SEARCH weir_jobs USING INDEX weir_jobs_finalized (kind>?)"},
		{"lease", takeSweepLease, []any{"retention", "p", 2, 1}, ""},
	} {
		plan := queryPlan(t, s, q.name, q.sql, q.args...)
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN weir_jobs") && !strings.Contains(step, "weir_jobs_finalized") {
				t.Errorf("%s scans the jobs table:\n%s", q.name, strings.Join(plan, "\n"))
			}
		}
		if q.want != "" && !slices.Contains(plan, q.want) {
			t.Errorf("%s does not %s:\n%s", q.name, q.want, strings.Join(plan, "\n"))
		}
		t.Logf("%s:\n\t%s", q.name, strings.Join(plan, "\n\t"))
	}
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
