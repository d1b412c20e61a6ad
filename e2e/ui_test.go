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
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/internal/testenv"
)

// screenshotsEnv names a directory the UI test copies its screenshots to,
// to keep them after the test's temporary directory is gone.
const screenshotsEnv = "WEIR_UI_SCREENSHOTS"

// TestUIRequeueDeadLetter runs weir run with a few poison files, so that
// dead letters exist, opens the web console in headless Chromium, selects
// one dead letter on the dead-letters page and clicks Requeue; the admin
// API then shows the dead letter gone and its job run again. Before, it
// pauses a mistyped queue (refused) and weir run's queue through the
// overview's form, and resumes it with the pause's button. Screenshots
// of the overview and the dead-letters page are kept (logged).
func TestUIRequeueDeadLetter(t *testing.T) {
	skipShort(t, "Chromium")
	chromium := findChromium()
	if chromium == "" {
		testenv.Missing(t, "chromium not found (install Debian's chromium package)")
	}
	root := repoRoot(t)
	dir := t.TempDir()
	weir, data, addr := weirRun(t, "e2e-ui", "-watch-every", "100ms")
	base := "http://" + addr
	// "/" redirects to the console, which weir run serves from the binary.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("GET /: %s to %q, want 302 to /ui/", resp.Status, resp.Header.Get("Location"))
	}

	// Poison files, which the pipeline dead-letters.
	poison, err := filepath.Glob(filepath.Join(root, "corpus", "poison", "*"))
	if err != nil || len(poison) == 0 {
		t.Fatalf("no poison files in the corpus: %v", err)
	}
	in := filepath.Join(data, "incoming", "poison")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range poison {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(in, filepath.Base(p))
		if err := os.WriteFile(dst+".tmp", b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(dst+".tmp", dst); err != nil {
			t.Fatal(err)
		}
	}
	var dls []deadLetter
	if _, ok := eventually.Wait(15*time.Second, func() (bool, string) {
		dls = listDeadLetters(t, base)
		return len(dls) == len(poison), ""
	}); !ok {
		t.Fatalf("%d dead letters after 15s, want %d (one per poison file); log:\n%s", len(dls), len(poison), weir.log())
	}
	target := dls[len(dls)/2]
	before := getJob(t, base, target.JobID)
	t.Logf("%d dead letters; requeueing dead letter %d (job %d, %s)", len(dls), target.ID, target.JobID, target.Source)

	// Chromium.
	opts := append(chromedp.DefaultExecAllocatorOptions[:0:0], chromedp.DefaultExecAllocatorOptions[:]...)
	opts = append(opts,
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(filepath.Join(dir, "chromium-profile")),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()
	jsErrors := make(chan string, 16)
	chromedp.ListenTarget(bctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			msg := e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
			select {
			case jsErrors <- msg:
			default:
			}
		}
	})

	shots := map[string][]byte{}
	shot := func(name string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			var b []byte
			if err := chromedp.FullScreenshot(&b, 100).Do(ctx); err != nil {
				return err
			}
			shots[name] = b
			return nil
		})
	}
	box := fmt.Sprintf(`input.dl-select[data-id="%d"]`, target.ID)
	var overviewStats, flash, pauseRefused, pausesText, pausesListed, limitsText string
	var checked bool
	// "/" redirects to /ui/, which shows the overview.
	step := func(what string) chromedp.Action {
		return chromedp.ActionFunc(func(context.Context) error {
			t.Logf("in Chromium: %s", what)
			return nil
		})
	}
	// The clicks get 25s of the 40: the rest is for the diagnosis of a
	// failure.
	rctx, cancelRun := context.WithTimeout(bctx, 25*time.Second)
	defer cancelRun()
	err = chromedp.Run(rctx,
		step("open /"),
		chromedp.Navigate(base+"/"),
		step("wait for the overview"),
		chromedp.WaitVisible(`#page-overview svg.chart`, chromedp.ByQuery),
		chromedp.WaitVisible(`#page-overview table`, chromedp.ByQuery), // the breakers' or stuck work's table: the admin API answered
		chromedp.Text(`#page-overview .stats`, &overviewStats, chromedp.ByQuery),
		shot("overview"),
		step("pause a queue with no job through the overview's form"),
		chromedp.SendKeys(`#pause-queue`, "held-by-console", chromedp.ByQuery),
		chromedp.Click(`#pause-button`, chromedp.ByQuery),
		chromedp.Poll(`(document.querySelector('#flash')?.textContent || '').includes('has no job and no pause')`, nil),
		chromedp.Text(`#flash`, &pauseRefused, chromedp.ByQuery),
		step("pause the queue of weir run"),
		chromedp.SetValue(`#pause-queue`, "default", chromedp.ByQuery),
		chromedp.SetValue(`#pause-reason`, "e2e hold", chromedp.ByQuery),
		chromedp.Click(`#pause-button`, chromedp.ByQuery),
		chromedp.WaitVisible(`#pauses table button`, chromedp.ByQuery), // the pause's Resume button
		chromedp.Text(`#pauses`, &pausesText, chromedp.ByQuery),
		chromedp.ActionFunc(func(context.Context) error {
			pausesListed = getPauses(t, base)
			return nil
		}),
		chromedp.WaitVisible(`#limits h2`, chromedp.ByQuery),
		chromedp.Text(`#limits`, &limitsText, chromedp.ByQuery),
		shot("overview-paused"),
		step("resume it with the pause's button"),
		chromedp.Click(`#pauses table button`, chromedp.ByQuery),
		chromedp.WaitNotPresent(`#pauses table button`, chromedp.ByQuery),
		step("go to the dead letters"),
		chromedp.Click(`#nav a[data-page="dead-letters"]`, chromedp.ByQuery),
		chromedp.WaitVisible(box, chromedp.ByQuery),
		chromedp.Click(box, chromedp.ByQuery),
		chromedp.JavascriptAttribute(box, "checked", &checked, chromedp.ByQuery),
		chromedp.WaitEnabled(`#requeue-selected`, chromedp.ByQuery),
		shot("dead-letters"),
		step("click requeue"),
		chromedp.Click(`#requeue-selected`, chromedp.ByQuery),
		// The pause's flash may still show: wait for the requeue's.
		chromedp.Poll(`(document.querySelector('#flash')?.textContent || '').startsWith('requeued')`, nil),
		chromedp.Text(`#flash`, &flash, chromedp.ByQuery),
		chromedp.WaitNotPresent(box, chromedp.ByQuery), // the list reloaded without it
		shot("dead-letters-requeued"),
	)
	if err != nil {
		// What the page showed when it failed.
		var url, text string
		_ = chromedp.Run(bctx, chromedp.Location(&url), chromedp.Text("body", &text, chromedp.ByQuery), shot("failure"))
		saveShots(t, shots)
		t.Fatalf("in Chromium: %v; the page at %s said:\n%s\nweir run's log:\n%s", err, url, text, weir.log())
	}
	saveShots(t, shots)
	close(jsErrors)
	for msg := range jsErrors {
		t.Errorf("JavaScript exception in the console: %s", msg)
	}
	if !strings.Contains(overviewStats, "dead letters") {
		t.Errorf("the overview's figures %q do not show the dead letters", overviewStats)
	}
	if want := `queue "held-by-console" has no job and no pause`; !strings.Contains(pauseRefused, want) {
		t.Errorf("the page said %q after a pause of a queue with no job, want %q", pauseRefused, want)
	}
	for _, want := range []string{"default", "operator", "console", "e2e hold", "Resume"} {
		if !strings.Contains(pausesText, want) {
			t.Errorf("the overview's pauses %q lack %q after the Pause form was sent", pausesText, want)
		}
	}
	if !strings.Contains(limitsText, "Limits across processes") || !strings.Contains(limitsText, "no limits") {
		t.Errorf("the overview's limits card says %q, want its title and no limits (weir run sets none)", limitsText)
	}
	if !strings.Contains(pausesListed, `"queue": "default"`) || strings.Contains(pausesListed, "held-by-console") {
		t.Errorf("the admin API lists %s after the console's pauses, want default alone", pausesListed)
	}
	if ps := getPauses(t, base); strings.Contains(ps, `"queue": "default"`) {
		t.Errorf("the admin API lists %s after the Resume button, want no pause of default", ps)
	}
	if !checked {
		t.Error("the dead letter's checkbox was not checked by the click")
	}
	if want := fmt.Sprintf("requeued 1 dead letter(s): job %d", target.JobID); flash != want {
		t.Errorf("the page said %q after the click, want %q", flash, want)
	}

	// The admin API agrees: the dead letter is gone, the job ran again.
	resp, err = http.Get(fmt.Sprintf("%s/api/admin/dead-letters/%d", base, target.ID))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET dead letter %d after the requeue: %s %s, want 404", target.ID, resp.Status, body)
	}
	// Requeued: waiting or running again, or already failed once more (a
	// poison file fails every attempt), which adds to its errors.
	eventually.True(t, fmt.Sprintf("job %d requeued", target.JobID), 10*time.Second, func() (bool, string) {
		j := getJob(t, base, target.JobID)
		return j.State != "dead" || len(j.Errors) > len(before.Errors), fmt.Sprintf("still %s with %d errors (was dead with %d)", j.State, len(j.Errors), len(before.Errors))
	})
	left := listDeadLetters(t, base)
	for _, d := range left {
		if d.ID == target.ID {
			t.Errorf("dead letter %d still listed after the requeue", d.ID)
		}
	}

	// Without a token, weir run's admin API refuses what a hostile page
	// could send it: a POST that is not JSON (a form), a cross-site one,
	// and one under another host's name (DNS rebinding). None purges.
	purge := `{"filter": {}, "confirm": true}`
	for _, tc := range []struct {
		what   string
		header map[string]string
		host   string
		code   int
	}{
		{"no Content-Type", nil, "", http.StatusUnsupportedMediaType},
		{"cross-site", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, "", http.StatusForbidden},
		{"other origin", map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"}, "", http.StatusForbidden},
		{"rebinding host", map[string]string{"Content-Type": "application/json"}, "evil.example:8080", http.StatusForbidden},
	} {
		req, err := http.NewRequest(http.MethodPost, base+"/api/admin/dead-letters/purge", strings.NewReader(purge))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range tc.header {
			req.Header.Set(k, v)
		}
		if tc.host != "" {
			req.Host = tc.host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s purge: %s %s, want %d JSON", tc.what, resp.Status, body, tc.code)
		}
	}
	// The requeued poison file may fail again meanwhile and add a dead
	// letter; a purge would have removed them all.
	if got := listDeadLetters(t, base); len(got) < len(left) {
		t.Errorf("refused purges left %d dead letters, want at least the %d before them", len(got), len(left))
	}
}

// findChromium returns the path of Debian's chromium, or "".
func findChromium() string {
	for _, name := range []string{"chromium", "/usr/bin/chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// saveShots keeps the screenshots, after the test, in WEIR_UI_SCREENSHOTS,
// or in weir-ui-screenshots under the system's temporary directory, and
// logs where.
func saveShots(t *testing.T, shots map[string][]byte) {
	t.Helper()
	keep := os.Getenv(screenshotsEnv)
	if keep == "" {
		keep = filepath.Join(os.TempDir(), "weir-ui-screenshots")
	}
	if err := os.MkdirAll(keep, 0o755); err != nil {
		t.Fatalf("keep the screenshots in %s: %v", keep, err)
	}
	dirs := []string{keep}
	for _, name := range []string{"overview", "overview-paused", "dead-letters", "dead-letters-requeued", "failure"} {
		b, ok := shots[name]
		if !ok {
			continue
		}
		for _, d := range dirs {
			p := filepath.Join(d, "ui-"+name+".png")
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("screenshot: %s (%d bytes)", p, len(b))
		}
	}
}

// deadLetter is a dead letter as the admin API lists it, in part.
type deadLetter struct {
	ID     int64  `json:"id"`
	JobID  int64  `json:"job_id"`
	Source string `json:"source"`
}

func listDeadLetters(t *testing.T, base string) []deadLetter {
	t.Helper()
	var res struct {
		DeadLetters []deadLetter `json:"dead_letters"`
	}
	getJSON(t, base+"/api/admin/dead-letters?limit=500", &res)
	return res.DeadLetters
}

// adminJob is a job as the admin API shows it, in part.
type adminJob struct {
	ID     int64             `json:"id"`
	State  string            `json:"state"`
	Errors []json.RawMessage `json:"errors"`
}

func getJob(t *testing.T, base string, id int64) adminJob {
	t.Helper()
	var j adminJob
	getJSON(t, fmt.Sprintf("%s/api/admin/jobs/%d", base, id), &j)
	return j
}

// getPauses is the body of GET /api/admin/pauses.
func getPauses(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/api/admin/pauses")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/admin/pauses: %s %s (%v)", resp.Status, b, err)
	}
	return string(b)
}
