package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weirhq/weir/internal/testenv"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/migration"
	"github.com/weirhq/weir/weirtype"
)

// A claim reads only about as many jobs as it takes, however many wait and
// whatever the table's statistics say. Right after a bulk insert the
// statistics say the table is empty, and a planner trusting them read
// every waiting job with a bitmap scan and sorted them (40 ms a claim with
// 90,000 waiting); weir_claim reads weir_jobs_claim in order and stops at
// the limit. The bound on the pages a claim of 10 touches is far below the
// pages the waiting jobs fill.
func TestClaimReadsFewPagesAfterABulkInsert(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migratedStore(t)
	const waiting = 30_000
	insertJobs(t, s, waiting)
	var heapPages int
	if err := s.pool.QueryRow(ctx, "SELECT pg_relation_size($1::regclass) / current_setting('block_size')::int",
		s.schema+".weir_jobs").Scan(&heapPages); err != nil {
		t.Fatal(err)
	}
	ex := newClaimExplainer(t, s)
	if pages, temp, plan := ex.claim(nil); pages > heapPages/2 || temp > 0 {
		t.Fatalf("a claim of 10 of %d waiting jobs touched %d pages (the table has %d) and %d temporary blocks:\n%s",
			waiting, pages, heapPages, temp, plan)
	} else {
		t.Logf("a claim of 10 of %d waiting jobs touched %d of the table's %d pages", waiting, pages, heapPages)
	}
}

// A claim from a hint passes over the entries the jobs claimed before it
// left at the head of weir_jobs_claim, which a claim from the head reads
// again until a VACUUM, and while a snapshot older than them is held (a
// long REPEATABLE READ reader) reads with a visit to each one's row: with
// 20,000 jobs claimed ahead of it, a claim of 10 from the head touches
// the pages of all their rows and index entries (about 600 here, of which
// some 200 are the claim's own writes), one from the hint fewer than half
// as many.
func TestClaimFromAHintPassesOverTheClaimedHead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migratedStore(t)
	const claimed = 20_000
	insertJobs(t, s, claimed+1000)
	reader, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reader.Rollback(ctx) }()
	if _, err := reader.Exec(ctx, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Exec(ctx, "SELECT count(*) FROM "+s.schema+".weir_jobs"); err != nil {
		t.Fatal(err)
	}
	var first *weirtype.Job
	for range claimed / 500 {
		jobs, err := s.Executor().Claim(ctx, store.ClaimParams{Now: now, Limit: 500, Owner: "w", LeaseFor: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		first = jobs[0]
	}
	ex := newClaimExplainer(t, s)
	head, _, _ := ex.claim(nil)
	hinted, _, _ := ex.claim(first)
	if hinted*2 >= head {
		t.Fatalf("a claim of 10 touched %d pages from the hint and %d from the head; want fewer than half from the hint", hinted, head)
	}
	t.Logf("a claim of 10 behind %d claimed jobs touched %d pages from the head, %d from the hint", claimed, head, hinted)
}

// insertJobs inserts n jobs (a multiple of 1,000) of kind k in the default
// queue at now.
func insertJobs(t *testing.T, s *Store, n int) {
	t.Helper()
	batch := make([]store.InsertParams, 1000)
	for i := range batch {
		batch[i] = store.InsertParams{Kind: "k"}
	}
	for range n / len(batch) {
		if _, err := s.Executor().Insert(context.Background(), now, batch); err != nil {
			t.Fatal(err)
		}
	}
}

// claimExplainer explains claims of 10 jobs of the default queue on one
// connection, each in a transaction rolled back, so that it takes nothing.
type claimExplainer struct {
	t    *testing.T
	s    *Store
	conn *pgxpool.Conn
}

// newClaimExplainer acquires the connection and claims from another
// queue on it: weir_claim and weir_claim_from are PL/pgSQL, and the first
// call of each on a connection compiles it, reading the catalogs.
func newClaimExplainer(t *testing.T, s *Store) *claimExplainer {
	t.Helper()
	conn, err := s.pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	ex := &claimExplainer{t: t, s: s, conn: conn}
	ex.run("elsewhere", nil)
	ex.run("elsewhere", &weirtype.Job{ID: 1, ScheduledAt: now})
	return ex
}

// claim explains a claim of 10 from the head, or from the hint of job
// from, and returns the pages it touched, its temporary blocks and the
// plan.
func (ex *claimExplainer) claim(from *weirtype.Job) (pages, temp int, plan string) {
	plan = ex.run("default", from)
	var parsed []struct {
		Plan struct {
			Hit     int `json:"Shared Hit Blocks"`
			Read    int `json:"Shared Read Blocks"`
			TempIn  int `json:"Temp Read Blocks"`
			TempOut int `json:"Temp Written Blocks"`
		} `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(plan), &parsed); err != nil || len(parsed) != 1 {
		ex.t.Fatalf("explain output %s: %v", plan, err)
	}
	p := parsed[0].Plan
	return p.Hit + p.Read, p.TempIn + p.TempOut, plan
}

func (ex *claimExplainer) run(queue string, from *weirtype.Job) string {
	ex.t.Helper()
	ctx := context.Background()
	sql, args := ex.s.sql.claim, []any{now, queue, 10, "w", now.Add(time.Minute)}
	if from != nil {
		sql, args = ex.s.sql.claimFrom, append(args, from.Priority, from.ScheduledAt, from.ID)
	}
	tx, err := ex.conn.Begin(ctx)
	if err != nil {
		ex.t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var plan string
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
		ex.t.Fatal(err)
	}
	return plan
}

// ExpireDeadlines reads weir_jobs_deadline, and ListStuck weir_jobs_lease,
// so that neither reads jobs that are final or have no deadline; an
// insert's wake reads each of its keys' jobs with one probe of the key's
// index (a subplan), never the backlog in weir_jobs_claim. (An earlier
// wake, which read the keys' jobs with a condition on state, read every
// waiting job from weir_jobs_claim on each insert once the table's
// statistics were stale; an empty table does not show that plan, so this
// checks the shape that rules it out.)
func TestSweepsAndWakesReadTheirIndexes(t *testing.T) {
	t.Parallel()
	s := migratedStore(t)
	for _, c := range []struct {
		name, sql, index string
		args             []any
	}{
		{"expire deadlines", s.sql.expire, "weir_jobs_deadline", []any{now, "t", now, 10}},
		{"list stuck", s.sql.listStuck, "weir_jobs_lease", []any{now, 10}},
		{"wake", s.sql.wake, "weir_jobs_idempotency_key", []any{[]string{"default"}, []string{"key"}}},
	} {
		plan := explain(t, s, c.sql, c.args...)
		if !readsIndex(plan, c.index) || strings.Contains(plan, "Seq Scan") || (c.name != "list stuck" && strings.Contains(plan, "weir_jobs_claim")) {
			t.Errorf("%s does not read %s:\n%s", c.name, c.index, plan)
		}
		if c.name == "wake" && !strings.Contains(plan, "SubPlan") {
			t.Errorf("wake does not read each key's job on its own:\n%s", plan)
		}
	}
}

// The outbox's claim reads weir_outbox_pending and checks each keyed
// candidate's key with probes of weir_outbox_key; the purges read the
// indexes of the rows they delete. None reads the table
// through, which would read every published message (or inbox record) the
// table keeps until a purge.
func TestMessagingReadsItsIndexes(t *testing.T) {
	t.Parallel()
	s := migratedStore(t)
	claimOutbox, settings := claimOutboxBody(t, s)
	for _, c := range []struct {
		name    string
		sql     string
		setup   []string // planner settings of the function that runs sql
		indexes []string
		args    []any
	}{
		{"claim outbox", claimOutbox, settings, []string{"weir_outbox_pending", "weir_outbox_key"}, []any{now, 10, "r", now, now}},
		{"purge outbox", s.sql.purgeOutbox, nil, []string{"weir_outbox_published"}, []any{now, 10}},
		{"purge inbox", s.sql.purgeInbox, nil, []string{"weir_inbox_received_at"}, []any{now, 10}},
	} {
		plan := planOf(t, s, c.setup, "EXPLAIN (COSTS OFF) "+c.sql, c.args, nil)
		for _, index := range c.indexes {
			if !readsIndex(plan, index) || strings.Contains(plan, "Seq Scan") {
				t.Errorf("%s does not read %s:\n%s", c.name, index, plan)
			}
		}
		// The first unpublished message of a candidate's key is read in
		// the index's order, stopped at the first row; a bitmap scan
		// would read every earlier message of the key for each candidate.
		if c.name == "claim outbox" && !strings.Contains(plan, "Index Scan using weir_outbox_key") {
			t.Errorf("claim outbox does not read the first message of a key in order:\n%s", plan)
		}
		// The pending messages are read in id order and no further than
		// the limit: neither a bitmap scan nor a sort, which read them
		// all, whatever the statistics say (weir_claim_outbox's
		// settings).
		if c.name == "claim outbox" && (strings.Contains(plan, "Bitmap") || strings.Contains(plan, "Sort")) {
			t.Errorf("claim outbox reads every pending message, then sorts:\n%s", plan)
		}
	}
}

// now is the time the tests inside the package give the store.
var now = time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)

// migratedStore returns a store on a migrated schema of the test's own,
// dropped when the test ends.
func migratedStore(t *testing.T) *Store {
	t.Helper()
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
	return s
}

// claimOutboxBody returns the statement of weir_claim_outbox, read from
// the catalog, with its arguments as parameters $1 to $5, and the
// statements that set, for a transaction, the planner settings the
// function runs with.
func claimOutboxBody(t *testing.T, s *Store) (sql string, settings []string) {
	t.Helper()
	var (
		src    string
		config []string
	)
	if err := s.pool.QueryRow(context.Background(), `SELECT prosrc, coalesce(proconfig, '{}') FROM pg_proc WHERE oid = $1::regprocedure`,
		s.schema+".weir_claim_outbox(timestamptz, bigint, text, timestamptz, timestamptz)").Scan(&src, &config); err != nil {
		t.Fatal(err)
	}
	_, body, found := strings.Cut(src, "RETURN QUERY")
	body, _, ended := strings.Cut(body, ";")
	if !found || !ended {
		t.Fatalf("weir_claim_outbox has no RETURN QUERY …; statement:\n%s", src)
	}
	for _, c := range config {
		name, value, _ := strings.Cut(c, "=")
		settings = append(settings, "SELECT set_config("+sqlLiteral(name)+", "+sqlLiteral(value)+", true)")
	}
	return strings.NewReplacer("p_now", "$1::timestamptz", "p_limit", "$2::bigint", "p_owner", "$3",
		"p_expires", "$4::timestamptz", "p_live", "$5::timestamptz").Replace(body), settings
}

// sqlLiteral is v as an SQL string literal.
func sqlLiteral(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }

// explain returns the plan of sql with args, with sequential scans turned
// off: a plan that still has one has no index to read instead.
func explain(t *testing.T, s *Store, sql string, args ...any) string {
	t.Helper()
	return planOf(t, s, nil, "EXPLAIN (COSTS OFF) "+sql, args, nil)
}

// planOf runs, in a transaction with sequential scans turned off, the
// statements setup, then query with args, whose rows are the plan it
// returns, then the statements teardown.
func planOf(t *testing.T, s *Store, setup []string, query string, args []any, teardown []string) string {
	t.Helper()
	ctx := context.Background()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, q := range append([]string{"SET LOCAL enable_seqscan = off"}, setup...) {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range teardown {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return strings.Join(lines, "\n")
}

// readsIndex reports whether plan reads index.
func readsIndex(plan, index string) bool {
	return strings.Contains(plan, "Index Scan using "+index) || strings.Contains(plan, "Index Scan Backward using "+index) ||
		strings.Contains(plan, "Index Only Scan using "+index) ||
		strings.Contains(plan, "Bitmap Index Scan on "+index)
}

// CompleteMany and Heartbeat find each job by one probe of its id. Given
// the condition state = 'running' on the jobs alone, the planner read the
// whole of weir_jobs_lease (the partial index of running jobs) and
// hash-joined: that index keeps an entry for every job claimed since the
// table's last VACUUM, so each completion visited the heap pages of the
// whole recent history, 300 of them after 20 s of a steady producer.
func TestLeaseWritesProbeEachJob(t *testing.T) {
	t.Parallel()
	s := migratedStore(t)
	leases := []any{[]int64{1, 2}, []string{"w", "w"}, []int64{1, 1}, now}
	for _, c := range []struct {
		name string
		sql  string
		args []any
	}{
		{"complete many", s.sql.completeMany, leases},
		{"heartbeat", s.sql.heartbeat, append(leases, now)},
	} {
		plan := explain(t, s, c.sql, c.args...)
		// A probe of weir_jobs_pkey, or of weir_jobs_state on (state, id),
		// reads one index entry per job.
		probes := regexp.MustCompile(`Index Cond: \(.*\bid = l\.id\)`).MatchString(plan)
		if !probes || readsIndex(plan, "weir_jobs_lease") {
			t.Errorf("%s does not probe each job by its id:\n%s", c.name, plan)
		}
	}
}

// The jobs an insert without keys returns are built from what it was
// given and the ids it got back, not read back: each is the stored job,
// times in UTC to the microsecond as the columns keep them, but for its
// payload, which comes back as given (the jsonb column keeps its own form
// of the same JSON).
func TestInsertedJobsAreTheStoredJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migratedStore(t)
	at := time.Date(2026, 3, 4, 5, 6, 7, 891234567, time.FixedZone("east", 3*3600))
	ps := []store.InsertParams{
		{Kind: "a", Payload: json.RawMessage(`{ "b" : [1, 2],  "a" : "x" }`), MaxAttempts: 3, Source: "s", Priority: 2},
		{Kind: "b", Queue: "q", Payload: json.RawMessage(`{}`), MaxAttempts: 1, ScheduledAt: at.Add(time.Hour + 999*time.Nanosecond)},
		{Kind: "c", Payload: json.RawMessage(`{"n":1}`), MaxAttempts: 5, DeadlineAt: at.Add(2*time.Hour + 1500*time.Nanosecond)},
	}
	for i := range ps {
		if ps[i].Queue == "" {
			ps[i].Queue = "default"
		}
	}
	res, err := s.Executor().Insert(ctx, at, ps)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		got, err := s.Executor().GetJob(ctx, r.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Job.Payload) != string(ps[i].Payload) || !sameJSON(got.Payload, ps[i].Payload) {
			t.Errorf("jobs[%d]: payload %s returned and %s stored, want %s", i, r.Job.Payload, got.Payload, ps[i].Payload)
		}
		inserted := *r.Job
		inserted.Payload = got.Payload
		if !reflect.DeepEqual(&inserted, got) {
			t.Errorf("jobs[%d]: the insert returned\n%+v\nand the store holds\n%+v", i, inserted, *got)
		}
	}
}

// A batch's runs of jobs without a key are one INSERT over arrays each,
// and its jobs with a key one statement each: every result is the job
// given at its position, whatever the mix, with each of its fields as
// given, and the ids follow the batch's order (which orders the claims of
// jobs of one priority and time).
func TestInsertBatchKeepsEachJobAtItsPosition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migratedStore(t)
	if _, err := s.Executor().Insert(ctx, now, []store.InsertParams{{Kind: "k", IdempotencyKey: "dup"}}); err != nil {
		t.Fatal(err)
	}
	var ps []store.InsertParams
	for i := range 40 {
		p := store.InsertParams{
			Kind:        fmt.Sprintf("kind%d", i),
			Queue:       fmt.Sprintf("q%d", i%3),
			Payload:     json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)),
			MaxAttempts: i + 1,
			Source:      fmt.Sprintf("src%d", i),
			Priority:    i % 5,
		}
		switch {
		case i%7 == 3:
			p.IdempotencyKey = fmt.Sprintf("key%d", i)
		case i == 10:
			p.IdempotencyKey = "dup"
		case i%4 == 1:
			p.ScheduledAt = now.Add(time.Duration(i) * time.Minute)
		case i%5 == 2:
			p.DeadlineAt = now.Add(time.Hour + time.Duration(i)*time.Second)
		}
		ps = append(ps, p)
	}
	res, err := s.Executor().Insert(ctx, now, ps)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(ps) {
		t.Fatalf("%d results for %d jobs", len(res), len(ps))
	}
	prev := int64(0)
	for i, p := range ps {
		r := res[i]
		want := weirtype.Inserted
		if p.IdempotencyKey == "dup" {
			want = weirtype.DuplicatePending
		}
		if r.Outcome != want || r.Job == nil {
			t.Fatalf("jobs[%d]: outcome %q, job %v; want %q", i, r.Outcome, r.Job, want)
		}
		if want != weirtype.Inserted {
			continue
		}
		j := r.Job
		if j.ID <= prev {
			t.Errorf("jobs[%d] got id %d, after %d: ids out of the batch's order", i, j.ID, prev)
		}
		prev = j.ID
		state, sched := weirtype.StateAvailable, now
		if !p.ScheduledAt.IsZero() {
			state, sched = weirtype.StateScheduled, p.ScheduledAt
		}
		if j.Kind != p.Kind || j.Queue != p.Queue || !sameJSON(j.Payload, p.Payload) || j.MaxAttempts != p.MaxAttempts ||
			j.Source != p.Source || j.Priority != p.Priority || j.IdempotencyKey != p.IdempotencyKey || j.State != state ||
			!j.ScheduledAt.Equal(sched) || !j.DeadlineAt.Equal(p.DeadlineAt) || !j.CreatedAt.Equal(now) {
			t.Errorf("jobs[%d] came back as %+v, want the job given: %+v", i, *j, p)
		}
		got, err := s.Executor().GetJob(ctx, j.ID)
		if err != nil || got.Kind != p.Kind {
			t.Errorf("jobs[%d]: stored job %d is %v (%v), want kind %s", i, j.ID, got, err, p.Kind)
		}
	}
}

// A bad job among many without a key fails the whole insert as the
// caller's bad parameter, and writes nothing.
func TestInsertBatchRefusesABadPayloadWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migratedStore(t)
	ps := []store.InsertParams{{Kind: "a"}, {Kind: "b", Payload: json.RawMessage(`{"s":"\u0000"}`)}, {Kind: "c"}}
	if _, err := s.Executor().Insert(ctx, now, ps); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("insert with a NUL in a payload: %v, want ErrInvalid", err)
	}
	// The bad job in a statement of its own (it has a key), after the
	// statement of a good one: the batch is one transaction all the same.
	ps = []store.InsertParams{{Kind: "a"}, {Kind: "b", IdempotencyKey: "k", Payload: json.RawMessage(`{"s":"\u0000"}`)}, {Kind: "c", IdempotencyKey: "k2"}}
	if _, err := s.Executor().Insert(ctx, now, ps); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("insert with a NUL in a keyed job's payload: %v, want ErrInvalid", err)
	}
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM "+s.schema+".weir_jobs").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d jobs stored (%v), want none", n, err)
	}
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// The migration that gives a schema its identity, run on a schema whose
// outbox already holds messages (a weir upgraded), records the highest
// outbox id, so that those messages keep the broker ids they may have been
// published with.
func TestStoreIdentityMigrationKeepsOlderMessagesIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migratedStore(t)
	ids, err := s.Executor().AddOutbox(ctx, now, []store.OutboxMessage{{Topic: "t"}, {Topic: "t"}, {Topic: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := s.Executor().OutboxIdentity(ctx)
	if err != nil || fresh.LegacyThrough != 0 {
		t.Fatalf("identity of a schema made by this weir: %+v, %v; want no legacy messages", fresh, err)
	}
	sql := identityMigration(t)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, q := range []string{"SET LOCAL search_path TO " + pgx.Identifier{s.schema}.Sanitize(), "DROP TABLE weir_store_identity", sql} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	upgraded, err := s.Executor().OutboxIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if upgraded.LegacyThrough != ids[2] || upgraded.StoreID == fresh.StoreID || len(upgraded.StoreID) != 16 {
		t.Fatalf("identity made over 3 messages: %+v (before: %+v); want legacy through %d and a new id", upgraded, fresh, ids[2])
	}
}

// identityMigration returns the SQL of the migration that makes
// weir_store_identity.
func identityMigration(t *testing.T) string {
	t.Helper()
	ms, err := migration.Load(migrationFS, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Name == "store_identity" {
			return m.SQL
		}
	}
	t.Fatal("no store_identity migration")
	return ""
}

// weir_limit_window and store.LimitWindow agree to the microsecond, before
// 1970 and far after it, so that what the claim counts and what the
// operators' tools show are one window.
func TestLimitWindowAgreesWithGo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migratedStore(t)
	for _, c := range []struct {
		at  time.Time
		per time.Duration
	}{
		{time.Date(2026, 1, 21, 15, 30, 59, 999999000, time.UTC), time.Minute},
		{time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC), time.Minute},
		{time.Date(1969, 12, 31, 23, 59, 59, 500000000, time.UTC), time.Second},
		{time.Date(1900, 6, 1, 0, 0, 0, 123000, time.UTC), 7 * time.Millisecond},
		{time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC), time.Millisecond},
		{time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC), 24 * time.Hour},
		{time.Date(2026, 11, 25, 22, 0, 0, 1000, time.UTC), 90 * time.Second},
	} {
		var got time.Time
		if err := s.pool.QueryRow(ctx, "SELECT "+s.sql.schema+".weir_limit_window($1::timestamptz, $2)",
			c.at, c.per.Microseconds()).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if want := store.LimitWindow(c.at, c.per); !got.Equal(want) {
			t.Errorf("window of %v at %v: PostgreSQL %v, Go %v", c.per, c.at, got.UTC(), want)
		}
	}
}

// CompleteOutputs and Heartbeat are planned at each call, for the table as
// it is then. A plan cached for the statement (a prepared statement's
// generic plan, which PostgreSQL adopts after five calls) keeps the
// table's size at the time it was made until the table's statistics
// change: planned on a table of a few pages and kept while it grew
// without an ANALYZE (autovacuum off, or not yet run), it read the whole
// table with a sequential scan and a hash join on each completion, 1,000
// pages and 3.5 ms for 8 jobs after 30 s of a steady producer.
func TestLeaseWritesAreNotPlannedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migratedStore(t)
	ex := s.Executor()
	leases := []store.Lease{{ID: 1, Owner: "w", Attempt: 1}, {ID: 2, Owner: "w", Attempt: 1}}
	for range 12 {
		if _, err := ex.Heartbeat(ctx, now, leases, time.Minute); err != nil {
			t.Fatal(err)
		}
		cs := []store.Completion{{Lease: leases[0], Output: json.RawMessage(`{"n":1}`)}, {Lease: leases[1]}}
		if _, err := ex.(store.Results).CompleteOutputs(ctx, now, cs); err != nil {
			t.Fatal(err)
		}
	}
	conns := s.pool.AcquireAllIdle(ctx)
	if len(conns) == 0 {
		t.Fatal("no idle connection in the pool to look at")
	}
	for _, c := range conns {
		rows, err := c.Query(ctx, `SELECT statement, generic_plans FROM pg_prepared_statements WHERE statement LIKE '%unnest($1::bigint[], $2::text[], $3::bigint[])%' AND statement NOT LIKE '%pg_prepared_statements%'`)
		if err != nil {
			c.Release()
			t.Fatal(err)
		}
		for rows.Next() {
			var stmt string
			var generic int64
			if err := rows.Scan(&stmt, &generic); err != nil {
				t.Fatal(err)
			}
			t.Errorf("a lease write is a prepared statement of the connection (generic plans %d): %.120s", generic, stmt)
		}
		rows.Close()
		c.Release()
	}
}

// oneConnStore returns a store on a migrated schema of its own with one
// connection, whose prepared statements and plans a test can follow.
func oneConnStore(t *testing.T) *Store {
	t.Helper()
	migrated := migratedStore(t)
	s, err := Open(context.Background(), Config{URL: testenv.Postgres(t), Schema: migrated.schema, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// An insert of jobs without keys (a producer's) announces their queues
// with a statement that reads no table, whose plan the connection makes
// once: the wake that also reads the keys' jobs is planned again at each
// call, its custom plans costed below the generic one.
func TestKeylessInsertsWakeWithAPlanMadeOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := oneConnStore(t)
	for range 12 {
		if _, err := s.Executor().Insert(ctx, now, []store.InsertParams{{Kind: "k"}, {Kind: "k", Queue: "other"}}); err != nil {
			t.Fatal(err)
		}
	}
	conns := s.pool.AcquireAllIdle(ctx)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	var generic, calls int64
	for _, c := range conns {
		var g, n int64
		err := c.QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(generic_plans + custom_plans), 0) FROM pg_prepared_statements
			WHERE statement = $1`, s.sql.wakeQueues).Scan(&g, &n)
		if err != nil {
			t.Fatal(err)
		}
		generic, calls = generic+g, calls+n
	}
	if calls != 12 || generic != 7 {
		t.Fatalf("the keyless wake ran %d times on the store's one connection, %d of them on a generic plan; want 12, all but the first five", calls, generic)
	}
}

// A batch of completions probes the jobs by id however the table grew
// since the connection first ran it. PostgreSQL keeps a statement's
// cached plan until the table's statistics change, which nothing does
// here (no ANALYZE): a plan made on a table of a few rows scanned the
// whole table, with a hash join, for each batch after it grew. The
// statement's text names the table's size class, so that the
// connection plans it again once the table has doubled.
func TestCompleteManyProbesByIDAfterTheTableGrew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := oneConnStore(t)
	ex := s.Executor()
	jobs := func(n int) []store.InsertParams {
		ps := make([]store.InsertParams, n)
		for i := range ps {
			ps[i] = store.InsertParams{Kind: "k", ScheduledAt: now.Add(-time.Hour + time.Duration(i)*time.Microsecond)}
		}
		return ps
	}
	leasesOf := func(n int) []store.Lease {
		claimed, err := ex.Claim(ctx, store.ClaimParams{Now: now, Queue: "default", Limit: n, Owner: "w", LeaseFor: time.Minute})
		if err != nil || len(claimed) != n {
			t.Fatalf("claim %d: %d claimed, %v", n, len(claimed), err)
		}
		ls := make([]store.Lease, len(claimed))
		for i, j := range claimed {
			ls[i] = store.LeaseOf(j)
		}
		return ls
	}
	if _, err := ex.Insert(ctx, now, jobs(8)); err != nil {
		t.Fatal(err)
	}
	for range 8 { // past the five calls after which a plan is cached
		if lost, err := ex.CompleteMany(ctx, now, leasesOf(1)); err != nil || len(lost) != 0 {
			t.Fatalf("complete on the small table: lost %v, %v", lost, err)
		}
	}
	if _, err := ex.Insert(ctx, now, jobs(20000)); err != nil {
		t.Fatal(err)
	}
	s.jobsSize.checkedAt.Store(0) // as if sizeEvery had passed
	if _, err := ex.CompleteMany(ctx, now, []store.Lease{{ID: 1 << 40, Owner: "w", Attempt: 1}}); err != nil {
		t.Fatal(err)
	}
	leases := leasesOf(4)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	before := readsIn(t, tx, s.schema+".weir_jobs")
	lost, err := s.Tx(tx).CompleteMany(ctx, now, leases)
	if err != nil || len(lost) != 0 {
		t.Fatalf("complete 4 of 20,008 jobs: lost %v, %v", lost, err)
	}
	if r := readsIn(t, tx, s.schema+".weir_jobs").since(before); r.seq != 0 || r.idx == 0 {
		t.Fatalf("completing 4 jobs of 20,008: %d sequential scans of the table and %d index scans, want none and some", r.seq, r.idx)
	}
}

// A listing by state reads the partial index that holds the state's jobs,
// in a generic plan too (the states a parameter the planner does not
// see): weir_jobs_state for the states other than running, weir_jobs_lease
// for the running jobs, which weir_jobs_state does not hold, and both for
// states with the running one among others.
func TestListingByStateReadsItsIndex(t *testing.T) {
	t.Parallel()
	s := migratedStore(t)
	for _, c := range []struct {
		states  []weirtype.State
		indexes []string
	}{
		{[]weirtype.State{weirtype.StateDead}, []string{"weir_jobs_state"}},
		{[]weirtype.State{weirtype.StateCompleted, weirtype.StateCancelled}, []string{"weir_jobs_state"}},
		{[]weirtype.State{weirtype.StateRunning}, []string{"weir_jobs_lease"}},
		{[]weirtype.State{weirtype.StateDead, weirtype.StateCompleted, weirtype.StateRunning}, []string{"weir_jobs_state", "weir_jobs_lease"}},
	} {
		f, err := store.JobFilter{States: c.states, Before: 1000}.Normalize()
		if err != nil {
			t.Fatal(err)
		}
		sql, args := s.listJobsQuery(f)
		plan := explain(t, s, sql, args...)
		generic := explainGeneric(t, s, sql, args...)
		for _, index := range c.indexes {
			if !readsIndex(plan, index) || !readsIndex(generic, index) {
				t.Errorf("listing the jobs of %v does not read %s:\n%s\ngeneric plan:\n%s", c.states, index, plan, generic)
			}
		}
	}
}

// explainGeneric is explain with the plan made for any value of the
// parameters, args given as literals.
func explainGeneric(t *testing.T, s *Store, sql string, args ...any) string {
	t.Helper()
	values := make([]string, len(args))
	for i, a := range args {
		switch a := a.(type) {
		case string:
			values[i] = sqlLiteral(a)
		case []string:
			values[i] = "'{" + strings.Join(a, ",") + "}'"
		case int, int64:
			values[i] = fmt.Sprint(a)
		default:
			t.Fatalf("argument %d: %T", i, a)
		}
	}
	// A prepared statement outlives the transaction: deallocated in it.
	return planOf(t, s, []string{"SET LOCAL plan_cache_mode = force_generic_plan", "PREPARE listing AS " + sql},
		"EXPLAIN (COSTS OFF) EXECUTE listing("+strings.Join(values, ", ")+")", nil, []string{"DEALLOCATE listing"})
}

// A claim, from the head or from a hint, finds its jobs through the claim
// index (and updates them by address) however the table grew since the
// connection first ran it. weir_claim and
// weir_claim_from are PL/pgSQL, whose statements keep a cached plan until
// the table's statistics change, which nothing does here (no ANALYZE):
// weir_claim_from's UPDATE, planned on a table of a few rows, scanned the
// whole table for each claim after it grew (4.7 ms a claim of 20 jobs with
// 10,000 in the table, seven times a claim from the head).
func TestClaimsProbeByIDAfterTheTableGrew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := oneConnStore(t)
	ex := s.Executor()
	small := make([]store.InsertParams, 340)
	for i := range small {
		small[i] = store.InsertParams{Kind: "k", ScheduledAt: now.Add(-time.Hour + time.Duration(i)*time.Microsecond)}
	}
	if _, err := ex.Insert(ctx, now, small); err != nil {
		t.Fatal(err)
	}
	var last *weirtype.Job
	claim := func(e store.Executor, from *weirtype.Job, n int) []*weirtype.Job {
		t.Helper()
		p := store.ClaimParams{Now: now, Queue: "default", Limit: n, Owner: "w", LeaseFor: time.Minute}
		if from != nil {
			p.From = store.ClaimFromJob(from)
		}
		jobs, err := e.Claim(ctx, p)
		if err != nil || len(jobs) != n {
			t.Fatalf("claim %d: %d claimed, %v", n, len(jobs), err)
		}
		return jobs
	}
	for range 8 { // past the five calls after which a plan is cached
		jobs := claim(ex, nil, 20)
		jobs = claim(ex, jobs[len(jobs)-1], 20)
		last = jobs[len(jobs)-1]
	}
	insertJobs(t, s, 20000)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, from := range []*weirtype.Job{nil, last} {
		before := readsIn(t, tx, s.schema+".weir_jobs")
		claim(s.Tx(tx), from, 4)
		// A full scan of an index would read every row too.
		if r := readsIn(t, tx, s.schema+".weir_jobs").since(before); r.seq != 0 || r.fetched > 2000 {
			t.Errorf("a claim of 4 of 20,340 jobs (from a hint: %v) made %d sequential scans of the table and read %d rows through indexes, want none and fewer than 2,000",
				from != nil, r.seq, r.fetched)
		}
	}
}

// A claim reads the claim index once for each range of it that it takes
// jobs from, updates the rows it locked by address, and reads the
// queue's pauses once (migration 0020): no second read of each job
// through the primary key, no probe of weir_pauses for each.
func TestClaimsUpdateTheRowsTheyLockedByAddress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := oneConnStore(t)
	insertJobs(t, s, 1000)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	ex := s.Tx(tx)
	var from *weirtype.Job
	var ids []int64
	for _, c := range []struct {
		name   string
		scans  int64 // of weir_jobs_claim: the head; a hint's higher priorities, then its own
		pauses int64 // of weir_pauses: the pauses, and from the head the breakers' probes first
	}{{"from the head", 1, 2}, {"from a hint", 2, 1}} {
		p := store.ClaimParams{Now: now, Queue: "default", Limit: 4, Owner: "w", LeaseFor: time.Minute}
		if from != nil {
			p.From = store.ClaimFromJob(from)
		}
		before, pausesBefore := readsIn(t, tx, s.schema+".weir_jobs"), readsIn(t, tx, s.schema+".weir_pauses")
		jobs, err := ex.Claim(ctx, p)
		r, pauses := readsIn(t, tx, s.schema+".weir_jobs").since(before), readsIn(t, tx, s.schema+".weir_pauses").since(pausesBefore)
		if err != nil || len(jobs) != 4 {
			t.Fatalf("claim %s: %d claimed, %v", c.name, len(jobs), err)
		}
		for _, j := range jobs {
			if j.State != weirtype.StateRunning || j.Attempt != 1 || j.LeaseOwner != "w" {
				t.Errorf("claim %s: job %d %s, attempt %d, lease owner %q", c.name, j.ID, j.State, j.Attempt, j.LeaseOwner)
			}
			ids = append(ids, j.ID)
		}
		if r.seq != 0 || r.idx != c.scans || r.fetched > 4+int64(len(ids)) {
			t.Errorf("claim %s: %d sequential and %d index scans of weir_jobs, %d rows read through indexes; want none, %d, at most %d",
				c.name, r.seq, r.idx, r.fetched, c.scans, 4+len(ids))
		}
		if pauses.seq+pauses.idx > c.pauses {
			t.Errorf("claim %s: %d sequential and %d index scans of weir_pauses, want at most %d",
				c.name, pauses.seq, pauses.idx, c.pauses)
		}
		from = jobs[len(jobs)-1]
	}
	if !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != 8 {
		t.Errorf("claimed %v, want 8 jobs in the claim order", ids)
	}
}

// The relay's claims and writes (a mark, a retry, a release) find their
// messages through the outbox's indexes however it grew since the
// connection first ran them, with no ANALYZE since. A claim planned from
// those statistics read every pending message (a bitmap scan, then a
// sort) to take 4 of 20,000; weir_claim_outbox reads them in order.
func TestOutboxWritesProbeByIDAfterTheTableGrew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := oneConnStore(t)
	ex := s.Executor()
	add := func(n int) {
		t.Helper()
		msgs := make([]store.OutboxMessage, n)
		for i := range msgs {
			msgs[i] = store.OutboxMessage{Topic: "t", Payload: []byte(`{"n":1}`)}
		}
		if _, err := ex.AddOutbox(ctx, now, msgs); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(e store.Executor, n int) []int64 {
		t.Helper()
		msgs, err := e.ClaimOutbox(ctx, store.OutboxClaimParams{Now: now, Limit: n, Owner: "r", LeaseFor: time.Minute})
		if err != nil || len(msgs) != n {
			t.Fatalf("claim %d: %d claimed, %v", n, len(msgs), err)
		}
		ids := make([]int64, len(msgs))
		for i, m := range msgs {
			ids[i] = m.ID
		}
		return ids
	}
	add(340)
	for range 8 { // past the five calls after which a plan is cached
		if _, err := ex.MarkPublished(ctx, now, "r", claim(ex, 20)); err != nil {
			t.Fatal(err)
		}
		if _, err := ex.RetryOutbox(ctx, now, "r", claim(ex, 10), "down", time.Time{}); err != nil {
			t.Fatal(err)
		}
		if _, err := ex.ReleaseOutbox(ctx, now, "r", claim(ex, 10)); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		add(1000)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	txEx := s.Tx(tx)
	var ids []int64
	for _, w := range []struct {
		name  string
		write func() error
	}{
		{"claim", func() error { ids = claim(txEx, 4); return nil }},
		{"mark", func() error { _, err := txEx.MarkPublished(ctx, now, "r", ids[:1]); return err }},
		{"retry", func() error { _, err := txEx.RetryOutbox(ctx, now, "r", ids[1:2], "down", time.Time{}); return err }},
		{"release", func() error { _, err := txEx.ReleaseOutbox(ctx, now, "r", ids[2:]); return err }},
	} {
		before := readsIn(t, tx, s.schema+".weir_outbox")
		if err := w.write(); err != nil {
			t.Fatal(err)
		}
		r := readsIn(t, tx, s.schema+".weir_outbox").since(before)
		if r.seq != 0 || r.fetched > 2000 {
			t.Errorf("%s in an outbox of 20,340 messages: %d sequential scans of the table and %d rows read through indexes, want none and fewer than 2,000",
				w.name, r.seq, r.fetched)
		}
		t.Logf("%s in an outbox of 20,340 messages read %d rows through indexes", w.name, r.fetched)
	}
}

// tableReads counts a table's reads in a transaction
// (pg_stat_xact_user_tables): sequential scans, index scans, and rows
// read through its indexes.
type tableReads struct{ seq, idx, fetched int64 }

// readsIn returns the reads of table, schema-qualified, in tx so far.
func readsIn(t *testing.T, tx pgx.Tx, table string) tableReads {
	t.Helper()
	var r tableReads
	err := tx.QueryRow(context.Background(), `SELECT coalesce(seq_scan, 0), coalesce(idx_scan, 0), coalesce(idx_tup_fetch, 0)
		FROM pg_stat_xact_user_tables WHERE relid = $1::regclass`, table).Scan(&r.seq, &r.idx, &r.fetched)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// since returns the reads made after before.
func (r tableReads) since(before tableReads) tableReads {
	return tableReads{r.seq - before.seq, r.idx - before.idx, r.fetched - before.fetched}
}
