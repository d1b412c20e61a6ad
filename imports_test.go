package weir_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestRootImportsStayLight: importing the engine compiles no metrics
// library, no OpenTelemetry SDK, no embedded broker and nothing of the
// ingestion product. The engine reports through weir.Metrics and
// trace.TracerProvider; package metrics and the product's composition
// root bring the heavy parts, for the programs that want them.
func TestRootImportsStayLight(t *testing.T) {
	deps := goListDeps(t, ".")
	forbidden := []string{
		"github.com/prometheus/",
		"go.opentelemetry.io/otel/sdk",
		"github.com/nats-io/nats-server",
		"github.com/weirhq/weir/ingest",
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("the root package depends on %s (forbidden: %s*)", dep, f)
			}
		}
	}
}

// goListDeps returns what `go list -deps pkg` prints, with the go command
// of the toolchain that runs the test.
func goListDeps(t *testing.T, pkg string) []string {
	t.Helper()
	//lint:ignore SA1019 the toolchain that built the test is the one to ask
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goCmd); err != nil {
		if goCmd, err = exec.LookPath("go"); err != nil {
			t.Fatalf("no go command to list the root's imports: %v", err)
		}
	}
	out, err := exec.Command(goCmd, "list", "-deps", pkg).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatalf("go list -deps %s listed nothing", pkg)
	}
	return deps
}
