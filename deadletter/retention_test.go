package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/deadletter"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

const day = 24 * time.Hour

var archiveName = regexp.MustCompile(`^dead-letters-\d{8}T\d{6}\.\d{6}Z(-\d+)?\.jsonl$`)

// checkArchive checks that the result's file is a complete archive, alone
// in its directory with no temporary file beside it, holding exactly the
// records of want, and returns them.
func checkArchive(t *testing.T, res deadletter.Result, want []*weirtype.DeadLetter) []deadletter.Record {
	t.Helper()
	if res.File == "" {
		t.Fatal("no archive file")
	}
	if !archiveName.MatchString(filepath.Base(res.File)) {
		t.Fatalf("archive named %s", filepath.Base(res.File))
	}
	fi, err := os.Stat(res.File)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("archive mode %v, want 0600", fi.Mode().Perm())
	}
	for _, name := range dirNames(t, filepath.Dir(res.File)) {
		if !archiveName.MatchString(name) {
			t.Errorf("%s left in the archive directory", name)
		}
	}
	recs := readArchive(t, res.File)
	if res.Archived != len(recs) {
		t.Fatalf("Archived = %d, but the file holds %d records", res.Archived, len(recs))
	}
	byID := map[int64]*weirtype.DeadLetter{}
	for _, dl := range want {
		byID[dl.ID] = dl
	}
	for _, r := range recs {
		dl, ok := byID[r.ID]
		if !ok {
			t.Fatalf("archive holds dead letter %d, which was not due", r.ID)
		}
		if diff := sameRecord(r, deadletter.RecordOf(dl)); diff != "" {
			t.Fatalf("archived dead letter %d differs in %s", r.ID, diff)
		}
		delete(byID, r.ID)
	}
	if len(byID) > 0 {
		t.Fatalf("archive lacks %d of the dead letters due", len(byID))
	}
	return recs
}

func TestRetentionByAge(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	clk := clock.NewFake(t0)
	// Made out of order, so that age, not id, must decide.
	young := fx.bury(t0.Add(-time.Hour), 2, burial{})
	old := fx.bury(t0.Add(-deadletter.DefaultMaxAge-time.Second), 3, burial{})
	boundary := fx.bury(t0.Add(-deadletter.DefaultMaxAge), 2, burial{}) // exactly MaxAge old: kept
	older := fx.bury(t0.Add(-30*day), 1, burial{attempts: 2})
	justUnder := fx.bury(t0.Add(-deadletter.DefaultMaxAge+time.Microsecond), 1, burial{})

	r := deadletter.Retention{ArchiveDir: t.TempDir(), Clock: clk}
	res, err := r.Enforce(context.Background(), fx.ex)
	if err != nil {
		t.Fatal(err)
	}
	due := slices.Concat(old, older)
	if res.Archived != len(due) || res.Purged != len(due) {
		t.Fatalf("result %+v, want %d archived and purged", res, len(due))
	}
	checkArchive(t, res, due)
	if got, want := fx.stored(), sorted(idsOf(young), idsOf(boundary), idsOf(justUnder)); !slices.Equal(got, want) {
		t.Fatalf("store keeps %v, want %v", got, want)
	}
	// A purged dead letter's job goes with it.
	if _, err := fx.ex.GetJob(context.Background(), old[0].JobID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("job of a purged dead letter: %v, want ErrNotFound", err)
	}

	// A microsecond later, the boundary letters are older than MaxAge, and
	// the ones a microsecond younger are exactly MaxAge old.
	clk.Advance(time.Microsecond)
	res, err = r.Enforce(context.Background(), fx.ex)
	if err != nil || res.Archived != len(boundary) || res.Purged != len(boundary) {
		t.Fatalf("second run: %+v, %v; want the %d boundary letters", res, err, len(boundary))
	}
	if got := recordIDs(readArchive(t, res.File)); !slices.Equal(got, idsOf(boundary)) {
		t.Fatalf("second archive holds %v, want %v", got, idsOf(boundary))
	}
}

func TestRetentionByCountKeepsTheNewest(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	dls := slices.Concat(fx.bury(t0, 5, burial{}), fx.bury(t0.Add(time.Minute), 7, burial{}))
	r := deadletter.Retention{ArchiveDir: t.TempDir(), Clock: clock.NewFake(t0.Add(time.Hour)), MaxCount: 4, BatchSize: 3}
	var purges [][]int64
	ex := &hookedExecutor{DeadLetters: fx.ex, purge: func(f store.DeadLetterFilter) error {
		purges = append(purges, f.IDs)
		return nil
	}}
	res, err := r.Enforce(context.Background(), ex)
	if err != nil || res.Archived != 8 || res.Purged != 8 {
		t.Fatalf("Enforce = %+v, %v; want 8 archived and purged", res, err)
	}
	checkArchive(t, res, dls[:8])
	fx.mustHold(t, dls[8:])
	// Purged by id, BatchSize at a time.
	if len(purges) != 3 || len(purges[0]) != 3 || len(purges[2]) != 2 || !slices.Equal(sorted(purges...), idsOf(dls[:8])) {
		t.Fatalf("purges %v", purges)
	}

	// At the cap, nothing is due.
	res, err = r.Enforce(context.Background(), fx.ex)
	if err != nil || res != (deadletter.Result{}) {
		t.Fatalf("Enforce at the cap = %+v, %v; want nothing", res, err)
	}
}

// The count is of the letters the age limit keeps: the old go first, then
// the oldest of the rest past MaxCount.
func TestRetentionByAgeAndCount(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	now := t0.Add(10 * day)
	youngA := fx.bury(now.Add(-2*day), 6, burial{})
	old := fx.bury(now.Add(-8*day), 4, burial{kind: "embed"}) // higher ids than youngA
	youngB := fx.bury(now.Add(-day), 4, burial{})
	young := slices.Concat(youngA, youngB)

	r := deadletter.Retention{ArchiveDir: t.TempDir(), Clock: clock.NewFake(now), MaxCount: 5, BatchSize: 2}
	res, err := r.Enforce(context.Background(), fx.ex)
	if err != nil {
		t.Fatal(err)
	}
	due := slices.Concat(old, young[:5])
	if res.Archived != len(due) || res.Purged != len(due) {
		t.Fatalf("result %+v, want %d archived and purged", res, len(due))
	}
	recs := checkArchive(t, res, due)
	// The old first, then the oldest young, each lowest id first.
	if got := recordIDs(recs); !slices.Equal(got, idsOf(due)) {
		t.Fatalf("archive order %v, want %v", got, idsOf(due))
	}
	fx.mustHold(t, young[5:])
}

func TestRetentionNothingDueWritesNoFile(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	dir := t.TempDir()
	r := deadletter.Retention{ArchiveDir: dir, Clock: clock.NewFake(t0)}
	if res, err := r.Enforce(context.Background(), fx.ex); err != nil || res != (deadletter.Result{}) {
		t.Fatalf("Enforce on an empty store = %+v, %v", res, err)
	}
	kept := fx.bury(t0.Add(-time.Hour), 3, burial{})
	if res, err := r.Enforce(context.Background(), fx.ex); err != nil || res != (deadletter.Result{}) {
		t.Fatalf("Enforce with nothing due = %+v, %v", res, err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Fatalf("archive directory holds %v, want nothing", names)
	}
	fx.mustHold(t, kept)
}

func TestRetentionArchiveDirMustExist(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	dls := fx.bury(t0.Add(-30*day), 3, burial{})
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir string
		is        error
	}{
		{"missing", filepath.Join(t.TempDir(), "nope"), fs.ErrNotExist},
		{"not a directory", notDir, deadletter.ErrArchive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := deadletter.Retention{ArchiveDir: tc.dir, Clock: clock.NewFake(t0)}
			res, err := r.Enforce(context.Background(), fx.ex)
			var ae *deadletter.ArchiveError
			if !errors.Is(err, deadletter.ErrArchive) || !errors.Is(err, tc.is) || !errors.As(err, &ae) || ae.Dir != tc.dir {
				t.Fatalf("Enforce = %+v, %v; want an *ArchiveError for %s", res, err, tc.dir)
			}
			if res != (deadletter.Result{}) {
				t.Fatalf("result %+v on an error", res)
			}
			fx.mustHold(t, dls)
			t.Log(err)
		})
	}
}

func TestRetentionUnwritableDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	if f, err := os.CreateTemp(dir, "probe"); err == nil {
		f.Close()
		os.Remove(f.Name())
		t.Skip("a read-only directory is writable here (running as root?)")
	}
	fx := newFixture(t)
	dls := fx.bury(t0.Add(-30*day), 3, burial{})
	res, err := deadletter.Retention{ArchiveDir: dir, Clock: clock.NewFake(t0)}.Enforce(context.Background(), fx.ex)
	if !errors.Is(err, deadletter.ErrArchive) || !errors.Is(err, fs.ErrPermission) || res != (deadletter.Result{}) {
		t.Fatalf("Enforce = %+v, %v; want an archive error for permission", res, err)
	}
	fx.mustHold(t, dls)
}

func TestRetentionConfig(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	dir := t.TempDir()
	for _, r := range []deadletter.Retention{
		{},
		{ArchiveDir: dir, MaxAge: -time.Second},
		{ArchiveDir: dir, MaxCount: -1},
		{ArchiveDir: dir, BatchSize: -1},
	} {
		if _, err := r.Enforce(context.Background(), fx.ex); !errors.Is(err, deadletter.ErrConfig) {
			t.Errorf("Enforce with %+v: %v, want ErrConfig", r, err)
		}
	}
}

// A store read that fails while the archive is being written leaves the
// store as it was and no file, not even a temporary one.
func TestRetentionReadFailureLeavesNoFile(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	dls := fx.bury(t0.Add(-30*day), 7, burial{})
	dir := t.TempDir()
	calls := 0
	errRead := errors.New("database is locked")
	ex := &hookedExecutor{DeadLetters: fx.ex, list: func(store.DeadLetterFilter) error {
		calls++
		if calls == 3 { // the count, one page of the archive, then this
			return errRead
		}
		return nil
	}}
	res, err := deadletter.Retention{ArchiveDir: dir, Clock: clock.NewFake(t0), BatchSize: 3}.Enforce(context.Background(), ex)
	if !errors.Is(err, errRead) || res != (deadletter.Result{}) {
		t.Fatalf("Enforce = %+v, %v; want the read error", res, err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Fatalf("archive directory holds %v after the error", names)
	}
	fx.mustHold(t, dls)
}

// The gap between archive and purge: the purge fails (as a crash would stop
// it) after the archive is durable. Every dead letter is still in the store
// or in the archive; the next run archives what is left again, in a new
// file, and purges it; the duplicates carry the same ids.
func TestRetentionPurgeFailureLosesNothing(t *testing.T) {
	for _, failAt := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("purge %d fails", failAt), func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t)
			due := fx.bury(t0.Add(-30*day), 10, burial{})
			kept := fx.bury(t0, 2, burial{})
			all := sorted(idsOf(due), idsOf(kept))
			dir := t.TempDir()
			clk := clock.NewFake(t0)
			r := deadletter.Retention{ArchiveDir: dir, Clock: clk, BatchSize: 3}

			errCrash := errors.New("crash")
			purges := 0
			ex := &hookedExecutor{DeadLetters: fx.ex, purge: func(store.DeadLetterFilter) error {
				purges++
				if purges == failAt {
					return errCrash
				}
				return nil
			}}
			res, err := r.Enforce(context.Background(), ex)
			if !errors.Is(err, errCrash) {
				t.Fatalf("Enforce = %+v, %v; want the purge error", res, err)
			}
			if want := 3 * (failAt - 1); res.Archived != 10 || res.Purged != want {
				t.Fatalf("result %+v, want 10 archived and %d purged", res, want)
			}
			first := checkArchive(t, res, due)
			inStore := fx.stored()
			if got := sorted(inStore, recordIDs(first)); !isSupersetOf(got, all) {
				t.Fatalf("lost dead letters: store %v, archive %v, want every one of %v", inStore, recordIDs(first), all)
			}
			if len(inStore) != len(all)-res.Purged {
				t.Fatalf("store holds %d, want %d", len(inStore), len(all)-res.Purged)
			}

			// The next run, at the same instant: a second file, never the first one replaced.
			again, err := r.Enforce(context.Background(), fx.ex)
			if err != nil {
				t.Fatal(err)
			}
			if again.File == res.File || !archiveName.MatchString(filepath.Base(again.File)) {
				t.Fatalf("second archive %s, first %s", again.File, res.File)
			}
			if want := 10 - res.Purged; again.Archived != want || again.Purged != want {
				t.Fatalf("second run %+v, want %d archived and purged", again, want)
			}
			second := readArchive(t, again.File)
			fx.mustHold(t, kept)
			if got := readArchive(t, res.File); len(got) != 10 {
				t.Fatalf("first archive now holds %d records, want 10", len(got))
			}
			// Together the archives hold every purged letter; a duplicate
			// is the same record under the same id.
			firstByID := map[int64]deadletter.Record{}
			for _, r := range first {
				firstByID[r.ID] = r
			}
			for _, r := range second {
				if f, ok := firstByID[r.ID]; ok {
					if diff := sameRecord(r, f); diff != "" {
						t.Fatalf("duplicate of %d differs in %s", r.ID, diff)
					}
				}
			}
			if got := sorted(recordIDs(first), recordIDs(second), fx.stored()); !isSupersetOf(got, all) {
				t.Fatalf("lost dead letters after the second run")
			}
		})
	}
}

// isSupersetOf reports whether the sorted ids got hold every id of want.
func isSupersetOf(got, want []int64) bool {
	for _, id := range want {
		if _, ok := slices.BinarySearch(got, id); !ok {
			return false
		}
	}
	return true
}

// Two runs at the same instant, both with something due, make two files.
func TestRetentionNeverReplacesAnArchive(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	dir := t.TempDir()
	r := deadletter.Retention{ArchiveDir: dir, Clock: clock.NewFake(t0)}
	var files []string
	for range 3 {
		fx.bury(t0.Add(-30*day), 2, burial{})
		res, err := r.Enforce(context.Background(), fx.ex)
		if err != nil || res.Archived != 2 {
			t.Fatalf("Enforce = %+v, %v", res, err)
		}
		files = append(files, filepath.Base(res.File))
	}
	want := []string{
		"dead-letters-20260121T153000.000000Z.jsonl",
		"dead-letters-20260121T153000.000000Z-1.jsonl",
		"dead-letters-20260121T153000.000000Z-2.jsonl",
	}
	if !slices.Equal(files, want) {
		t.Fatalf("archives %v, want %v", files, want)
	}
	for _, f := range files {
		if n := len(readArchive(t, filepath.Join(dir, f))); n != 2 {
			t.Fatalf("%s holds %d records, want 2", f, n)
		}
	}
}

func TestRetentionCancelledPurgesNothing(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	dls := fx.bury(t0.Add(-30*day), 3, burial{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	if _, err := (deadletter.Retention{ArchiveDir: dir, Clock: clock.NewFake(t0)}).Enforce(ctx, fx.ex); !errors.Is(err, context.Canceled) {
		t.Fatalf("Enforce with a cancelled context: %v", err)
	}
	if got := fx.stored(); !slices.Equal(got, idsOf(dls)) || len(dirNames(t, dir)) != 0 {
		t.Fatalf("store %v, dir %v after a cancelled run", got, dirNames(t, dir))
	}
}

// The clock may read finer than the store keeps (microseconds): a letter
// is still due exactly when its age is more than MaxAge.
func TestRetentionBoundaryWithNanoseconds(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	now := t0.Add(500 * time.Nanosecond)
	// At t0-MaxAge the age is MaxAge+500ns: due. A microsecond later,
	// MaxAge-500ns: kept.
	due := fx.bury(t0.Add(-deadletter.DefaultMaxAge), 1, burial{})
	kept := fx.bury(t0.Add(-deadletter.DefaultMaxAge+time.Microsecond), 1, burial{})
	res, err := deadletter.Retention{ArchiveDir: t.TempDir(), Clock: clock.NewFake(now)}.Enforce(context.Background(), fx.ex)
	if err != nil || res.Archived != 1 {
		t.Fatalf("Enforce = %+v, %v; want one archived", res, err)
	}
	checkArchive(t, res, due)
	fx.mustHold(t, kept)
}
