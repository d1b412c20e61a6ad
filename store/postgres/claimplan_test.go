package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/internal/testenv"
)

// Claim's subquery must read weir_jobs_claim, a partial index, in the
// claim's order: its state test has to imply the index's predicate, and
// its ORDER BY has to follow the index's columns. Sequential scans are
// off so that the planner's choice on a small table cannot hide a query
// that no longer fits the index.
func TestClaimReadsTheClaimIndexInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, Config{URL: testenv.Postgres(t), Schema: "weirtest_" + hex.EncodeToString(b), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	t.Cleanup(func() {
		if _, err := s.pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{s.schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", s.schema, err)
		}
	})
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)
	rows, err := tx.Query(ctx, "EXPLAIN (COSTS OFF) "+s.sql.claim, now, "default", 10, "w", now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if !strings.Contains(plan, "Index Scan using weir_jobs_claim") || strings.Contains(plan, "Sort") {
		t.Fatalf("claim does not read weir_jobs_claim in order:\n%s", plan)
	}
}

// ExpireDeadlines reads weir_jobs_deadline, and ListStuck weir_jobs_claim
// and weir_jobs_lease, so that neither reads jobs that are final or have no
// deadline; an
// insert's wake reads each of its keys' jobs with one probe of the key's
// index (a subplan), never the backlog in weir_jobs_claim. (An earlier
// wake, which read the keys' jobs with a condition on state, read every
// waiting job from weir_jobs_claim on each insert once the table's
// statistics were stale; an empty table does not show that plan, so this
// checks the shape that rules it out.)
func TestSweepsAndWakesReadTheirIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, Config{URL: testenv.Postgres(t), Schema: "weirtest_" + hex.EncodeToString(b), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	t.Cleanup(func() {
		if _, err := s.pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{s.schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", s.schema, err)
		}
	})
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)
	for _, c := range []struct {
		name, sql, index string
		args             []any
	}{
		{"expire deadlines", s.sql.expire, "weir_jobs_deadline", []any{now, "t", now, 10}},
		{"list stuck", s.sql.listStuck, "weir_jobs_claim", []any{now, 10}},
		{"list stuck", s.sql.listStuck, "weir_jobs_lease", []any{now, 10}},
		{"wake", s.sql.wake, "weir_jobs_idempotency_key", []any{[]string{"default"}, []string{"key"}}},
	} {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
			t.Fatal(err)
		}
		rows, err := tx.Query(ctx, "EXPLAIN (COSTS OFF) "+c.sql, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		_ = tx.Rollback(ctx)
		if err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(lines, "\n")
		reads := strings.Contains(plan, "Index Scan using "+c.index) || strings.Contains(plan, "Index Only Scan using "+c.index) ||
			strings.Contains(plan, "Bitmap Index Scan on "+c.index)
		if !reads || strings.Contains(plan, "Seq Scan") || (c.name != "list stuck" && strings.Contains(plan, "weir_jobs_claim")) {
			t.Errorf("%s does not read %s:\n%s", c.name, c.index, plan)
		}
		if c.name == "wake" && !strings.Contains(plan, "SubPlan") {
			t.Errorf("wake does not read each key's job on its own:\n%s", plan)
		}
	}
}
