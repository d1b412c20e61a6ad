package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestByteSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{
		"1048576": 1 << 20, "32MiB": 32 << 20, "32mib": 32 << 20, "500KB": 500000, "1 GiB": 1 << 30, "7b": 7, "2MB": 2000000, "0": 0,
	} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "lots", "-1", "1.5MiB", "MiB", "3TB", "99999999999GiB"} {
		var b byteSize
		if err := b.Set(in); err == nil {
			t.Errorf("Set(%q) = %d, want an error", in, b)
		}
	}
	for n, want := range map[byteSize]string{32 << 20: "32MiB", 1000: "1000", 1 << 30: "1GiB", 1536: "1536"} {
		if got := n.String(); got != want {
			t.Errorf("String(%d) = %q, want %q", int64(n), got, want)
		}
	}
}

// -max-file-size and the stage timeouts, from the command line or their
// WEIR_ variables: refused when bad, naming the flag; a file over the
// limit fails, unread.
func TestMaxFileSizeAndStageTimeouts(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for _, c := range []struct {
		args []string
		has  []string
	}{
		{[]string{"run", "-data", missing, "-max-file-size", "0"}, []string{"-max-file-size 0", "positive size"}},
		{[]string{"ingest", "-data", missing, "-max-file-size", "lots", "x"}, []string{"-max-file-size", "want a size such as 32MiB"}},
		{[]string{"run", "-data", missing, "-parse-timeout", "0s"}, []string{"-parse-timeout 0s", "positive"}},
		{[]string{"run", "-data", missing, "-extract-timeout", "-1m"}, []string{"-extract-timeout -1m0s"}},
		{[]string{"run", "-data", missing, "-save-timeout", "soon"}, []string{"-save-timeout", "want a duration"}},
		{[]string{"ingest", "-data", missing, "-index-timeout", "0", "x"}, []string{"-index-timeout 0s"}},
	} {
		code, stdout, stderr := run(c.args...)
		want(t, "weir "+strings.Join(c.args, " "), code, 2, stdout+stderr, c.has...)
	}
	for _, c := range []struct{ name, value, has string }{
		{"WEIR_MAX_FILE_SIZE", "huge", `WEIR_MAX_FILE_SIZE="huge" (-max-file-size): want a size`},
		{"WEIR_MAX_FILE_SIZE", "0", "-max-file-size 0: want a positive size such as 32MiB (the value of WEIR_MAX_FILE_SIZE)"},
		{"WEIR_SAVE_TIMEOUT", "0s", "-save-timeout 0s: want a positive duration such as 30s (the value of WEIR_SAVE_TIMEOUT)"},
		{"WEIR_PARSE_TIMEOUT", "1", `WEIR_PARSE_TIMEOUT="1" (-parse-timeout): want a duration`},
	} {
		t.Run(c.name+"="+c.value, func(t *testing.T) {
			t.Setenv(c.name, c.value)
			code, stdout, stderr := run("run", "-data", missing)
			want(t, c.name+"="+c.value, code, 2, stdout+stderr, c.has)
		})
	}

	// A file over -max-file-size fails; one under it is saved.
	data := filepath.Join(t.TempDir(), "data")
	docs := writeDocs(t, map[string]string{"small.txt": "Bees\n\nA hive.", "big.txt": "Bees\n\n" + strings.Repeat("A large hive of bees. ", 100)})
	code, stdout, stderr := run("ingest", docs, "-data", data, "-max-file-size", "1KiB")
	want(t, "ingest -max-file-size 1KiB", code, 0, stdout+stderr, "1 files processed, 1 failed")
}
