// Command custompipeline is a small pipeline built on weir's public
// packages: a job reads a text file and, in one transaction, records its
// word count in a table of the application's own (store/appdb), an event
// for a broker in the outbox, and the next job; that job sends a
// notification through the effect ledger, once per file however often it
// runs.
//
//	go run . [file.txt ...]
//
// Without files it counts two samples of its own. It keeps its store in a
// temporary directory, removed when it ends.
package main

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/ledger"
	"github.com/weirhq/weir/outbox"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/appdb"
)

// migrations are the application's tables, versioned apart from weir's.
//
//go:embed migrations/*.sql
var migrations embed.FS

// topic is where the events go, once a relay delivers them.
const topic = "words.counted"

// countArgs is the job that counts a file's words.
type countArgs struct {
	Path string `json:"path"`
}

func (countArgs) Kind() string { return "wordcount.count" }

// notifyArgs is the job that tells of a file counted.
type notifyArgs struct {
	Path  string `json:"path"`
	Words int    `json:"words"`
}

func (notifyArgs) Kind() string { return "wordcount.notify" }

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "custompipeline:", err)
		os.Exit(1)
	}
}

// run counts the words of files (or of two samples), and writes what it
// did to out.
func run(ctx context.Context, files []string, out io.Writer) error {
	dir, err := os.MkdirTemp("", "custompipeline-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if len(files) == 0 {
		if files, err = samples(dir); err != nil {
			return err
		}
	}

	db, err := appdb.Open(ctx, appdb.Config{Path: filepath.Join(dir, "weir.db")})
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.MigrateTables(ctx, appdb.Migrations{Table: "wordcount_migrations", FS: migrations, Dir: "migrations"}); err != nil {
		return err
	}

	logger := slog.New(slog.DiscardHandler)
	effects := ledger.New(db.Store.Executor(), nil, logger)
	notices := filepath.Join(dir, "notifications.log")
	notified := make(chan string, len(files))
	var client *weir.Client
	workers := weir.NewWorkers()
	err = errors.Join(
		weir.AddWorker(workers, weir.WorkFunc(func(ctx context.Context, j *weir.Job[countArgs]) error {
			return count(ctx, db, client, j.Args.Path)
		}), weir.KindConfig{MaxAttempts: 3}),
		weir.AddWorker(workers, weir.WorkFunc(func(ctx context.Context, j *weir.Job[notifyArgs]) error {
			line := fmt.Sprintf("%s has %d words\n", filepath.Base(j.Args.Path), j.Args.Words)
			if _, err := effects.Do(ctx, store.EffectKey{Txn: j.Args.Path, Series: "notify", Ordinal: 1}, notifyOnce(notices, line)); err != nil {
				return err
			}
			notified <- j.Args.Path
			return nil
		}), weir.KindConfig{MaxAttempts: 3}),
	)
	if err != nil {
		return err
	}
	client, err = weir.NewClient(weir.Config{Store: db.Store, Workers: workers, ID: "custompipeline",
		PollEvery: 20 * time.Millisecond, Logger: logger})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	for _, f := range files {
		// The idempotency key makes a file one job, however often it is
		// submitted.
		if _, err := client.Insert(ctx, countArgs{Path: f}, &weir.InsertOpts{IdempotencyKey: "count/" + f}); err != nil {
			return err
		}
	}
	wait := time.After(30 * time.Second)
	for range files {
		select {
		case <-notified:
		case <-wait:
			return errors.New("the files were not counted within 30 s")
		}
	}
	if err := client.Stop(ctx); err != nil {
		return err
	}
	return report(ctx, db, notices, out)
}

// count records path's word count, an event and the job that notifies of
// it, all in one transaction: none of them without the others.
func count(ctx context.Context, db *appdb.DB, client *weir.Client, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return retry.Permanent(err) // a file that cannot be read will not be on a retry
	}
	words := len(strings.Fields(string(b)))
	event, err := json.Marshal(map[string]any{"path": path, "words": words})
	if err != nil {
		return err
	}
	now := time.Now()
	return db.RunTx(ctx, func(tx appdb.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO wordcount_files (path, words, counted_at) VALUES ($1, $2, $3)
			ON CONFLICT (path) DO UPDATE SET words = excluded.words, counted_at = excluded.counted_at`, path, words, now.UnixMicro()); err != nil {
			return err
		}
		if _, err := outbox.Add(ctx, tx.Ex, now, store.OutboxMessage{Topic: topic, Key: path, Payload: event}); err != nil {
			return err
		}
		_, err := client.InsertTx(ctx, tx.Ex, notifyArgs{Path: path, Words: words}, &weir.InsertOpts{IdempotencyKey: "notify/" + path})
		return err
	})
}

// notifyOnce is the effect of appending line to the file notices; its
// Check finds a line appended by a run cut short before the ledger
// recorded it.
func notifyOnce(notices, line string) ledger.Effect {
	return ledger.Effect{
		Run: func(context.Context) (string, error) {
			f, err := os.OpenFile(notices, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				return "", err
			}
			if _, err := f.WriteString(line); err != nil {
				f.Close()
				return "", err
			}
			return "sent", f.Close()
		},
		Check: func(context.Context) (string, bool, error) {
			b, err := os.ReadFile(notices)
			if errors.Is(err, os.ErrNotExist) {
				return "", false, nil
			}
			return "sent", strings.Contains(string(b), line), err
		},
	}
}

// report writes the table's rows, the notifications and the outbox's
// backlog to out.
func report(ctx context.Context, db *appdb.DB, notices string, out io.Writer) error {
	rows, err := db.SQL.QueryContext(ctx, `SELECT path, words FROM wordcount_files ORDER BY path`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			path  string
			words int
		)
		if err := rows.Scan(&path, &words); err != nil {
			return err
		}
		fmt.Fprintf(out, "counted %s: %d words\n", filepath.Base(path), words)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	b, err := os.ReadFile(notices)
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Fprintf(out, "notified: %s\n", l)
	}
	backlog, err := db.Store.Executor().OutboxBacklog(ctx)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "outbox: %d events for %s, waiting for a relay (outbox.New) to deliver them\n", backlog.Pending, topic)
	return err
}

// samples writes two text files to dir.
func samples(dir string) ([]string, error) {
	texts := map[string]string{
		"bees.txt":  "A hive of bees makes honey in summer.",
		"wasps.txt": "Wasps make paper nests.",
	}
	var files []string
	for name, text := range texts {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			return nil, err
		}
		files = append(files, p)
	}
	slices.Sort(files)
	return files, nil
}
