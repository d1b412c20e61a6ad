package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
	"github.com/weirhq/weir/workflow"
)

// Result is what a run found.
type Result struct {
	Kills      int
	Faults     int // database faults ridden out by one worker
	Lost       int // documents not processed to their end, or not notified
	Duplicated int // effects or notifications that happened more than once
	Orphaned   int // files no ledger record names, records of no document
	// Problems describes each of them, a line each.
	Problems []string
}

func (r Result) String() string {
	s := fmt.Sprintf("kills=%d lost=%d duplicated=%d orphaned=%d", r.Kills, r.Lost, r.Duplicated, r.Orphaned)
	if r.Faults > 0 {
		s = fmt.Sprintf("faults=%d %s", r.Faults, s)
	}
	return s
}

func (r *Result) problem(counter *int, format string, args ...any) {
	*counter++
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// unfinished counts the documents whose workflow has not ended or whose
// end is not notified yet.
func unfinished(ctx context.Context, h *db) (int, error) {
	var n int
	err := h.SQL.QueryRowContext(ctx, `SELECT count(*) FROM chaos_docs d
		WHERE NOT EXISTS (SELECT 1 FROM weir_workflows w WHERE w.id = d.id AND w.status <> 'running')
			OR NOT EXISTS (SELECT 1 FROM chaos_notified n WHERE n.doc = d.id)`).Scan(&n)
	return n, err
}

// check compares what the run left with what it should have: each
// document's workflow ended (failed for a poison one, completed with one
// file per page and one index entry otherwise), each end notified once,
// every file named by the ledger and every ledger record of a document,
// and the dead-letter store holding exactly the poison documents' steps.
func check(ctx context.Context, cfg Config, h *db, res Result) (Result, error) {
	ex := h.Store.Executor()
	docs := map[string]doc{}
	rows, err := h.SQL.QueryContext(ctx, `SELECT id, poison, pages FROM chaos_docs`)
	if err != nil {
		return res, err
	}
	for rows.Next() {
		var d doc
		if err := rows.Scan(&d.id, &d.poison, &d.pages); err != nil {
			rows.Close()
			return res, err
		}
		docs[d.id] = d
	}
	rows.Close()
	notifications, err := h.Strings(ctx, `SELECT doc FROM chaos_notified`)
	if err != nil {
		return res, err
	}
	notified := map[string]int{}
	for _, id := range notifications {
		notified[id]++
	}

	// Files, by ledger key: "page/doc-1/2", "index/doc-1/0".
	files := map[string][]string{}
	partial := 0
	for _, series := range []string{"page", "index"} {
		sub := "blobs"
		if series == "index" {
			sub = "index"
		}
		entries, err := os.ReadDir(filepath.Join(cfg.Dir, sub))
		if err != nil && !os.IsNotExist(err) {
			return res, err
		}
		for _, e := range entries {
			name := e.Name()
			if strings.HasSuffix(name, ".tmp") {
				// Cut short before its rename: an upload that never
				// completed, as a blob store would discard it.
				partial++
				continue
			}
			key, ok := fileKey(series, name)
			if !ok {
				res.problem(&res.Orphaned, "a file no document explains: %s/%s", sub, name)
				continue
			}
			files[key] = append(files[key], name)
		}
	}

	ids := make([]string, 0, len(docs))
	for id := range docs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		d := docs[id]
		wf, err := ex.GetWorkflow(ctx, id)
		want := weirtype.WorkflowCompleted
		if d.poison {
			want = weirtype.WorkflowFailed
		}
		switch {
		case err != nil:
			res.problem(&res.Lost, "document %s: no workflow (%v)", id, err)
		case wf.Status != want:
			res.problem(&res.Lost, "document %s: workflow %s in %s, want %s", id, wf.Status, wf.State, want)
		}
		switch n := notified[id]; {
		case n == 0:
			res.problem(&res.Lost, "document %s: its end was not notified", id)
		case n > 1:
			res.problem(&res.Duplicated, "document %s: its end was notified %d times", id, n)
		}
		recs, err := ex.ListEffects(ctx, id)
		if err != nil {
			return res, err
		}
		recorded := map[string]string{}
		for _, r := range recs {
			recorded[effectKey(r.Series, id, r.Ordinal)] = r.Result
		}
		expect := []string{}
		if !d.poison {
			for p := 1; p <= d.pages; p++ {
				expect = append(expect, effectKey("page", id, int64(p)))
			}
			expect = append(expect, effectKey("index", id, 0))
		}
		for _, k := range expect {
			got := files[k]
			switch {
			case len(got) == 0:
				res.problem(&res.Lost, "%s: no file", k)
			case len(got) > 1:
				res.problem(&res.Duplicated, "%s: %d files %v", k, len(got), got)
			}
			if name, ok := recorded[k]; !ok || name == "" {
				res.problem(&res.Lost, "%s: no finished ledger record", k)
			} else if len(got) > 0 && !contains(got, name) {
				res.problem(&res.Orphaned, "%s: the ledger names %s, the files are %v", k, name, got)
			}
			delete(files, k)
			delete(recorded, k)
		}
		for k := range recorded {
			res.problem(&res.Orphaned, "%s: a ledger record of no expected effect", k)
		}
	}
	for k, names := range files {
		res.problem(&res.Orphaned, "%s: files %v of no expected effect", k, names)
	}

	// The dead-letter store holds the poison documents' steps, and only
	// those.
	dls, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{})
	if err != nil {
		return res, err
	}
	dead := map[string]int{}
	for _, dl := range dls {
		id := strings.TrimPrefix(dl.Source, "workflow ")
		if dl.Kind != workflow.StepKind || !docs[id].poison {
			res.problem(&res.Lost, "dead letter %d (%s, %s): a job that should have run, not a poison document's step", dl.ID, dl.Kind, dl.Source)
		}
		dead[id]++
	}
	for _, id := range ids {
		switch n := dead[id]; {
		case docs[id].poison && n == 0:
			res.problem(&res.Lost, "document %s is poison but not in the dead-letter store", id)
		case docs[id].poison && n > 1:
			res.problem(&res.Duplicated, "document %s is in the dead-letter store %d times", id, n)
		}
	}
	// Ledger records of anything but a document.
	txns, err := h.Strings(ctx, `SELECT DISTINCT txn FROM weir_effects ORDER BY txn`)
	if err != nil {
		return res, err
	}
	for _, txn := range txns {
		if _, ok := docs[txn]; !ok {
			res.problem(&res.Orphaned, "ledger records of %s, which is no document", txn)
		}
	}
	var brokerDead int
	if err := h.SQL.QueryRowContext(ctx, `SELECT count(*) FROM chaos_broker_dead`).Scan(&brokerDead); err != nil {
		return res, err
	}
	if brokerDead > 0 {
		res.problem(&res.Lost, "%d messages were given up by the broker", brokerDead)
	}

	for _, p := range res.Problems {
		fmt.Fprintln(cfg.Out, p)
	}
	if partial > 0 {
		fmt.Fprintf(cfg.Out, "%d partial files of writes cut short by a kill (never renamed into place; not effects)\n", partial)
	}
	fmt.Fprintln(cfg.Out, res)
	if res.Lost+res.Duplicated+res.Orphaned > 0 {
		return res, fmt.Errorf("chaos: %s", res)
	}
	return res, nil
}

// effectKey names an effect by its series, document and ordinal.
func effectKey(series, id string, ordinal int64) string {
	return fmt.Sprintf("%s/%s/%d", series, id, ordinal)
}

// fileKey is the effect a file belongs to: pages are "<doc>.p<n>.<rand>",
// index entries "<doc>.<rand>".
func fileKey(series, name string) (string, bool) {
	parts := strings.Split(name, ".")
	switch {
	case series == "page" && len(parts) == 3 && strings.HasPrefix(parts[1], "p"):
		var n int64
		if _, err := fmt.Sscanf(parts[1], "p%d", &n); err != nil {
			return "", false
		}
		return effectKey("page", parts[0], n), true
	case series == "index" && len(parts) == 2:
		return effectKey("index", parts[0], 0), true
	}
	return "", false
}

func contains(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}
