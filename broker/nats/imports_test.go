package nats_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestDriverDoesNotBuildTheServerIn: a program that talks to a NATS
// deployment imports broker/nats, and must not compile the NATS server
// with it; the in-process server is package natsembed's. The packages are
// the ones `go list -deps` names (tests left out), asked of the go command
// of the toolchain that runs the test.
func TestDriverDoesNotBuildTheServerIn(t *testing.T) {
	//lint:ignore SA1019 the toolchain that built the test is the one to ask
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(goCmd, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("%s list -deps: %v\n%s", goCmd, err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/nats-io/nats.go") {
		t.Fatalf("go list -deps names no github.com/nats-io/nats.go among %d packages: not the driver's list", len(deps))
	}
	for _, dep := range deps {
		if strings.HasPrefix(dep, "github.com/nats-io/nats-server") || strings.HasSuffix(dep, "/natsembed") {
			t.Errorf("broker/nats depends on %s; the embedded server belongs to broker/nats/natsembed", dep)
		}
	}
}
