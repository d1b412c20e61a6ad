package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPrintable(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain name.txt":           "plain name.txt",
		"bees «hive» ünïcode 蜂":    "bees «hive» ünïcode 蜂",
		"clear\x1b[2Jscreen":       `clear\x1b[2Jscreen`,
		"title\x1b]0;pwned\x07":    `title\x1b]0;pwned\a`,
		"two\nlines\r\ttab":        `two\nlines\r\ttab`,
		"del\x7f and c1 \u009b31m": `del\x7f and c1 \x9b31m`,
		"bidi \u202eevil\u2066":    `bidi \u202eevil\u2066`,
		"sep\u2028line":            `sep\u2028line`,
		"bad utf-8 \xff\xfe":       `bad utf-8 \xff\xfe`,
		"nul\x00":                  `nul\x00`,
		"bs\b ff\f vt\v":           `bs\b ff\f vt\v`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}

// terminalJSON leaves JSON that means the same value, with nothing a
// terminal acts on.
func TestTerminalJSON(t *testing.T) {
	t.Parallel()
	v := map[string]string{"title": "a\x1b[2J\x07b\x7f\u009b\u202e\u2028\nc\td", "plain": "x"}
	var b bytes.Buffer
	if err := writeIndented(&b, v); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsFunc(strings.ReplaceAll(out, "\n", ""), unsafeRune) {
		t.Fatalf("JSON output holds a raw control character: %q", out)
	}
	var back map[string]string
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || back["title"] != v["title"] || back["plain"] != "x" {
		t.Fatalf("the JSON output %q reads back as %q, %v", out, back, err)
	}
	b.Reset()
	if err := writeJSONLines(&b, []map[string]string{v, v}, func(m map[string]string) any { return m }); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n"); len(lines) != 2 {
		t.Fatalf("JSON lines: %d lines, want 2: %q", len(lines), b.String())
	}
}

// File names and titles with escapes and newlines reach no terminal raw:
// not in search, status, the dead-letter and job tables, ingest's output
// or an error message; and JSON output stays JSON.
func TestOutputEscapesControlCharacters(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	docs := writeDocs(t, map[string]string{
		"clear\x1b[2J\x07bees\nname.md": "# Bees\x1b]0;pwned\x07 and\x1b[2J hives\n\nThe hive swarmed in May.",
		"poison\x1b[31m.txt":            "\x00\x01\x02 binary",
		"odd\x1b[5m.json":               "{}",
	})
	check := func(what, out string) {
		t.Helper()
		if strings.ContainsAny(out, "\x1b\x07") {
			t.Errorf("%s printed a raw escape or bell: %q", what, out)
		}
	}
	code, stdout, stderr := run("ingest", "-data", data, docs)
	check("ingest", stdout+stderr)
	if code != 0 || !strings.Contains(stderr, `skipped `) || !strings.Contains(stderr, `odd\x1b[5m.json`) {
		t.Fatalf("ingest: %d, %q %q", code, stdout, stderr)
	}
	code, stdout, stderr = run("search", "-data", data, "hive")
	check("search", stdout+stderr)
	if code != 0 || !strings.Contains(stdout, `clear\x1b[2J\abees\nname.md`) || strings.Count(stdout, "\n") != 4 {
		t.Errorf("search: %d, %q: want the escaped name and one hit on four lines", code, stdout)
	}
	code, stdout, _ = run("search", "-data", data, "-json", "hive")
	var hits []struct{ Title, Source string }
	if err := json.Unmarshal([]byte(stdout), &hits); code != 0 || err != nil || len(hits) != 1 || !strings.Contains(hits[0].Source, "\x1b[2J\x07bees\nname.md") {
		t.Errorf("search -json: %d, %v, %+v: want JSON that holds the name as it is", code, err, hits)
	}
	check("search -json", stdout)
	for _, args := range [][]string{{"status"}, {"dlq", "list"}, {"jobs", "list"}, {"jobs", "show", "1"}, {"dlq", "show", "1"}, {"dlq", "export"}, {"jobs", "list", "-json"}} {
		code, stdout, stderr := run(append(args, "-data", data)...)
		check(strings.Join(args, " "), stdout+stderr)
		if code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, stderr)
		}
	}
	// A table keeps one line a row whatever its cells hold.
	_, stdout, _ = run("jobs", "list", "-data", data)
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n")[1:] {
		if !strings.Contains(line, "pipeline.") {
			t.Errorf("a row of jobs list was split: %q", line)
		}
	}
	// An error that quotes a file name.
	code, _, stderr = run("ingest", "-data", data, filepath.Join(docs, "gone\x1b[2J\nfile.txt"))
	check("an error of ingest", stderr)
	if code != 1 || !strings.Contains(stderr, `gone\x1b[2J\nfile.txt`) {
		t.Errorf("ingest of a missing file: %d, %q", code, stderr)
	}
	if _, err := os.Stat(data); err != nil {
		t.Fatal(err)
	}
}

// errorText escapes each line of an error and keeps the lines of joined
// errors; it masks a URL's password.
func TestErrorText(t *testing.T) {
	t.Parallel()
	err := errors.Join(fmt.Errorf("open %s: no such file", "a\x1b[2Jb"), errors.New("connect postgres://weir:hunter2@db/weir: refused"))
	got := errorText(err)
	if strings.ContainsAny(got, "\x1b") || strings.Contains(got, "hunter2") || strings.Count(got, "\n") != 1 || !strings.Contains(got, `a\x1b[2Jb`) {
		t.Fatalf("errorText = %q", got)
	}
}
