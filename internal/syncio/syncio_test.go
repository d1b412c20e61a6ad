package syncio_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/weirhq/weir/internal/syncio"
)

// Lines written by many goroutines at once come out whole, through a
// Writer as in a Buffer.
func TestConcurrentWritesStayWhole(t *testing.T) {
	t.Parallel()
	var under bytes.Buffer
	w := syncio.NewWriter(&under)
	if w.Unwrap() != &under {
		t.Fatal("Unwrap does not return the wrapped writer")
	}
	var b syncio.Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				line := fmt.Sprintf("writer %d line %d\n", i, j)
				if _, err := w.Write([]byte(line)); err != nil {
					t.Error(err)
				}
				if _, err := b.Write([]byte(line)); err != nil {
					t.Error(err)
				}
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	for name, got := range map[string]string{"Writer": under.String(), "Buffer": b.String()} {
		lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
		if len(lines) != 8*50 {
			t.Fatalf("%s: %d lines, want %d", name, len(lines), 8*50)
		}
		for _, l := range lines {
			var i, j int
			if _, err := fmt.Sscanf(l, "writer %d line %d", &i, &j); err != nil {
				t.Fatalf("%s: line %q is torn: %v", name, l, err)
			}
		}
	}
}
