package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/internal/testenv"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/sqlite"
)

// Settings of the Prometheus test: the test copy of the rules makes
// StuckDocumentsWarning fire at more than stuckThreshold stuck documents
// held for stuckFor, instead of 50 for an hour.
const (
	stuckThreshold = 2
	stuckFor       = "2s"
	stuckKind      = "e2e.stuck"
	stuckQueue     = "e2e-stuck" // a queue weir run has no workers for
)

// TestPrometheusFiresStuckDocumentsWarning runs weir run and a real
// Prometheus that scrapes it every second and evaluates the alert rules
// of deploy/prometheus/weir-alerts.yml, with StuckDocumentsWarning's
// threshold and `for` made small (the expression stays the real one).
// Jobs of a kind no worker handles, in a queue weir run does not work,
// inserted due an hour ago, are stuck (weir run counts a job due and
// waiting for longer than 10 minutes as stuck); the test waits for
// Prometheus to report the alert firing for their collection.
func TestPrometheusFiresStuckDocumentsWarning(t *testing.T) {
	skipShort(t, "Prometheus")
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		testenv.Missing(t, "prometheus not found (install Debian's prometheus package)")
	}
	root := repoRoot(t)
	dir := t.TempDir()
	weir, data, weirAddr := weirRun(t, "e2e-prometheus")

	// Stuck documents, through the store on weir run's SQLite file.
	insertStuck(t, filepath.Join(data, "weir.db"), stuckThreshold+1)

	// Prometheus, with the test copy of the rules.
	rules := stuckRulesCopy(t, filepath.Join(root, "deploy", "prometheus", "weir-alerts.yml"))
	rulesPath := filepath.Join(dir, "weir-alerts.yml")
	if err := os.WriteFile(rulesPath, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - %s
scrape_configs:
  - job_name: weir
    static_configs:
      - targets: [%q]
`, rulesPath, weirAddr)
	configPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := freeAddr(t)
	prom := start(t, promBin, []string{
		"--config.file=" + configPath,
		"--storage.tsdb.path=" + filepath.Join(dir, "prometheus"),
		"--web.listen-address=" + promAddr,
		"--log.level=warn",
	})
	t.Cleanup(func() { _ = prom.stop() })

	// Poll the alerts until StuckDocumentsWarning fires for the kind.
	began := time.Now()
	var found alert
	last, ok := eventually.Wait(60*time.Second, func() (bool, string) {
		body, err := getBody("http://" + promAddr + "/api/v1/alerts")
		if err != nil {
			return false, err.Error()
		}
		a, ok := firing(t, body, "StuckDocumentsWarning", stuckKind)
		found = a
		return ok, body
	})
	if !ok {
		targets, _ := getBody("http://" + promAddr + "/api/v1/targets")
		metrics, _ := getBody("http://" + weirAddr + "/metrics")
		t.Fatalf("StuckDocumentsWarning for %s not firing after 60s\nalerts: %s\ntargets: %s\nweir's stuck gauge:\n%s\nprometheus log:\n%s\nweir log:\n%s",
			stuckKind, last, targets, grepLines(metrics, "retry_job_stuck_documents"), prom.log(), weir.log())
	}
	t.Logf("StuckDocumentsWarning firing after %v: labels %v, value %s",
		time.Since(began).Round(100*time.Millisecond), found.Labels, found.Value)
	v, err := strconv.ParseFloat(found.Value, 64)
	if found.Labels["severity"] != "warning" || found.Labels["job"] != "weir" || err != nil || v != stuckThreshold+1 {
		t.Errorf("the alert has labels %v and value %s; want severity warning, job weir, value %d",
			found.Labels, found.Value, stuckThreshold+1)
	}
}

// stuckRulesCopy returns the rules file with StuckDocumentsWarning's
// threshold and `for` made small, failing the test if the file no longer
// has them where the substitution expects.
func stuckRulesCopy(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	const head = "- alert: StuckDocumentsWarning\n"
	i := strings.Index(s, head)
	if i < 0 {
		t.Fatalf("%s has no %q", path, strings.TrimSpace(head))
	}
	end := len(s)
	if j := strings.Index(s[i+len(head):], "- alert:"); j >= 0 {
		end = i + len(head) + j
	}
	block := s[i:end]
	for _, r := range []struct{ old, new string }{
		{"expr: retry_job_stuck_documents > 50\n", fmt.Sprintf("expr: retry_job_stuck_documents > %d\n", stuckThreshold)},
		{"for: 1h\n", "for: " + stuckFor + "\n"},
	} {
		if strings.Count(block, r.old) != 1 {
			t.Fatalf("%s: StuckDocumentsWarning's rule has no single %q to make small; update the test with the rule", path, strings.TrimSpace(r.old))
		}
		block = strings.Replace(block, r.old, r.new, 1)
	}
	return s[:i] + block + s[end:]
}

// insertStuck inserts n jobs of stuckKind into stuckQueue, due an hour
// ago, through a second store on weir run's SQLite file.
func insertStuck(t *testing.T, path string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if cur, latest, err := st.SchemaVersion(ctx); err != nil || cur != latest {
		t.Fatalf("weir run's store is at schema %d of %d (%v); want it migrated", cur, latest, err)
	}
	jobs := make([]store.InsertParams, n)
	for i := range jobs {
		jobs[i] = store.InsertParams{Kind: stuckKind, Queue: stuckQueue, Source: "e2e"}
	}
	// Inserted an hour ago, so due an hour ago.
	if _, err := st.Executor().Insert(ctx, time.Now().Add(-time.Hour), jobs); err != nil {
		t.Fatalf("insert stuck jobs: %v", err)
	}
}

// alert is one alert of Prometheus's /api/v1/alerts.
type alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
	Value  string            `json:"value"`
}

// firing returns the alert named name for collection if body, an answer of
// /api/v1/alerts, has it firing.
func firing(t *testing.T, body, name, collection string) (alert, bool) {
	t.Helper()
	var res struct {
		Status string `json:"status"`
		Data   struct {
			Alerts []alert `json:"alerts"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		t.Fatalf("/api/v1/alerts: %v: %s", err, body)
	}
	for _, a := range res.Data.Alerts {
		if a.Labels["alertname"] == name && a.Labels["collection"] == collection && a.State == "firing" {
			return a, true
		}
	}
	return alert{}, false
}

// getBody GETs u and returns its body, or an error for a status other
// than 200.
func getBody(u string) (string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", u, resp.Status, b)
	}
	return string(b), nil
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	return strings.Join(out, "\n")
}
