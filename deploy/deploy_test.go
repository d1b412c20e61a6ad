package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/internal/testenv"
	"github.com/weirhq/weir/metrics"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

const (
	rulesFile     = "prometheus/weir-alerts.yml"
	rulesTestFile = "prometheus/weir-alerts.test.yml"
	dashboardFile = "grafana/weir-dashboard.json"
)

// The alerts the rules file must define: spec 04's three and weir's two.
var wantAlerts = []string{
	"StuckDocumentsWarning",
	"MaxRetriesExceededCritical",
	"RetryJobFailed",
	"WeirBreakerOpen",
	"WeirDeadLetterGrowth",
}

// The metrics the dashboard must show: spec 04's panels (stuck documents,
// retry rate, max retries exceeded, backoff skipped, job duration), and
// throughput, jobs by state, breakers and dead letters.
var wantPanelMetrics = []string{
	"retry_job_stuck_documents",
	"retry_job_documents_requeued_total",
	"retry_job_documents_max_retries_exceeded_total",
	"retry_job_documents_skipped_backoff_total",
	"retry_job_duration_seconds",
	"weir_jobs_completed_total",
	"weir_jobs",
	"weir_breaker_state",
	"weir_jobs_dead_lettered_total",
}

// TestDashboardNamesOnlyRegisteredMetrics parses the dashboard and checks
// every panel's queries (and the template variables') against the metrics
// weir registers, and that the dashboard has the panels it must.
func TestDashboardNamesOnlyRegisteredMetrics(t *testing.T) {
	registered := registeredMetrics(t)
	d := readDashboard(t)
	if d.Title == "" || d.UID == "" {
		t.Errorf("the dashboard has title %q and uid %q; want both", d.Title, d.UID)
	}
	shown := map[string]bool{}
	ids := map[int]string{}
	for _, p := range d.allPanels() {
		if prev, ok := ids[p.ID]; ok {
			t.Errorf("panels %q and %q share the id %d", prev, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || p.GridPos == nil || p.GridPos.W <= 0 || p.GridPos.H <= 0 {
			t.Errorf("panel %d (%q) lacks a title or a size", p.ID, p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		for _, tg := range p.Targets {
			names := metricNames(tg.Expr)
			if len(names) == 0 {
				t.Errorf("panel %q: query %s %q names no metric", p.Title, tg.RefID, tg.Expr)
			}
			for _, n := range names {
				if !registered[n] {
					t.Errorf("panel %q: query %s names %s, which weir does not register (%q)", p.Title, tg.RefID, n, tg.Expr)
				}
				shown[baseName(n, registered)] = true
			}
		}
	}
	// Query variables: label_values(metric, label) names a metric.
	labelValues := regexp.MustCompile(`^label_values\(\s*([^,]+?)\s*,\s*\w+\s*\)$`)
	for _, v := range d.Templating.List {
		if v.Definition == "" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("template variable %s: %q is not label_values(metric, label), which the test reads", v.Name, v.Definition)
			continue
		}
		for _, n := range metricNames(m[1]) {
			if !registered[n] {
				t.Errorf("template variable %s names %s, which weir does not register", v.Name, n)
			}
		}
	}
	for _, n := range wantPanelMetrics {
		if !shown[n] {
			t.Errorf("no panel shows %s", n)
		}
	}
}

// TestAlertRulesNameOnlyRegisteredMetrics checks the rules file's alerts
// and the metrics their expressions name.
func TestAlertRulesNameOnlyRegisteredMetrics(t *testing.T) {
	registered := registeredMetrics(t)
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	alertRE := regexp.MustCompile(`(?m)^\s*- alert:\s*(\S+)\s*$`)
	var alerts []string
	for _, m := range alertRE.FindAllStringSubmatch(string(b), -1) {
		alerts = append(alerts, m[1])
	}
	for _, a := range wantAlerts {
		if !slices.Contains(alerts, a) {
			t.Errorf("%s has no alert %s (it has %v)", rulesFile, a, alerts)
		}
	}
	exprs := ruleExprs(t, string(b))
	if len(exprs) != len(alerts) {
		t.Errorf("%s: %d alerts but %d expressions", rulesFile, len(alerts), len(exprs))
	}
	for _, e := range exprs {
		names := metricNames(e)
		if len(names) == 0 {
			t.Errorf("expression %q names no metric", e)
		}
		for _, n := range names {
			if !registered[n] {
				t.Errorf("expression %q names %s, which weir does not register", e, n)
			}
		}
	}
}

// TestPromtoolChecksRules runs promtool check rules and promtool test
// rules on the rules file, as CI does.
func TestPromtoolChecksRules(t *testing.T) {
	promtool := needPromtool(t)
	for _, args := range [][]string{
		{"check", "rules", rulesFile},
		{"test", "rules", rulesTestFile},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestPromtoolParsesDashboardQueries writes every panel's query as a
// recording rule, with Grafana's variables filled in, and has promtool
// check that they parse.
func TestPromtoolParsesDashboardQueries(t *testing.T) {
	promtool := needPromtool(t)
	d := readDashboard(t)
	fill := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$instance", ".*")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, p := range d.allPanels() {
		for _, tg := range p.Targets {
			n++
			q, err := json.Marshal(fill.Replace(tg.Expr)) // a JSON string is a YAML string
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&rules, "      - record: dashboard:panel%d:%s\n        expr: %s\n", p.ID, tg.RefID, q)
		}
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules on the dashboard's %d queries: %v\n%s\n%s", n, err, out, rules.String())
	}
}

func TestMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`retry_job_stuck_documents > 50`, []string{"retry_job_stuck_documents"}},
		{`sum by (le, kind) (rate(a_bucket{instance=~"$instance", x!="y"}[$__rate_interval]))`, []string{"a_bucket"}},
		{`histogram_quantile(0.95, sum without (pod) (rate(h_bucket[5m] offset 1h)))`, []string{"h_bucket"}},
		{`a / on (job) group_left (kind) b and c unless d or e`, []string{"a", "b", "c", "d", "e"}},
		{`sum(x) by (collection) > bool 1e3`, []string{"x"}},
		{`{__name__="x"} + count(y) + vector(1) + label_replace(z, "a", "$1", "b", "(.*)")`, []string{"y", "z"}},
		{`rate(ns:rule:sum[1h:5m]) == inf or nan`, []string{"ns:rule:sum"}},
		{`'single "quoted" ( string' + q`, []string{"q"}},
	} {
		if got := metricNames(c.expr); !slices.Equal(got, c.want) {
			t.Errorf("metricNames(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
}

// registeredMetrics returns the names of the series weir exports: those a
// registry populated by metrics.New (with a store) and
// metrics.NewBreakerCollector gathers once every hook has recorded
// something, with the _bucket, _sum and _count series of histograms and
// summaries.
func registeredMetrics(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	st := &countStore{counts: []store.JobCount{
		{Queue: "default", Kind: "parse", State: weirtype.StateAvailable, Count: 1, Stuck: 1},
	}}
	m, err := metrics.New(reg, metrics.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	b, err := breaker.New(breaker.Config{Name: "llm"})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(metrics.NewBreakerCollector(b)); err != nil {
		t.Fatal(err)
	}
	// Labelled series appear at their first event: record one of each.
	m.Enqueued("parse", "default", weirtype.Inserted)
	m.AttemptDone("parse", "default", metrics.Completed, time.Second)
	m.AttemptDone("parse", "default", metrics.Failed, time.Second)
	m.AttemptDone("parse", "default", metrics.Late, time.Second)
	m.DeadLettered("parse", "default", weirtype.AbandonPermanent)
	m.Rescued(1)
	m.Swept("parse", 1, 1, 1)
	m.SweepRun(time.Second, nil)

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
		// Typed by the samples, not f.GetType(): naming dto's constants
		// would make client_model a direct dependency for one test.
		for _, m := range f.GetMetric() {
			if m.GetHistogram() != nil {
				names[f.GetName()+"_bucket"] = true
			}
			if m.GetHistogram() != nil || m.GetSummary() != nil {
				names[f.GetName()+"_sum"] = true
				names[f.GetName()+"_count"] = true
			}
		}
	}
	// A sanity check that the registry is the one meant: if these are
	// missing, the hooks above no longer make the series.
	for _, n := range append(slices.Clone(wantPanelMetrics), "retry_job_runs_total", "retry_job_failed_documents", "weir_breaker_failures") {
		if !names[n] {
			t.Fatalf("the registry gathers no %s; gathered %v", n, slices.Sorted(func(yield func(string) bool) {
				for n := range names {
					if !yield(n) {
						return
					}
				}
			}))
		}
	}
	return names
}

// baseName is the family name of a series name: n without a histogram's
// _bucket, _sum or _count suffix when that family is registered.
func baseName(n string, registered map[string]bool) string {
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(n, s); ok && registered[b] {
			return b
		}
	}
	return n
}

// countStore is a store.Store whose executor answers CountJobs, ListPauses
// (one operator's pause, so that the pause series are exported) and
// ListLimits (one limit with a maximum and a rate);
// any other method panics (the nil embedded interfaces), which the test
// would report.
type countStore struct {
	store.Store
	counts []store.JobCount
}

func (s *countStore) Executor() store.Executor { return countExecutor{s: s} }

type countExecutor struct {
	store.Executor
	s *countStore
}

func (e countExecutor) CountJobs(context.Context, time.Time) ([]store.JobCount, error) {
	return e.s.counts, nil
}

func (e countExecutor) ListPauses(_ context.Context, now time.Time) ([]*weirtype.Pause, error) {
	return []*weirtype.Pause{{Queue: "default", Cause: weirtype.PauseOperator, By: "test", PausedAt: now.Add(-time.Minute)}}, nil
}

func (e countExecutor) ListLimits(context.Context) ([]*weirtype.Limit, error) {
	return []*weirtype.Limit{{Key: "llm", Kinds: []string{"extract"}, MaxRunning: 4, Running: 1, Rate: 60, Per: time.Minute, WindowStarts: 3}}, nil
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos *struct {
		X, Y, W, H int
	} `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// allPanels returns the dashboard's panels, those inside rows included.
func (d dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	var d dashboard
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s is not a valid dashboard: %v", dashboardFile, err)
	}
	if !json.Valid(b) {
		t.Fatalf("%s is not valid JSON", dashboardFile)
	}
	if len(d.allPanels()) == 0 {
		t.Fatalf("%s has no panels", dashboardFile)
	}
	return d
}

// ruleExprs returns the expressions of a rules file. It reads them line by
// line, without a YAML parser (weir has none among its dependencies), so
// it insists that each expression be on one line.
func ruleExprs(t *testing.T, rules string) []string {
	t.Helper()
	var out []string
	for line := range strings.Lines(rules) {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "expr:")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if v == "" || v[0] == '|' || v[0] == '>' {
			t.Fatalf("%s: write each expr on one line, so the test can read it: %q", rulesFile, line)
		}
		out = append(out, v)
	}
	return out
}

func needPromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		testenv.Missing(t, "promtool not found (install Debian's prometheus package)")
	}
	return p
}

// labelListKeywords are the PromQL keywords followed by a parenthesised
// list of label names.
var labelListKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// wordKeywords are the PromQL words that are neither metrics nor
// followed by a parenthesised list.
var wordKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true,
	"inf": true, "nan": true, "start": true, "end": true,
}

// metricNames returns the metric names a PromQL expression selects, in
// order of first appearance: the identifiers that are not functions or
// aggregations (followed by "("), keywords, label names (inside braces or
// a by/without/on/ignoring/group_left/group_right list), strings, or
// numbers and durations. It is a small lexer, not a parser: enough for
// the dashboard's and the rules' queries, which promtool also parses.
func metricNames(expr string) []string {
	var out []string
	isStart := func(c byte) bool { return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
	isPart := func(c byte) bool { return isStart(c) || '0' <= c && c <= '9' }
	// skipTo returns the index just past the first close at or after i
	// that is outside a string.
	skipTo := func(i int, close byte) int {
		for i < len(expr) {
			c := expr[i]
			switch {
			case c == '"' || c == '\'' || c == '`':
				i = skipString(expr, i)
				continue
			case c == close:
				return i + 1
			}
			i++
		}
		return i
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(expr, i)
		case c == '{':
			i = skipTo(i+1, '}')
		case c == '[':
			i = skipTo(i+1, ']')
		case '0' <= c && c <= '9' || c == '.':
			for i < len(expr) && (isPart(expr[i]) || expr[i] == '.' || expr[i] == '+' && (expr[i-1] == 'e' || expr[i-1] == 'E')) {
				i++
			}
		case isStart(c):
			j := i
			for j < len(expr) && isPart(expr[j]) {
				j++
			}
			word := expr[i:j]
			k := j
			for k < len(expr) && (expr[k] == ' ' || expr[k] == '\t' || expr[k] == '\n') {
				k++
			}
			switch {
			case labelListKeywords[word]:
				if k < len(expr) && expr[k] == '(' {
					k = skipTo(k+1, ')')
				}
				i = k
				continue
			case k < len(expr) && expr[k] == '(':
				// A function or an aggregation.
			case hasWordAt(expr, k, "by") || hasWordAt(expr, k, "without"):
				// An aggregation with its clause first: sum by (x) (…).
			case wordKeywords[word]:
			default:
				if !slices.Contains(out, word) {
					out = append(out, word)
				}
			}
			i = j
		default:
			i++
		}
	}
	return out
}

// hasWordAt reports whether the identifier w starts at s[i].
func hasWordAt(s string, i int, w string) bool {
	if !strings.HasPrefix(s[i:], w) {
		return false
	}
	if j := i + len(w); j < len(s) {
		c := s[j]
		return !(c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9')
	}
	return true
}

// skipString returns the index just past the string literal that starts
// at s[i].
func skipString(s string, i int) int {
	q := s[i]
	for i++; i < len(s); i++ {
		switch {
		case s[i] == '\\' && q != '`':
			i++
		case s[i] == q:
			return i + 1
		}
	}
	return i
}
