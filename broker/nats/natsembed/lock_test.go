package natsembed

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/broker/nats"
)

// openOn opens an embedded broker on dir.
func openOn(t *testing.T, dir string) (*Broker, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return Open(ctx, Config{Dir: dir, Broker: nats.Config{Logger: testLogger()}})
}

// A second embedded broker on a directory in use is refused, with an
// error that names the directory; once the first closes, a new one opens
// and finds what the first stored.
func TestEmbeddedRefusesADirectoryInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := openOn(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := first.Declare(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	second, err := openOn(t, dir)
	if err == nil {
		second.Close()
		first.Close()
		t.Fatal("a second embedded broker opened on a directory in use")
	}
	if !errors.Is(err, ErrDirInUse) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "this process") {
		t.Fatalf("second open: %v; want ErrDirInUse naming %s and its holder", err, dir)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	third, err := openOn(t, dir)
	if err != nil {
		t.Fatalf("open after the first closed: %v", err)
	}
	defer third.Close()
	if _, err := streamOf(ctx, third.URL(), "kept"); err != nil {
		t.Fatalf("the stream the first declared: %v", err)
	}
}

// holdDirEnv names the directory the helper process holds.
const holdDirEnv = "WEIR_TEST_NATS_HOLD_DIR"

// TestHoldEmbeddedDirHelper is the child process of
// TestEmbeddedRefusesADirectoryHeldByAnotherProcess: it opens an embedded
// broker on the directory, says so, and waits to be killed.
func TestHoldEmbeddedDirHelper(t *testing.T) {
	dir := os.Getenv(holdDirEnv)
	if dir == "" {
		t.Skip("run by TestEmbeddedRefusesADirectoryHeldByAnotherProcess")
	}
	b, err := openOn(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	os.Stdout.WriteString("holding\n")
	time.Sleep(time.Minute)
}

// Another process running the embedded broker on a directory keeps this
// one out, with an error naming the directory and the process; its lock
// goes with it when it dies (killed, nothing closed).
func TestEmbeddedRefusesADirectoryHeldByAnotherProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^TestHoldEmbeddedDirHelper$", "-test.v")
	child.Env = append(os.Environ(), holdDirEnv+"="+dir)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = child.Process.Kill()
			_ = child.Wait()
		}
	})
	holding := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "holding" {
				holding <- true
				break
			}
		}
		for sc.Scan() { // drain until the child exits
		}
	}()
	select {
	case <-holding:
	case <-time.After(60 * time.Second):
		t.Fatal("the child process did not open the embedded broker within 60 s")
	}
	b, err := openOn(t, dir)
	if err == nil {
		b.Close()
		t.Fatal("the embedded broker opened on a directory another process runs one on")
	}
	if !errors.Is(err, ErrDirInUse) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "process "+strconv.Itoa(child.Process.Pid)) {
		t.Fatalf("open: %v; want ErrDirInUse naming %s and process %d", err, dir, child.Process.Pid)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	killed = true
	b, err = openOn(t, dir)
	if err != nil {
		t.Fatalf("open once the other process died: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
