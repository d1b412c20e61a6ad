package admin_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/admin"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

func TestAuthentication(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "s3cret-token")
	for _, tc := range []struct{ name, auth string }{
		{"missing", ""},
		{"wrong", "Bearer s3cret-tokeN"},
		{"prefix", "Bearer s3cret"},
		{"longer", "Bearer s3cret-token2"},
		{"empty bearer", "Bearer "},
		{"other scheme", "Basic s3cret-token"},
		{"no scheme", "s3cret-token"},
	} {
		for _, target := range []string{"/api/admin/jobs", "/api/admin/nope", "/api/admin/breakers/llm/open"} {
			res := fx.doAuth(http.MethodGet, target, "", tc.auth)
			if res.code != http.StatusUnauthorized || !strings.Contains(res.errorMessage(), "admin token") ||
				!strings.HasPrefix(res.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s token, GET %s: status %d, %s; want 401 naming the token, with WWW-Authenticate", tc.name, target, res.code, res.raw)
			}
		}
	}
	if fx.llm.State() != breaker.Closed {
		t.Fatalf("an unauthenticated request changed a breaker")
	}
	for _, auth := range []string{"Bearer s3cret-token", "bearer s3cret-token", "Bearer  s3cret-token "} {
		if res := fx.doAuth(http.MethodGet, "/api/admin/jobs", "", auth); res.code != http.StatusOK {
			t.Errorf("token %q: status %d, want 200: %s", auth, res.code, res.raw)
		}
	}
	// Without a token configured the API is open (the CLI allows that on
	// loopback only).
	open := newFixture(t, "")
	if res := open.doAuth(http.MethodGet, "/api/admin/jobs", "", ""); res.code != http.StatusOK {
		t.Errorf("no token configured: status %d, want 200", res.code)
	}
}

// The token check compares in constant time: tokenOK calls
// subtle.ConstantTimeCompare and compares nothing else, and nothing else
// in the package touches the Authorization header.
func TestTokenComparedInConstantTime(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "admin.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var fn *ast.FuncDecl
	for _, d := range f.Decls {
		if d, ok := d.(*ast.FuncDecl); ok && d.Name.Name == "tokenOK" {
			fn = d
		}
	}
	if fn == nil {
		t.Fatal("no func tokenOK in admin.go")
	}
	constantTime := false
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok {
				switch x.Name + "." + n.Sel.Name {
				case "subtle.ConstantTimeCompare":
					constantTime = true
				case "bytes.Equal", "strings.Compare", "bytes.Compare", "slices.Equal", "reflect.DeepEqual":
					t.Errorf("%s: tokenOK compares with %s.%s", fset.Position(n.Pos()), x.Name, n.Sel.Name)
				}
			}
		case *ast.BinaryExpr:
			if n.Op == token.EQL || n.Op == token.NEQ {
				// Only the result of ConstantTimeCompare may be compared.
				call, ok := n.X.(*ast.CallExpr)
				sel, _ := func() (*ast.SelectorExpr, bool) {
					if !ok {
						return nil, false
					}
					s, ok := call.Fun.(*ast.SelectorExpr)
					return s, ok
				}()
				if sel == nil || sel.Sel.Name != "ConstantTimeCompare" {
					t.Errorf("%s: tokenOK compares with %s", fset.Position(n.Pos()), n.Op)
				}
			}
		}
		return true
	})
	if !constantTime {
		t.Error("tokenOK does not call subtle.ConstantTimeCompare")
	}
}

func TestJobs(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "tok")
	ctx := context.Background()
	a := fx.insert("parse", "default", 3)
	b := fx.insert("index", "bulk", 2)
	running := fx.claim("bulk", 1)[0]
	if _, err := fx.ex.Cancel(ctx, fx.clk.Now(), a[2]); err != nil {
		t.Fatal(err)
	}

	res := fx.ok(http.StatusOK, http.MethodGet, "/api/admin/jobs", "")
	if got := numbers(field(res.body["jobs"], "id")); !slices.Equal(got, []int64{b[1], b[0], a[2], a[1], a[0]}) {
		t.Fatalf("all jobs %v, want newest first", got)
	}
	if res.body["next_before"] != nil {
		t.Errorf("one page only: next_before %v, want null", res.body["next_before"])
	}
	for target, want := range map[string][]int64{
		"/api/admin/jobs?state=cancelled":                  {a[2]},
		"/api/admin/jobs?state=running,cancelled":          {running.ID, a[2]},
		"/api/admin/jobs?state=available&state=running":    {b[1], b[0], a[1], a[0]},
		"/api/admin/jobs?kind=index":                       {b[1], b[0]},
		"/api/admin/jobs?kind=index&kind=parse&queue=bulk": {b[1], b[0]},
		"/api/admin/jobs?queue=default&state=available":    {a[1], a[0]},
		"/api/admin/jobs?queue=none":                       {},
	} {
		res := fx.ok(http.StatusOK, http.MethodGet, target, "")
		if got := numbers(field(res.body["jobs"], "id")); !slices.Equal(got, want) {
			t.Errorf("GET %s: %v, want %v", target, got, want)
		}
	}

	// Pages walk every job once.
	seen := fx.pageIDs("/api/admin/jobs?limit=2", "jobs", "next_before", "before")
	if !slices.Equal(seen, []int64{b[1], b[0], a[2], a[1], a[0]}) {
		t.Errorf("paged %v, want each job once, newest first", seen)
	}

	// Show, with the error history.
	if _, err := fx.ex.Fail(ctx, store.FailParams{Now: fx.clk.Now(), Lease: store.LeaseOf(running), RetryAt: fx.clk.Now().Add(time.Hour),
		Error: weirtype.AttemptError{Attempt: 1, At: fx.clk.Now(), Message: "index down", Type: "*net.OpError"}}); err != nil {
		t.Fatal(err)
	}
	res = fx.ok(http.StatusOK, http.MethodGet, fmt.Sprintf("/api/admin/jobs/%d", running.ID), "")
	if res.body["state"] != "scheduled" || res.body["kind"] != "index" || res.body["attempt"] != 1.0 {
		t.Errorf("show: %s", res.raw)
	}
	if msgs := field(res.body["errors"], "message"); len(msgs) != 1 || msgs[0] != "index down" {
		t.Errorf("error history %v, want the attempt's error", res.body["errors"])
	}
	fx.ok(http.StatusNotFound, http.MethodGet, "/api/admin/jobs/999", "")

	// Retry and cancel, one job.
	res = fx.ok(http.StatusOK, http.MethodPost, fmt.Sprintf("/api/admin/jobs/%d/retry", running.ID), "")
	if res.body["state"] != "available" {
		t.Errorf("retry a scheduled job: %s, want it available", res.raw)
	}
	res = fx.ok(http.StatusOK, http.MethodPost, fmt.Sprintf("/api/admin/jobs/%d/cancel", a[0]), "")
	if res.body["state"] != "cancelled" {
		t.Errorf("cancel: %s", res.raw)
	}
	if res := fx.ok(http.StatusConflict, http.MethodPost, fmt.Sprintf("/api/admin/jobs/%d/cancel", a[0]), ""); !strings.Contains(res.errorMessage(), "final") {
		t.Errorf("cancel a cancelled job: %q, want it named final", res.errorMessage())
	}
	fx.ok(http.StatusNotFound, http.MethodPost, "/api/admin/jobs/999/retry", "")
	running2 := fx.claim("default", 1)[0]
	fx.ok(http.StatusConflict, http.MethodPost, fmt.Sprintf("/api/admin/jobs/%d/retry", running2.ID), "")

	// In bulk: each id answered.
	body := fmt.Sprintf(`{"ids": [%d, %d, 999, %d]}`, a[0], a[2], a[0])
	res = fx.ok(http.StatusOK, http.MethodPost, "/api/admin/jobs/retry", body)
	if res.body["done"] != 2.0 || res.body["failed"] != 1.0 {
		t.Errorf("bulk retry: %s", res.raw)
	}
	if got := field(res.body["results"], "error"); len(got) != 3 || got[0] != nil || got[2] != "no job 999" {
		t.Errorf("bulk retry results %v, want the duplicate id once and 999 not found", got)
	}
	res = fx.ok(http.StatusOK, http.MethodPost, "/api/admin/jobs/cancel", fmt.Sprintf(`{"ids": [%d, %d]}`, a[0], a[2]))
	for _, id := range []int64{a[0], a[2]} {
		j, err := fx.ex.GetJob(ctx, id)
		if err != nil || j.State != weirtype.StateCancelled {
			t.Errorf("job %d after bulk cancel: %+v, %v", id, j, err)
		}
	}
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "tok")
	ctx := context.Background()
	early := fx.bury("parse", "default", weirtype.AbandonPermanent, 2)
	fx.clk.Advance(time.Hour)
	late := fx.bury("extract", "llm", weirtype.AbandonMaxAttempts, 3)
	all := append(slices.Clone(early), late...)

	res := fx.ok(http.StatusOK, http.MethodGet, "/api/admin/dead-letters", "")
	if got := numbers(field(res.body["dead_letters"], "id")); !slices.Equal(got, all) {
		t.Fatalf("all %v, want %v", got, all)
	}
	cut := url.QueryEscape(t0.Add(30 * time.Minute).Format(time.RFC3339))
	lateJob := fx.ok(http.StatusOK, http.MethodGet, fmt.Sprintf("/api/admin/dead-letters/%d", late[1]), "").body["job_id"]
	for target, want := range map[string][]int64{
		fmt.Sprintf("/api/admin/dead-letters?job_id=%v", lateJob):       late[1:2],
		"/api/admin/dead-letters?reason=retry_after_exceeds_limit":      {},
		"/api/admin/dead-letters?kind=parse":                            early,
		"/api/admin/dead-letters?queue=llm":                             late,
		"/api/admin/dead-letters?reason=max_attempts_exceeded":          late,
		"/api/admin/dead-letters?failed_before=" + cut:                  early,
		"/api/admin/dead-letters?failed_after=" + cut:                   late,
		"/api/admin/dead-letters?failed_after=45m":                      late,
		"/api/admin/dead-letters?failed_before=45m":                     early,
		"/api/admin/dead-letters?kind=extract&reason=non_retryable":     {},
		fmt.Sprintf("/api/admin/dead-letters?after=%d&limit=2", all[1]): late[:2],
	} {
		res := fx.ok(http.StatusOK, http.MethodGet, target, "")
		if got := numbers(field(res.body["dead_letters"], "id")); !slices.Equal(got, want) {
			t.Errorf("GET %s: %v, want %v", target, got, want)
		}
	}
	seen := fx.pageIDs("/api/admin/dead-letters?limit=2", "dead_letters", "next_after", "after")
	if !slices.Equal(seen, all) {
		t.Errorf("paged %v, want each once: %v", seen, all)
	}

	res = fx.ok(http.StatusOK, http.MethodGet, fmt.Sprintf("/api/admin/dead-letters/%d", late[0]), "")
	if res.body["abandoned_reason"] != "max_attempts_exceeded" || res.body["kind"] != "extract" || res.body["last_error"] != "boom" {
		t.Errorf("show: %s", res.raw)
	}
	fx.ok(http.StatusNotFound, http.MethodGet, "/api/admin/dead-letters/999", "")

	// Export: JSON Lines, filtered.
	res = fx.ok(http.StatusOK, http.MethodGet, "/api/admin/dead-letters/export?queue=llm", "")
	if ct := res.header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("export Content-Type %q", ct)
	}
	var exported []int64
	sc := bufio.NewScanner(strings.NewReader(res.raw))
	for sc.Scan() {
		var rec struct {
			ID int64 `json:"id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("export line %q: %v", sc.Text(), err)
		}
		exported = append(exported, rec.ID)
	}
	if !slices.Equal(exported, late) {
		t.Errorf("exported %v, want %v", exported, late)
	}

	// Requeue by ids: those jobs run again, their letters gone.
	res = fx.ok(http.StatusOK, http.MethodPost, "/api/admin/dead-letters/requeue", fmt.Sprintf(`{"ids": [%d]}`, early[0]))
	if res.body["requeued"] != 1.0 {
		t.Errorf("requeue by id: %s", res.raw)
	}
	jobID := numbers(res.body["job_ids"])[0]
	if j, err := fx.ex.GetJob(ctx, jobID); err != nil || j.State != weirtype.StateAvailable {
		t.Errorf("requeued job: %+v, %v", j, err)
	}
	// Requeue by filter.
	res = fx.ok(http.StatusBadRequest, http.MethodPost, "/api/admin/dead-letters/requeue", `{"filter": {"queue": "llm", "failed_after": "45m"}}`)
	if !strings.Contains(res.errorMessage(), `"confirm": true`) {
		t.Errorf("requeue by filter without confirm: %q", res.errorMessage())
	}
	res = fx.ok(http.StatusOK, http.MethodPost, "/api/admin/dead-letters/requeue", `{"filter": {"queue": "llm", "failed_after": "45m"}, "confirm": true}`)
	if res.body["requeued"] != 3.0 {
		t.Errorf("requeue by filter: %s", res.raw)
	}
	if got := fx.deadLetterIDs(); !slices.Equal(got, early[1:]) {
		t.Errorf("after the requeues the store holds %v, want %v", got, early[1:])
	}

	// Purge by filter needs confirm; by ids it does not.
	again := fx.bury("save", "archive", weirtype.AbandonTTL, 2)
	res = fx.ok(http.StatusBadRequest, http.MethodPost, "/api/admin/dead-letters/purge", `{"filter": {"kind": "save"}}`)
	if !strings.Contains(res.errorMessage(), `"confirm": true`) {
		t.Errorf("purge by filter without confirm: %q", res.errorMessage())
	}
	if got := fx.deadLetterIDs(); len(got) != 3 {
		t.Fatalf("a refused purge deleted: %v left", got)
	}
	res = fx.ok(http.StatusOK, http.MethodPost, "/api/admin/dead-letters/purge", `{"filter": {"kind": "save", "reason": "ttl_exceeded"}, "confirm": true}`)
	if res.body["purged"] != 1.0*float64(len(again)) {
		t.Errorf("purge by filter: %s", res.raw)
	}
	res = fx.ok(http.StatusOK, http.MethodPost, "/api/admin/dead-letters/purge", fmt.Sprintf(`{"ids": [%d, 999]}`, early[1]))
	if res.body["purged"] != 1.0 {
		t.Errorf("purge by ids: %s", res.raw)
	}
	if got := fx.deadLetterIDs(); len(got) != 0 {
		t.Errorf("after the purges the store holds %v", got)
	}
	// An empty filter with confirm purges everything.
	fx.bury("x", "x", weirtype.AbandonTTL, 2)
	fx.ok(http.StatusOK, http.MethodPost, "/api/admin/dead-letters/purge", `{"filter": {}, "confirm": true}`)
	if got := fx.deadLetterIDs(); len(got) != 0 {
		t.Errorf("after purging all the store holds %v", got)
	}
}

func TestBreakers(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "tok")
	res := fx.ok(http.StatusOK, http.MethodGet, "/api/admin/breakers", "")
	if got := field(res.body["breakers"], "name"); !slices.Equal(got, []any{"index", "llm"}) {
		t.Fatalf("breakers %v, want by name", got)
	}
	res = fx.ok(http.StatusOK, http.MethodPost, "/api/admin/breakers/llm/open", "")
	if res.body["state"] != "open" || res.body["opened_at"] == nil || fx.llm.State() != breaker.Open {
		t.Errorf("open: %s; breaker %v", res.raw, fx.llm.State())
	}
	if fx.idx.State() != breaker.Closed {
		t.Error("opening llm opened index too")
	}
	if _, err := fx.llm.Allow(); err == nil {
		t.Error("an opened breaker let a call through")
	}
	res = fx.ok(http.StatusOK, http.MethodGet, "/api/admin/breakers/llm", "")
	if res.body["state"] != "open" || res.body["rejected"] != 1.0 {
		t.Errorf("show: %s, want open with the rejected call counted", res.raw)
	}
	res = fx.ok(http.StatusOK, http.MethodPost, "/api/admin/breakers/llm/close", "")
	if res.body["state"] != "closed" || fx.llm.State() != breaker.Closed {
		t.Errorf("close: %s", res.raw)
	}
	if res := fx.ok(http.StatusNotFound, http.MethodPost, "/api/admin/breakers/db/open", ""); !strings.Contains(res.errorMessage(), "no breaker") {
		t.Errorf("unknown breaker: %q", res.errorMessage())
	}
}

func TestWorkflows(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "tok")
	ctx := context.Background()
	for i := range 5 {
		if _, _, err := fx.ex.CreateWorkflow(ctx, t0, store.WorkflowParams{ID: fmt.Sprintf("doc/%d", i), Name: "ingest", State: "upload", Data: []byte(`{"n":1}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fx.ex.AdvanceWorkflow(ctx, t0.Add(time.Minute), store.AdvanceParams{ID: "doc/1", Version: 1, State: "index"}); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.ex.AdvanceWorkflow(ctx, t0.Add(2*time.Minute), store.AdvanceParams{ID: "doc/1", Version: 2, State: "index", Status: weirtype.WorkflowFailed, Error: "index down", Data: []byte(`{"n":2}`)}); err != nil {
		t.Fatal(err)
	}
	var seen []any
	target := "/api/admin/workflows?limit=2"
	for range 5 {
		res := fx.ok(http.StatusOK, http.MethodGet, target, "")
		seen = append(seen, field(res.body["workflows"], "id")...)
		next, ok := res.body["next_after"].(string)
		if !ok {
			break
		}
		target = "/api/admin/workflows?limit=2&after=" + url.QueryEscape(next)
	}
	if !slices.Equal(seen, []any{"doc/0", "doc/1", "doc/2", "doc/3", "doc/4"}) {
		t.Errorf("paged %v, want each once", seen)
	}
	res := fx.ok(http.StatusOK, http.MethodGet, "/api/admin/workflows?status=failed", "")
	if got := field(res.body["workflows"], "id"); !slices.Equal(got, []any{"doc/1"}) {
		t.Errorf("failed: %v", got)
	}
	res = fx.ok(http.StatusOK, http.MethodGet, "/api/admin/workflows/"+url.PathEscape("doc/1"), "")
	wf, _ := res.body["workflow"].(map[string]any)
	if wf["state"] != "index" || wf["status"] != "failed" || wf["version"] != 3.0 || wf["error"] != "index down" {
		t.Errorf("workflow %v", wf)
	}
	if d, _ := json.Marshal(wf["data"]); string(d) != `{"n":2}` {
		t.Errorf("data %s, want the JSON as stored: %s", d, res.raw)
	}
	if got := field(res.body["history"], "state"); !slices.Equal(got, []any{"upload", "index", "index"}) {
		t.Errorf("history states %v", got)
	}
	if got := field(res.body["history"], "from_state"); !slices.Equal(got, []any{"", "upload", "index"}) {
		t.Errorf("history from states %v", got)
	}
	res = fx.ok(http.StatusOK, http.MethodGet, "/api/admin/workflows/"+url.PathEscape("doc/1")+"?limit=1&after_version=1", "")
	if got := field(res.body["history"], "version"); !slices.Equal(got, []any{2.0}) || res.body["next_after_version"] != 2.0 {
		t.Errorf("history page: %v, next %v", got, res.body["next_after_version"])
	}
	fx.ok(http.StatusNotFound, http.MethodGet, "/api/admin/workflows/nope", "")
}

func TestOutboxBacklog(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "tok")
	res := fx.ok(http.StatusOK, http.MethodGet, "/api/admin/outbox", "")
	if res.body["pending"] != 0.0 || res.body["oldest_pending_at"] != nil || res.body["oldest_pending_age_seconds"] != nil {
		t.Errorf("empty outbox: %s", res.raw)
	}
	if _, err := fx.ex.AddOutbox(context.Background(), t0, []store.OutboxMessage{{Topic: "t"}, {Topic: "t"}}); err != nil {
		t.Fatal(err)
	}
	fx.clk.Advance(90 * time.Second)
	res = fx.ok(http.StatusOK, http.MethodGet, "/api/admin/outbox", "")
	if res.body["pending"] != 2.0 || res.body["oldest_pending_age_seconds"] != 90.0 || res.body["oldest_pending_at"] != t0.Format(time.RFC3339) {
		t.Errorf("backlog: %s", res.raw)
	}
}

func TestStuck(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "tok")
	fx.insert("parse", "default", 2)
	stuck := fx.claim("default", 1)[0]
	fx.clk.Advance(20 * time.Minute)
	fx.insert("parse", "default", 1)
	res := fx.ok(http.StatusOK, http.MethodGet, "/api/admin/stuck", "")
	if got := numbers(field(res.body["jobs"], "id")); !slices.Equal(got, []int64{stuck.ID}) || res.body["older_than"] != "10m0s" {
		t.Errorf("stuck: %s", res.raw)
	}
	// The running job and the available one waiting since t0 are stuck.
	if res.body["stuck"] != 2.0 {
		t.Errorf("stuck count %v, want 2: %s", res.body["stuck"], res.raw)
	}
	res = fx.ok(http.StatusOK, http.MethodGet, "/api/admin/stuck?older_than=30m", "")
	if got := numbers(field(res.body["jobs"], "id")); len(got) != 0 || res.body["stuck"] != 0.0 {
		t.Errorf("stuck for 30m: %s", res.raw)
	}
}

func TestReindex(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "tok")
	res := fx.ok(http.StatusAccepted, http.MethodPost, "/api/admin/reindex", "")
	if res.body["job_id"] != 1.0 || res.body["outcome"] != "inserted" || !slices.Equal(fx.reindex.started, []string{admin.ReindexTriggerAPI}) {
		t.Errorf("start: %s; started %v", res.raw, fx.reindex.started)
	}
	res = fx.ok(http.StatusOK, http.MethodGet, "/api/admin/reindex", "")
	if !strings.Contains(res.raw, `"runs": []`) {
		t.Errorf("no runs: %s, want [] not null", res.raw)
	}
	fx.reindex.runs = []admin.ReindexRun{{ID: 2, Status: "running", Total: 10, Checked: 4}, {ID: 1, Status: "done"}}
	res = fx.ok(http.StatusOK, http.MethodGet, "/api/admin/reindex?limit=1", "")
	if got := field(res.body["runs"], "checked"); !slices.Equal(got, []any{4.0}) {
		t.Errorf("runs %v", got)
	}
	// Without a Reindexer the paths are not served.
	h, err := admin.New(admin.Config{Store: fx.ex})
	if err != nil {
		t.Fatal(err)
	}
	open := &fixture{t: t, h: h, logs: &bytes.Buffer{}}
	open.ok(http.StatusNotFound, http.MethodPost, "/api/admin/reindex", "")
}

// The admin API takes no more of the store than admin.Store: the
// operator's roles and a few reads, none of a worker's (claims, leases,
// the outbox relay's).
func TestAdminTakesOnlyTheStoreItUses(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "")
	narrow := struct{ admin.Store }{fx.ex}
	if _, worker := any(narrow).(store.Leases); worker {
		t.Fatal("the narrow store has a worker's methods")
	}
	h, err := admin.New(admin.Config{Store: narrow})
	if err != nil {
		t.Fatal(err)
	}
	open := &fixture{t: t, h: h, logs: &bytes.Buffer{}}
	for _, path := range []string{"/api/admin/jobs", "/api/admin/dead-letters", "/api/admin/workflows", "/api/admin/outbox", "/api/admin/stuck"} {
		open.ok(http.StatusOK, http.MethodGet, path, "")
	}
}

// Every bad request gets its 4xx, naming the problem, and changes nothing.
func TestBadRequests(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "tok")
	fx.bury("parse", "default", weirtype.AbandonPermanent, 1)
	for _, tc := range []struct {
		method, target, body string
		code                 int
		says                 string
	}{
		{"GET", "/api/admin/jobs?state=sleeping", "", 400, `state "sleeping" is unknown`},
		{"GET", "/api/admin/jobs?state=available,", "", 400, `state "" is unknown`},
		{"GET", "/api/admin/jobs?limit=0", "", 400, "limit"},
		{"GET", "/api/admin/jobs?limit=501", "", 400, "from 1 to 500"},
		{"GET", "/api/admin/jobs?limit=ten", "", 400, "limit"},
		{"GET", "/api/admin/jobs?before=-3", "", 400, "before"},
		{"GET", "/api/admin/jobs?before=abc", "", 400, "cursor"},
		{"GET", "/api/admin/jobs?before=1&before=2", "", 400, "given 2 times"},
		{"GET", "/api/admin/jobs?sate=dead", "", 400, `unknown parameter "sate"`},
		{"GET", "/api/admin/jobs?queue=" + strings.Repeat("q", 300), "", 400, "at most 200"},
		{"GET", "/api/admin/jobs?kind=%ff", "", 400, "not valid text"},
		{"GET", "/api/admin/jobs?%zz", "", 400, "bad query"},
		{"GET", "/api/admin/jobs/0", "", 400, "job id"},
		{"GET", "/api/admin/jobs/x1", "", 400, "job id"},
		{"GET", "/api/admin/jobs/99999999999999999999", "", 400, "job id"},
		{"GET", "/api/admin/jobs/1?verbose=1", "", 400, "unknown parameter"},
		{"POST", "/api/admin/jobs/abc/retry", "", 400, "job id"},
		{"POST", "/api/admin/jobs/retry", "", 400, "empty request body"},
		{"POST", "/api/admin/jobs/retry", `{"ids": []}`, 400, "no ids"},
		{"POST", "/api/admin/jobs/retry", `{"ids": [0]}`, 400, "not positive"},
		{"POST", "/api/admin/jobs/retry", `{"ids": ["1"]}`, 400, "bad JSON"},
		{"POST", "/api/admin/jobs/retry", `{"ids": [1], "all": true}`, 400, `unknown field "all"`},
		{"POST", "/api/admin/jobs/cancel", `{"ids": [1]} {"ids": [2]}`, 400, "more than one"},
		{"POST", "/api/admin/jobs/cancel", `[1, 2]`, 400, "bad JSON"},
		{"POST", "/api/admin/jobs/cancel", `{"ids": [` + strings.Repeat("1,", 500) + `1]}`, 400, "at most 500"},
		{"GET", "/api/admin/dead-letters?reason=tired", "", 400, `reason "tired" is unknown`},
		{"GET", "/api/admin/dead-letters?job_id=x", "", 400, "job_id"},
		{"GET", "/api/admin/dead-letters?job_id=-3", "", 400, "job_id"},
		{"POST", "/api/admin/dead-letters/requeue", `{"filter": {"job_id": -3}, "confirm": true}`, 400, "job_id"},
		{"POST", "/api/admin/dead-letters/requeue", `{"filter": {"job_id": "7"}, "confirm": true}`, 400, "bad JSON"},
		{"GET", "/api/admin/dead-letters?failed_before=yesterday", "", 400, "RFC 3339"},
		{"GET", "/api/admin/dead-letters?failed_after=-5m", "", 400, "age"},
		{"GET", "/api/admin/dead-letters?failed_after=999999999h", "", 400, "age"},
		{"GET", "/api/admin/dead-letters?after=x", "", 400, "after"},
		{"GET", "/api/admin/dead-letters/export?reason=x", "", 400, "reason"},
		{"GET", "/api/admin/dead-letters/export?limit=0", "", 400, "limit"},
		{"GET", "/api/admin/dead-letters/-1", "", 400, "dead letter id"},
		{"POST", "/api/admin/dead-letters/requeue", `{}`, 400, "want"},
		{"POST", "/api/admin/dead-letters/requeue", `{"ids": [1], "filter": {}}`, 400, "not both"},
		{"POST", "/api/admin/dead-letters/requeue", `{"filter": {"reason": "nope"}, "confirm": true}`, 400, "reason"},
		{"POST", "/api/admin/dead-letters/requeue", `{"filter": {"failed_before": "soon"}, "confirm": true}`, 400, "failed_before"},
		{"POST", "/api/admin/dead-letters/requeue", `{"filter": {"kind": "parse"}}`, 400, `"confirm": true`},
		{"POST", "/api/admin/dead-letters/purge", `{"filter": {"failed_before": "0001-01-01T00:00:00Z"}, "confirm": true}`, 400, "failed_before"},
		{"POST", "/api/admin/dead-letters/purge", `{"filter": {"failed_after": "1969-12-31T23:59:59Z"}, "confirm": true}`, 400, "1970"},
		{"GET", "/api/admin/dead-letters?failed_before=0001-01-01T00:00:00Z", "", 400, "failed_before"},
		{"GET", "/api/admin/workflows?updated_before=1900-01-01T00:00:00Z", "", 400, "updated_before"},
		{"GET", "/api/admin/workflows/a%00b", "", 400, "workflow id"},
		{"GET", "/api/admin/workflows/a%07b", "", 400, "control character"},
		{"GET", "/api/admin/workflows/%ff", "", 400, "workflow id"},
		{"GET", "/api/admin/workflows/" + strings.Repeat("w", 201), "", 400, "at most 200"},
		{"POST", "/api/admin/dead-letters/purge", `{"filter": {"kind": "parse"}, "confirm": false}`, 400, "confirm"},
		{"POST", "/api/admin/dead-letters/purge", `{"ids": [1]`, 400, "bad JSON"},
		{"GET", "/api/admin/workflows?status=paused", "", 400, `status "paused"`},
		{"GET", "/api/admin/workflows?updated_before=x", "", 400, "updated_before"},
		{"GET", "/api/admin/workflows/w?after_version=-1", "", 400, "after_version"},
		{"GET", "/api/admin/stuck?older_than=0s", "", 400, "positive duration"},
		{"GET", "/api/admin/stuck?older_than=1y", "", 400, "older_than"},
		{"GET", "/api/admin/outbox?x=1", "", 400, "unknown parameter"},
		{"GET", "/api/admin/reindex?limit=1000", "", 400, "limit"},
		{"GET", "/api/admin/nope", "", 404, "no such endpoint"},
		{"GET", "/api/admin/jobs/1/retry", "", 405, "use POST"},
		{"DELETE", "/api/admin/jobs/1", "", 405, "use GET, HEAD"},
		{"PUT", "/api/admin/dead-letters/purge", "", 405, "use POST"},
		{"POST", "/api/admin/outbox", "", 405, "use GET"},
	} {
		res := fx.do(tc.method, tc.target, tc.body)
		if res.code != tc.code || !strings.Contains(res.errorMessage(), tc.says) {
			t.Errorf("%s %s %s: status %d, error %q; want %d saying %q", tc.method, tc.target, tc.body, res.code, res.errorMessage(), tc.code, tc.says)
		}
		if tc.code == 405 && res.header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", tc.method, tc.target)
		}
	}
	if got := fx.deadLetterIDs(); len(got) != 1 {
		t.Errorf("bad requests changed the dead letters: %v", got)
	}
	if logs := fx.logs.String(); logs != "" {
		t.Errorf("a client's mistake was logged as a failure: %s", logs)
	}
}

func TestBodyLimits(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "tok")
	big := `{"ids": [1` + strings.Repeat(", 1", admin.DefaultMaxBodyBytes/3) + `]}`
	res := fx.do(http.MethodPost, "/api/admin/dead-letters/purge", big)
	if res.code != http.StatusRequestEntityTooLarge || !strings.Contains(res.errorMessage(), "over 1048576 bytes") {
		t.Errorf("a body over 1 MiB: status %d, %q; want 413", res.code, res.errorMessage())
	}
	req := `{"ids": [1]}`
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ";;"} {
		r := httptestRequest(http.MethodPost, "/api/admin/jobs/retry", req, ct, "Bearer tok")
		rec := serve(fx.h, r)
		if rec.Code != http.StatusUnsupportedMediaType || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("Content-Type %q: status %d, %s; want 415 JSON", ct, rec.Code, rec.Body)
		}
	}
}

// A POST without Content-Type: application/json is refused, with a body
// or without, before it changes anything: a form or a simple cross-site
// fetch cannot send that type.
func TestPostNeedsJSONContentType(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "")
	ids := fx.bury("parse", "default", weirtype.AbandonPermanent, 2)
	for _, tc := range []struct{ target, body, ct string }{
		{"/api/admin/dead-letters/purge", `{"filter": {}, "confirm": true}`, ""},
		{"/api/admin/dead-letters/purge", `{"filter": {}, "confirm": true}`, "text/plain"},
		{"/api/admin/dead-letters/requeue", `{"filter": {}, "confirm": true}`, ""},
		{"/api/admin/breakers/llm/open", "", ""},
		{"/api/admin/breakers/llm/open", "", "application/x-www-form-urlencoded"},
		{"/api/admin/reindex", "", ""},
	} {
		rec := serve(fx.h, httptestRequest(http.MethodPost, tc.target, tc.body, tc.ct, ""))
		var body struct{ Error string }
		if rec.Code != http.StatusUnsupportedMediaType || json.Unmarshal(rec.Body.Bytes(), &body) != nil || !strings.Contains(body.Error, "application/json") {
			t.Errorf("POST %s, Content-Type %q: status %d, %s; want 415 naming application/json", tc.target, tc.ct, rec.Code, rec.Body)
		}
	}
	if got := fx.deadLetterIDs(); !slices.Equal(got, ids) {
		t.Errorf("a refused purge or requeue changed the dead letters: %v, want %v", got, ids)
	}
	if fx.llm.State() != breaker.Closed || len(fx.reindex.started) != 0 {
		t.Errorf("a refused POST opened a breaker or started a reindex")
	}
	// With the type, and no body, a POST goes through.
	if rec := serve(fx.h, httptestRequest(http.MethodPost, "/api/admin/breakers/llm/open", "", "application/json; charset=utf-8", "")); rec.Code != http.StatusOK {
		t.Errorf("POST open with application/json: status %d, %s", rec.Code, rec.Body)
	}
}

// A cross-origin browser request that changes something is refused, with
// a token or without; a same-origin one, or one not from a browser, goes
// through.
func TestCrossOriginRefused(t *testing.T) {
	t.Parallel()
	for _, token := range []string{"", "tok"} {
		fx := newFixture(t, token)
		ids := fx.bury("parse", "default", weirtype.AbandonPermanent, 1)
		auth := ""
		if token != "" {
			auth = "Bearer " + token
		}
		for _, hdr := range []map[string]string{
			{"Sec-Fetch-Site": "cross-site"},
			{"Sec-Fetch-Site": "same-site"},
			{"Origin": "http://evil.example"},
			{"Origin": "http://evil.example:8080"},
		} {
			for _, target := range []string{"/api/admin/dead-letters/purge", "/api/admin/breakers/llm/open"} {
				r := httptestRequest(http.MethodPost, target, `{"filter": {}, "confirm": true}`, "application/json", auth)
				if target != "/api/admin/dead-letters/purge" {
					r = httptestRequest(http.MethodPost, target, "", "application/json", auth)
				}
				for k, v := range hdr {
					r.Header.Set(k, v)
				}
				rec := serve(fx.h, r)
				var body struct{ Error string }
				if rec.Code != http.StatusForbidden || json.Unmarshal(rec.Body.Bytes(), &body) != nil || !strings.Contains(body.Error, "cross-origin") {
					t.Errorf("token %q, %v, POST %s: status %d, %s; want 403 JSON", token, hdr, target, rec.Code, rec.Body)
				}
			}
		}
		if got := fx.deadLetterIDs(); !slices.Equal(got, ids) || fx.llm.State() != breaker.Closed {
			t.Errorf("token %q: a cross-origin request changed something: %v, breaker %v", token, got, fx.llm.State())
		}
		for _, hdr := range []map[string]string{
			{"Sec-Fetch-Site": "same-origin"},
			{"Origin": "http://localhost:8080"},
			{},
		} {
			r := httptestRequest(http.MethodPost, "/api/admin/breakers/llm/open", "", "application/json", auth)
			for k, v := range hdr {
				r.Header.Set(k, v)
			}
			if rec := serve(fx.h, r); rec.Code != http.StatusOK {
				t.Errorf("token %q, %v: status %d, %s; want 200", token, hdr, rec.Code, rec.Body)
			}
		}
		// Reading is safe: a cross-site GET is answered (the browser keeps
		// the answer from the page).
		r := httptestRequest(http.MethodGet, "/api/admin/jobs", "", "", auth)
		r.Header.Set("Sec-Fetch-Site", "cross-site")
		if rec := serve(fx.h, r); rec.Code != http.StatusOK {
			t.Errorf("token %q: cross-site GET: status %d", token, rec.Code)
		}
	}
}

// Without a token, a request naming a host other than loopback is refused:
// a DNS-rebinding page reaches 127.0.0.1 under its own name.
func TestTokenlessRefusesOtherHosts(t *testing.T) {
	t.Parallel()
	open := newFixture(t, "")
	ids := open.bury("parse", "default", weirtype.AbandonPermanent, 1)
	for _, host := range []string{"evil.example:8080", "evil.example", "localhost.evil.example:8080", "10.0.0.1:8080", "", "[::2]:80"} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			r := httptestRequest(method, "/api/admin/dead-letters/purge", `{"filter": {}, "confirm": true}`, "application/json", "")
			if method == http.MethodGet {
				r = httptestRequest(method, "/api/admin/jobs", "", "", "")
			}
			r.Host = host
			rec := serve(open.h, r)
			var body struct{ Error string }
			if rec.Code != http.StatusForbidden || json.Unmarshal(rec.Body.Bytes(), &body) != nil || !strings.Contains(body.Error, "loopback") {
				t.Errorf("Host %q, %s: status %d, %s; want 403 JSON naming loopback", host, method, rec.Code, rec.Body)
			}
		}
	}
	if got := open.deadLetterIDs(); !slices.Equal(got, ids) {
		t.Errorf("a rebinding request purged: %v left, want %v", got, ids)
	}
	for _, host := range []string{"127.0.0.1:8080", "127.0.0.1", "localhost", "LocalHost:80", "[::1]:8080", "[::1]", "127.9.9.9:1"} {
		r := httptestRequest(http.MethodGet, "/api/admin/jobs", "", "", "")
		r.Host = host
		if rec := serve(open.h, r); rec.Code != http.StatusOK {
			t.Errorf("Host %q: status %d, %s; want 200", host, rec.Code, rec.Body)
		}
	}
	// With a token, the host is not checked: the token is the defence.
	withToken := newFixture(t, "tok")
	r := httptestRequest(http.MethodGet, "/api/admin/jobs", "", "", "Bearer tok")
	r.Host = "weir.internal:8080"
	if rec := serve(withToken.h, r); rec.Code != http.StatusOK {
		t.Errorf("token, Host weir.internal: status %d, want 200", rec.Code)
	}
}

// A workflow id the store refuses answers a generic 400: the store's
// text, which may name the driver, is logged, not answered.
func TestWorkflowIDChecked(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "tok")
	for _, target := range []string{"/api/admin/workflows/doc%001", "/api/admin/workflows/doc%0A1", "/api/admin/workflows/%c3%28"} {
		res := fx.do(http.MethodGet, target, "")
		if res.code != http.StatusBadRequest || !strings.Contains(res.errorMessage(), "workflow id") {
			t.Errorf("GET %s: status %d, %s; want 400 naming the workflow id", target, res.code, res.raw)
		}
	}
}

// FuzzQueryParams: whatever the query string of a GET endpoint, the API
// answers 2xx or 4xx in JSON with an error named, never a 500 nor a panic.
func FuzzQueryParams(f *testing.F) {
	paths := []string{"/api/admin/jobs", "/api/admin/dead-letters", "/api/admin/dead-letters/export", "/api/admin/workflows",
		"/api/admin/workflows/doc%2F1", "/api/admin/stuck", "/api/admin/reindex", "/api/admin/outbox", "/api/admin/jobs/1", "/api/admin/breakers"}
	for _, seed := range []string{
		"", "state=dead", "state=running,available&kind=a&kind=b&queue=q&before=5&limit=2", "limit=500", "limit=501", "before=0",
		"before=9223372036854775807", "before=9223372036854775808", "after=-1", "failed_before=2026-01-21T00:00:00Z",
		"failed_after=0001-01-01T00:00:00Z", "failed_after=9999-12-31T23:59:59.999999999Z", "failed_before=2562047h",
		"failed_before=-1ns", "reason=ttl_exceeded", "status=running&name=%00", "updated_before=1e9h", "older_than=876000h",
		"older_than=1ns", "after_version=3&limit=1", "kind=%ff%fe", "%", "a=%zz", "limit=+7", "limit= 7", "state=%20dead",
	} {
		for i := range paths {
			f.Add(uint8(i), seed)
		}
	}
	fx := newFixture(f, "")
	ctx := context.Background()
	fx.bury("parse", "default", weirtype.AbandonPermanent, 2)
	fx.insert("parse", "default", 3)
	fx.claim("default", 1)
	if _, _, err := fx.ex.CreateWorkflow(ctx, t0, store.WorkflowParams{ID: "doc/1", Name: "n", State: "s"}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, which uint8, rawQuery string) {
		target := paths[int(which)%len(paths)]
		r := httptestRequest(http.MethodGet, target, "", "", "")
		r.URL.RawQuery = rawQuery
		rec := serve(fx.h, r)
		if rec.Code >= 500 || rec.Code < 200 {
			t.Fatalf("GET %s?%s: status %d: %s\nlog: %s", target, rawQuery, rec.Code, rec.Body, fx.logs)
		}
		ct := rec.Header().Get("Content-Type")
		if rec.Code >= 400 {
			var body struct{ Error string }
			if ct != "application/json" || json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Error == "" {
				t.Fatalf("GET %s?%s: status %d, %s: want a JSON error", target, rawQuery, rec.Code, rec.Body)
			}
		}
	})
}
