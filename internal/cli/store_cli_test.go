package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/admin"
	"github.com/weirhq/weir/deadletter"
	"github.com/weirhq/weir/internal/teststore"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// fixture is a store the commands run against, populated through the store
// API, with the flags that name it.
type fixture struct {
	t     *testing.T
	ex    store.Executor
	flags []string // -data DIR, or -store URL -schema S
}

// sqliteFixture is a migrated SQLite store in a data directory of the
// test's own.
func sqliteFixture(t *testing.T) *fixture {
	dir := t.TempDir()
	s := teststore.SQLite(t, filepath.Join(dir, sqliteFileName))
	return &fixture{t: t, ex: s.Executor(), flags: []string{"-data", dir}}
}

// run runs "weir group sub <store flags> args...".
func (f *fixture) run(group, sub string, args ...string) (code int, stdout, stderr string) {
	return run(append(append([]string{group, sub}, f.flags...), args...)...)
}

// insert inserts a job of kind into queue, an hour ago.
func (f *fixture) insert(kind, queue string, maxAttempts int) *weirtype.Job {
	f.t.Helper()
	res, err := f.ex.Insert(context.Background(), time.Now().Add(-time.Hour),
		[]store.InsertParams{{Kind: kind, Queue: queue, MaxAttempts: maxAttempts, Payload: json.RawMessage(`{"doc":"` + kind + `"}`)}})
	if err != nil {
		f.t.Fatal(err)
	}
	return res[0].Job
}

// claim inserts a job of kind and claims it: it is running.
func (f *fixture) claim(kind string) *weirtype.Job {
	f.t.Helper()
	queue := "q-" + kind + strconv.FormatInt(time.Now().UnixNano(), 36)
	j := f.insert(kind, queue, 1)
	got, err := f.ex.Claim(context.Background(), store.ClaimParams{Now: time.Now().Add(-time.Hour), Queue: queue, Limit: 1, Owner: "w1", LeaseFor: 2 * time.Hour})
	if err != nil || len(got) != 1 || got[0].ID != j.ID {
		f.t.Fatalf("claim job %d: %v, %v", j.ID, got, err)
	}
	return got[0]
}

// oneOfEach makes a job in each state the jobs commands tell apart: an
// extract job dead a minute ago (returned with its dead letter), an index
// job running and a notify job available on the queue mail.
func (f *fixture) oneOfEach() (dead *weirtype.Job, dl *weirtype.DeadLetter, running, avail *weirtype.Job) {
	f.t.Helper()
	dead, dl = f.kill("extract", time.Now().Add(-time.Minute))
	return dead, dl, f.claim("index"), f.insert("notify", "mail", 0)
}

// kill makes a job of kind dead at failedAt, and returns it with its dead
// letter.
func (f *fixture) kill(kind string, failedAt time.Time) (*weirtype.Job, *weirtype.DeadLetter) {
	f.t.Helper()
	j := f.claim(kind)
	j, err := f.ex.Fail(context.Background(), store.FailParams{Now: failedAt, Lease: store.LeaseOf(j),
		Error:   weirtype.AttemptError{Attempt: 1, At: failedAt, Message: "index timed out\nafter 30s", Type: "*net.OpError"},
		Abandon: weirtype.AbandonMaxAttempts})
	if err != nil {
		f.t.Fatal(err)
	}
	dls, err := f.ex.ListDeadLetters(context.Background(), store.DeadLetterFilter{})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, dl := range dls {
		if dl.JobID == j.ID {
			return j, dl
		}
	}
	f.t.Fatalf("job %d has no dead letter", j.ID)
	return nil, nil
}

func (f *fixture) job(id int64) *weirtype.Job {
	f.t.Helper()
	j, err := f.ex.GetJob(context.Background(), id)
	if err != nil {
		f.t.Fatalf("job %d: %v", id, err)
	}
	return j
}

func (f *fixture) hasDeadLetter(id int64) bool {
	f.t.Helper()
	_, err := f.ex.GetDeadLetter(context.Background(), id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		f.t.Fatal(err)
	}
	return err == nil
}

// want checks a command's exit code and that its output holds each of has.
func want(t *testing.T, what string, code, wantCode int, out string, has ...string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("%s: exit code %d, want %d; output:\n%s", what, code, wantCode, out)
	}
	for _, h := range has {
		if !strings.Contains(out, h) {
			t.Errorf("%s: output does not hold %q:\n%s", what, h, out)
		}
	}
}

func id(n int64) string { return strconv.FormatInt(n, 10) }

func TestDLQListShowExport(t *testing.T) {
	t.Parallel()
	f := sqliteFixture(t)
	_, a1 := f.kill("extract", time.Now().Add(-3*time.Minute))
	_, a2 := f.kill("extract", time.Now().Add(-2*time.Minute))
	_, b1 := f.kill("index", time.Now().Add(-time.Minute))
	f.insert("extract", "default", 0) // alive: no dead letter

	code, out, errOut := f.run("dlq", "list")
	want(t, "dlq list", code, 0, out+errOut, "ID", "KIND", "REASON", "LAST ERROR", "extract", "index", "max_attempts_exceeded",
		"index timed out after 30s") // the error on one line
	if lines := strings.Count(out, "\n"); lines != 4 {
		t.Errorf("dlq list printed %d lines, want a header and 3 rows:\n%s", lines, out)
	}

	code, out, _ = f.run("dlq", "list", "-json", "-kind", "extract")
	want(t, "dlq list -json -kind extract", code, 0, out)
	var got []int64
	for sc := bufio.NewScanner(strings.NewReader(out)); sc.Scan(); {
		var r deadletter.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if r.Kind != "extract" || r.AbandonedReason != weirtype.AbandonMaxAttempts {
			t.Errorf("record %+v", r)
		}
		got = append(got, r.ID)
	}
	if len(got) != 2 || got[0] != a1.ID || got[1] != a2.ID {
		t.Errorf("dlq list -json -kind extract listed %v, want [%d %d]", got, a1.ID, a2.ID)
	}

	code, out, errOut = f.run("dlq", "list", "-limit", "2")
	want(t, "dlq list -limit 2", code, 0, out+errOut, "add -after "+id(a2.ID))
	code, out, _ = f.run("dlq", "list", "-after", id(a2.ID))
	want(t, "dlq list -after", code, 0, out, "index")
	if strings.Contains(out, "extract") {
		t.Errorf("dlq list -after %d listed an earlier letter:\n%s", a2.ID, out)
	}
	code, out, _ = f.run("dlq", "list", "-kind", "nothing")
	want(t, "dlq list of no letters", code, 0, out, "no dead letters")

	code, out, _ = f.run("dlq", "show", id(b1.ID))
	want(t, "dlq show", code, 0, out, "\n  \"job_id\": "+id(b1.JobID), `"original_event": {`, `"doc": "index"`, `"error_history": [`)
	code, _, errOut = f.run("dlq", "show", "9999")
	want(t, "dlq show of a missing letter", code, 1, errOut, "no dead letter 9999")
	code, _, errOut = f.run("dlq", "show", "x")
	want(t, "dlq show x", code, 2, errOut, `bad dead-letter id "x"`)

	file := filepath.Join(t.TempDir(), "dlq.jsonl")
	code, _, errOut = f.run("dlq", "export", "-o", file, "-kind", "extract")
	want(t, "dlq export -o", code, 0, errOut, "exported 2 dead letters to "+file)
	b, err := os.ReadFile(file)
	if err != nil || strings.Count(string(b), "\n") != 2 {
		t.Fatalf("export file %q, %v; want 2 lines", b, err)
	}
	code, out, _ = f.run("dlq", "export")
	want(t, "dlq export to stdout", code, 0, out, `"kind":"index"`)
	if n := strings.Count(out, "\n"); n != 3 {
		t.Errorf("dlq export wrote %d lines, want 3", n)
	}
	code, _, errOut = f.run("dlq", "list", "-reason", "boredom")
	want(t, "dlq list -reason boredom", code, 2, errOut, `-reason "boredom" is unknown`, "retry_after_exceeds_limit")
	code, out, _ = f.run("dlq", "list", "-reason", "retry_after_exceeds_limit")
	want(t, "dlq list -reason retry_after_exceeds_limit", code, 0, out, "no dead letters")

	// -job keeps the dead letters of one job.
	code, out, _ = f.run("dlq", "list", "-json", "-job", id(a2.JobID))
	want(t, "dlq list -job", code, 0, out, fmt.Sprintf(`"id":%d,`, a2.ID))
	if n := strings.Count(out, "\n"); n != 1 {
		t.Errorf("dlq list -job %d printed %d records, want 1:\n%s", a2.JobID, n, out)
	}
	code, _, errOut = f.run("dlq", "list", "-job", "-4")
	want(t, "dlq list -job -4", code, 2, errOut, "-job -4")
}

func TestDLQRequeueAndPurge(t *testing.T) {
	t.Parallel()
	f := sqliteFixture(t)
	j1, d1 := f.kill("extract", time.Now().Add(-time.Minute))
	j2, d2 := f.kill("extract", time.Now().Add(-time.Minute))
	j3, d3 := f.kill("index", time.Now().Add(-48*time.Hour))
	j4, d4 := f.kill("index", time.Now().Add(-time.Minute))
	j5, d5 := f.kill("notify", time.Now().Add(-time.Minute))

	code, out, errOut := f.run("dlq", "requeue", id(d1.ID))
	want(t, "dlq requeue ID", code, 0, out+errOut, "requeued 1 jobs: "+id(j1.ID))
	if f.hasDeadLetter(d1.ID) {
		t.Error("the requeued dead letter is still there")
	}
	if j := f.job(j1.ID); j.State != weirtype.StateAvailable || j.Attempt != 0 {
		t.Errorf("requeued job: %+v", *j)
	}
	code, _, errOut = f.run("dlq", "requeue", "9999", id(d2.ID))
	want(t, "dlq requeue of a missing id", code, 1, errOut, "no dead letter 9999 (nothing changed)")
	if !f.hasDeadLetter(d2.ID) {
		t.Error("a requeue naming a missing id requeued the others")
	}
	code, out, _ = f.run("dlq", "requeue", "-kind", "extract")
	want(t, "dlq requeue -kind", code, 0, out, "requeued 1 jobs: "+id(j2.ID))
	if f.job(j2.ID).State != weirtype.StateAvailable || f.hasDeadLetter(d2.ID) {
		t.Error("dlq requeue -kind extract did not requeue job 2")
	}
	for _, c := range []struct {
		args []string
		has  string
	}{
		{nil, "select the dead letters"},
		{[]string{"-all", id(d3.ID)}, "not more than one"},
		{[]string{"-kind", "x", id(d3.ID)}, "not more than one"},
		{[]string{"abc"}, `bad dead-letter id "abc"`},
	} {
		code, _, errOut := f.run("dlq", "requeue", c.args...)
		want(t, "dlq requeue "+strings.Join(c.args, " "), code, 2, errOut, c.has)
	}

	// A purge by filter needs -yes; a purge of listed ids does not.
	code, _, errOut = f.run("dlq", "purge", "-kind", "index")
	want(t, "dlq purge without -yes", code, 2, errOut, "add -yes to confirm", "only a list of dead-letter IDs needs no -yes")
	code, _, errOut = f.run("dlq", "purge", "-all")
	want(t, "dlq purge -all without -yes", code, 2, errOut, "add -yes")
	if !f.hasDeadLetter(d3.ID) || !f.hasDeadLetter(d4.ID) {
		t.Fatal("a purge without -yes purged")
	}
	code, out, _ = f.run("dlq", "purge", "-before", "24h", "-yes")
	want(t, "dlq purge -before 24h -yes", code, 0, out, "purged 1 dead letters")
	if f.hasDeadLetter(d3.ID) || !f.hasDeadLetter(d4.ID) {
		t.Error("dlq purge -before 24h: want only the letter of two days ago gone")
	}
	if _, err := f.ex.GetJob(context.Background(), j3.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the purged letter's job: %v, want it gone", err)
	}
	code, out, _ = f.run("dlq", "purge", id(d4.ID))
	want(t, "dlq purge ID", code, 0, out, "purged 1 dead letters")
	if f.hasDeadLetter(d4.ID) {
		t.Error("dlq purge ID left the letter")
	}
	_ = j4
	code, _, errOut = f.run("dlq", "purge", "-before", "last tuesday", "-yes")
	want(t, "dlq purge -before garbage", code, 2, errOut, `-before "last tuesday"`)
	code, out, _ = f.run("dlq", "purge", "-all", "-yes")
	want(t, "dlq purge -all -yes", code, 0, out, "purged 1 dead letters")
	if f.hasDeadLetter(d5.ID) {
		t.Error("dlq purge -all left a letter")
	}
	_ = j5
	// The requeued jobs were not dead letters any more: the purges left them.
	if f.job(j1.ID).State != weirtype.StateAvailable || f.job(j2.ID).State != weirtype.StateAvailable {
		t.Error("a purge took a requeued job")
	}
}

func TestJobsListShow(t *testing.T) {
	t.Parallel()
	f := sqliteFixture(t)
	dead, _, running, avail := f.oneOfEach()

	code, out, _ := f.run("jobs", "list")
	want(t, "jobs list", code, 0, out, "ID", "STATE", "ATTEMPT", "dead", "running", "available", "1/1", "index timed out after 30s")
	if first := strings.Split(out, "\n")[1]; !strings.HasPrefix(first, id(avail.ID)+" ") {
		t.Errorf("jobs list: the first row is %q, want the newest job %d", first, avail.ID)
	}
	code, out, _ = f.run("jobs", "list", "-state", "dead,running", "-json")
	want(t, "jobs list -state dead,running -json", code, 0, out)
	var ids []int64
	for sc := bufio.NewScanner(strings.NewReader(out)); sc.Scan(); {
		var r jobRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		ids = append(ids, r.ID)
	}
	if len(ids) != 2 || ids[0] != running.ID || ids[1] != dead.ID {
		t.Errorf("jobs list -state dead,running: %v, want [%d %d]", ids, running.ID, dead.ID)
	}
	code, out, _ = f.run("jobs", "list", "-kind", "notify", "-queue", "mail")
	want(t, "jobs list -kind -queue", code, 0, out, "notify")
	if strings.Count(out, "\n") != 2 {
		t.Errorf("jobs list -kind notify -queue mail:\n%s", out)
	}
	code, out, errOut := f.run("jobs", "list", "-limit", "1")
	want(t, "jobs list -limit 1", code, 0, out+errOut, "add -before "+id(avail.ID))
	code, out, _ = f.run("jobs", "list", "-before", id(running.ID))
	want(t, "jobs list -before", code, 0, out, "dead")
	if strings.Count(out, "\n") != 2 {
		t.Errorf("jobs list -before %d:\n%s", running.ID, out)
	}
	code, _, errOut = f.run("jobs", "list", "-state", "zombie")
	want(t, "jobs list -state zombie", code, 2, errOut, `-state "zombie" is unknown`, "available, scheduled")
	code, _, errOut = f.run("jobs", "list", "-limit", "5000")
	want(t, "jobs list -limit 5000", code, 2, errOut, "want 1 to 1000")

	code, out, _ = f.run("jobs", "show", id(dead.ID))
	want(t, "jobs show", code, 0, out, `"state": "dead"`, `"errors": [`, `"message": "index timed out\nafter 30s"`, `"type": "*net.OpError"`, `"finalized_at": `)
	var r jobRecord
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.ID != dead.ID || len(r.Errors) != 1 || r.Errors[0].Attempt != 1 {
		t.Errorf("jobs show: %+v, %v", r, err)
	}
	code, _, errOut = f.run("jobs", "show", "12345")
	want(t, "jobs show of a missing job", code, 1, errOut, "no job 12345")
	code, _, errOut = f.run("jobs", "show", "-1")
	want(t, "jobs show -1", code, 2, errOut, "flag provided but not defined")
	code, _, errOut = f.run("jobs", "show", "0")
	want(t, "jobs show 0", code, 2, errOut, `bad job id "0"`)
}

func TestJobsRetryCancel(t *testing.T) {
	t.Parallel()
	f := sqliteFixture(t)
	dead, dl, running, avail := f.oneOfEach()

	code, out, errOut := f.run("jobs", "retry", id(dead.ID))
	want(t, "jobs retry of a dead job", code, 0, out+errOut, "job "+id(dead.ID)+": available, attempt 2 of 2 next")
	if j := f.job(dead.ID); j.State != weirtype.StateAvailable || j.MaxAttempts != 2 {
		t.Errorf("retried job: %+v", *j)
	}
	if f.hasDeadLetter(dl.ID) {
		t.Error("the retried job's dead letter is still there")
	}
	code, _, errOut = f.run("jobs", "retry", id(running.ID))
	want(t, "jobs retry of a running job", code, 1, errOut, "is running: cancel it first")

	code, out, errOut = f.run("jobs", "cancel", id(avail.ID), id(running.ID))
	want(t, "jobs cancel", code, 0, out+errOut, "job "+id(avail.ID)+": cancelled", "job "+id(running.ID)+": cancelled")
	if f.job(running.ID).State != weirtype.StateCancelled {
		t.Error("the running job was not cancelled")
	}
	code, _, errOut = f.run("jobs", "cancel", id(avail.ID))
	want(t, "jobs cancel of a cancelled job", code, 1, errOut, "is cancelled already")

	// Now the cancelled running job can be retried; a missing id fails
	// without stopping the others.
	code, out, errOut = f.run("jobs", "retry", "99999", id(running.ID))
	want(t, "jobs retry of a missing and a cancelled job", code, 1, out+errOut, "no job 99999", "1 of 2 jobs failed", "job "+id(running.ID)+": available")
	if f.job(running.ID).State != weirtype.StateAvailable {
		t.Error("the cancelled job was not retried")
	}
	for _, args := range [][]string{{"retry"}, {"cancel"}, {"retry", "abc"}} {
		code, _, _ := f.run("jobs", args[0], args[1:]...)
		want(t, "jobs "+strings.Join(args, " "), code, 2, "")
	}
}

// weir jobs show prints a running job's progress and a completed job's
// output.
func TestJobsShowProgressAndOutput(t *testing.T) {
	t.Parallel()
	f := sqliteFixture(t)
	ctx := context.Background()
	running := f.claim("parse")
	at := time.Now().Add(-time.Minute)
	if err := f.ex.SetProgress(ctx, at, store.LeaseOf(running), weirtype.Progress{Percent: 62.5, Message: "page 25 of 40"}); err != nil {
		t.Fatal(err)
	}
	done := f.claim("parse")
	if _, err := f.ex.CompleteOutputs(ctx, at, []store.Completion{{Lease: store.LeaseOf(done), Output: json.RawMessage(`{"pages":40}`)}}); err != nil {
		t.Fatal(err)
	}

	code, out, _ := f.run("jobs", "show", id(running.ID))
	want(t, "jobs show of a running job", code, 0, out, `"progress": {`, `"percent": 62.5`, `"message": "page 25 of 40"`, `"attempt": 1`)
	if strings.Contains(out, `"output"`) {
		t.Errorf("a running job shows an output:\n%s", out)
	}
	code, out, _ = f.run("jobs", "show", id(done.ID))
	want(t, "jobs show of a completed job", code, 0, out, `"state": "completed"`, `"output": {`, `"pages": 40`)
	var r jobRecord
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Progress != nil || string(r.Output) == "" {
		t.Errorf("jobs show: %+v, %v", r, err)
	}
}

// weir jobs limits lists the limits the clients recorded, with the
// attempts running, as a table and as JSON lines.
func TestJobsLimits(t *testing.T) {
	t.Parallel()
	f := sqliteFixture(t)
	code, out, errOut := f.run("jobs", "limits")
	want(t, "jobs limits of a store without any", code, 0, out+errOut, "no limits")
	if _, err := f.ex.SetLimit(context.Background(), time.Now(), store.LimitParams{Key: "llm", Kinds: []string{"summarize", "extract"},
		MaxRunning: 4, Rate: 60, Per: time.Minute}); err != nil {
		t.Fatal(err)
	}
	f.claim("extract") // an hour ago: its start counts in a window long past
	code, out, errOut = f.run("jobs", "limits")
	want(t, "jobs limits", code, 0, out+errOut, "KEY", "llm", "extract,summarize", "1/4", "60 per 1m0s", "0 since ")
	code, out, errOut = f.run("jobs", "limits", "-json")
	want(t, "jobs limits -json", code, 0, out+errOut)
	var l admin.Limit
	if err := json.Unmarshal([]byte(out), &l); err != nil || l.Key != "llm" || l.Running != 1 || l.MaxRunning != 4 || l.PerSeconds != 60 {
		t.Fatalf("jobs limits -json printed %s (%v)", out, err)
	}
	code, out, errOut = f.run("jobs", "limits", "extra")
	want(t, "jobs limits with an argument", code, 2, out+errOut)
}

// weir jobs pause, paused and resume: a paused queue's jobs are not
// claimed until it is resumed, and bad names are refused with a message
// that says what is wrong.
func TestJobsPauseAndResume(t *testing.T) {
	t.Parallel()
	f := sqliteFixture(t)
	f.insert("extract", "docs", 3)
	claimDocs := func() int {
		got, err := f.ex.Claim(context.Background(), store.ClaimParams{Now: time.Now(), Queue: "docs", Limit: 10, Owner: "w", LeaseFor: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}

	code, out, errOut := f.run("jobs", "pause", "-queue", "docs", "-kind", "extract", "-by", "alice", "-reason", "LLM quota")
	want(t, "jobs pause", code, 0, out+errOut, "paused kind extract of queue docs since ")
	if n := claimDocs(); n != 0 {
		t.Fatalf("claimed %d jobs of a paused kind", n)
	}
	code, out, errOut = f.run("jobs", "paused")
	want(t, "jobs paused", code, 0, out+errOut, "QUEUE", "docs", "extract", "operator", "alice", "LLM quota")
	code, out, _ = f.run("jobs", "paused", "-json")
	var rec admin.Pause
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &rec); code != 0 || err != nil || rec.By != "alice" || rec.Kind != "extract" {
		t.Fatalf("jobs paused -json: exit %d, %+v, %v:\n%s", code, rec, err, out)
	}

	code, _, errOut = f.run("jobs", "pause", "-queue", "docs", "-kind", "extrct")
	want(t, "jobs pause of a mistyped kind", code, 1, errOut, `queue "docs" has no job of kind "extrct"`)
	code, _, errOut = f.run("jobs", "pause", "-queue", "dcos")
	want(t, "jobs pause of a mistyped queue", code, 1, errOut, `queue "dcos" has no job and no pause: check the name`)
	code, _, errOut = f.run("jobs", "pause", "-kind", "extract")
	want(t, "jobs pause without a queue", code, 2, errOut, "-queue")
	code, _, errOut = f.run("jobs", "resume", "-queue", "docs", "-cause", "whim")
	want(t, "jobs resume of an unknown cause", code, 2, errOut, "want operator, breaker or retry_after")

	code, out, errOut = f.run("jobs", "resume", "-queue", "docs", "-kind", "extract")
	want(t, "jobs resume", code, 0, out+errOut, "resumed kind extract of queue docs (operator pause)")
	if n := claimDocs(); n != 1 {
		t.Fatalf("claimed %d jobs after the resume, want 1", n)
	}
	code, _, errOut = f.run("jobs", "resume", "-queue", "docs", "-kind", "extract")
	want(t, "jobs resume of what is not paused", code, 1, errOut, "kind extract of queue docs is not paused")
	code, out, errOut = f.run("jobs", "paused")
	want(t, "jobs paused with none", code, 0, out+errOut, "no pauses")
}

// weir status says what is paused, by whom and since when, in text and
// in JSON.
func TestStatusShowsPauses(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	docs := writeDocs(t, map[string]string{"bees.txt": "Keeping bees\n\nThe hive swarmed in May."})
	code, stdout, stderr := run("ingest", docs, "-data", data)
	want(t, "ingest", code, 0, stdout+stderr)
	code, stdout, stderr = run("jobs", "pause", "-data", data, "-queue", "default", "-by", "bob", "-reason", "maintenance")
	want(t, "jobs pause", code, 0, stdout+stderr, "paused queue default")
	code, stdout, stderr = run("status", "-data", data)
	want(t, "status", code, 0, stdout+stderr, "paused:       queue default (operator by bob) since ", ": maintenance")
	code, stdout, _ = run("status", "-data", data, "-json")
	want(t, "status -json", code, 0, stdout, `"pauses": [`, `"by": "bob"`, `"documents"`)
}

func TestGroupsRefuseBadSubcommands(t *testing.T) {
	t.Parallel()
	code, _, errOut := run("dlq")
	want(t, "dlq", code, 2, errOut, "missing subcommand: want one of list, show, export, requeue, purge")
	code, _, errOut = run("jobs", "frob")
	want(t, "jobs frob", code, 2, errOut, `unknown subcommand "frob": want one of list, show, retry, cancel`, "usage: weir jobs list")
	code, out, _ := run("jobs", "retry", "-h")
	want(t, "jobs retry -h", code, 0, out, "usage: weir jobs retry ID...", "WEIR_STORE", "-store URL")
	code, out, _ = run("help", "dlq")
	want(t, "help dlq", code, 0, out, "weir dlq purge", "Subcommands:", "-data directory")
}

func TestStoreFlags(t *testing.T) {
	t.Parallel()
	code, _, errOut := run("dlq", "list", "-store", "mysql://root:hunter2@db/weir")
	want(t, "a mysql store", code, 2, errOut, `-store: unsupported scheme "mysql"`, "postgres://")
	if strings.Contains(errOut, "hunter2") {
		t.Errorf("the error repeats the password: %s", errOut)
	}
	code, _, errOut = run("jobs", "list", "-store", "weir.db")
	want(t, "a file as -store", code, 2, errOut, "-store: not a URL", "set -data")

	missing := filepath.Join(t.TempDir(), "nothing-here")
	for _, args := range [][]string{{"dlq", "list"}, {"jobs", "list"}, {"dlq", "purge", "-all", "-yes"}} {
		code, out, errOut := run(append(args, "-data", missing)...)
		want(t, strings.Join(args, " ")+" on a missing data directory", code, 1, out+errOut,
			"no weir data at "+missing+" (run weir run or weir migrate, or set -data / WEIR_DATA)")
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a read-only command made the data directory: %v", err)
	}
	// A data directory without weir.db is no store either, and stays empty.
	empty := t.TempDir()
	code, _, errOut = run("dlq", "list", "-data", empty)
	want(t, "dlq list on an empty data directory", code, 1, errOut, "no weir data at "+empty)
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Fatalf("dlq list wrote into an empty data directory: %v", ents)
	}

	// migrate makes the directory and the store, then finds it up to date.
	data := filepath.Join(t.TempDir(), "new", "weir-data")
	code, out, errOut := run("migrate", "-data", data)
	want(t, "migrate", code, 0, out+errOut, "SQLite file "+filepath.Join(data, "weir.db")+": applied migrations 1 to ")
	code, out, _ = run("migrate", "-data", data)
	want(t, "migrate again", code, 0, out, ": up to date at schema version ")
	code, out, _ = run("jobs", "list", "-data", data)
	want(t, "jobs list after migrate", code, 0, out, "no jobs")
	code, _, errOut = run("migrate", "-data", data, "extra")
	want(t, "migrate extra", code, 2, errOut, `unexpected argument "extra"`)
}

// TestStoreFlagsFromEnvironment: WEIR_DATA names the data directory of a
// command that does not give -data, and -data on the group or the
// subcommand wins over it.
func TestStoreFlagsFromEnvironment(t *testing.T) {
	f := sqliteFixture(t)
	f.kill("extract", time.Now())
	t.Setenv("WEIR_DATA", f.flags[1])
	code, out, errOut := run("dlq", "list")
	want(t, "dlq list with WEIR_DATA", code, 0, out+errOut, "extract")
	missing := filepath.Join(t.TempDir(), "missing")
	code, _, errOut = run("dlq", "list", "-data", missing)
	want(t, "dlq list -data with WEIR_DATA", code, 1, errOut, "no weir data at "+missing)
	code, _, errOut = run("dlq", "-data", missing, "list")
	want(t, "dlq -data DIR list with WEIR_DATA", code, 1, errOut, "no weir data at "+missing)
	// Only the store flags come from the environment.
	t.Setenv("WEIR_ALL", "true")
	t.Setenv("WEIR_YES", "true")
	code, _, errOut = run("dlq", "purge")
	want(t, "dlq purge with WEIR_ALL and WEIR_YES", code, 2, errOut, "select the dead letters")
}

// TestPostgresStore runs dlq list and jobs list against PostgreSQL through
// -store and -schema.
func TestPostgresStore(t *testing.T) {
	t.Parallel()
	s, url := teststore.PostgresStore(t, "weir_cli_", 4)
	f := &fixture{t: t, ex: s.Executor(), flags: []string{"-store", url, "-schema", s.Schema()}}
	_, dl := f.kill("extract", time.Now().Add(-time.Minute))
	avail := f.insert("notify", "mail", 0)

	code, out, errOut := f.run("dlq", "list")
	want(t, "dlq list on PostgreSQL", code, 0, out+errOut, id(dl.ID)+" ", "extract", "max_attempts_exceeded")
	code, out, errOut = f.run("jobs", "list", "-state", "available")
	want(t, "jobs list on PostgreSQL", code, 0, out+errOut, id(avail.ID)+" ", "notify", "available")
	if strings.Contains(out, "extract") {
		t.Errorf("jobs list -state available listed the dead job:\n%s", out)
	}
	pgURL := strings.Replace(url, "postgres://", "postgresql://", 1)
	code, out, errOut = run("jobs", "retry", "-store", pgURL, "-schema", s.Schema(), id(dl.JobID))
	want(t, "jobs retry on PostgreSQL with a postgresql:// URL", code, 0, out+errOut, ": available")
	if f.hasDeadLetter(dl.ID) {
		t.Error("the retried job's dead letter is still there")
	}
	// A schema weir never migrated is no store.
	code, _, errOut = run("dlq", "list", "-store", url, "-schema", s.Schema()+"_none")
	want(t, "dlq list on an empty schema", code, 1, errOut, "no weir data in PostgreSQL schema", "run weir run or weir migrate")
	_, _ = s.Pool().Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+s.Schema()+`_none"`)
}
