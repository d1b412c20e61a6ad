package nats_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestDriverDoesNotBuildTheServerIn: a program that talks to a NATS
// deployment imports broker/nats, and must not compile the NATS server
// with it; the in-process server is package natsembed's.
func TestDriverDoesNotBuildTheServerIn(t *testing.T) {
	deps := goListDeps(t, ".")
	if !slices.Contains(deps, "github.com/nats-io/nats.go") {
		t.Fatalf("go list -deps lists no github.com/nats-io/nats.go among %d packages: not the driver's list", len(deps))
	}
	for _, dep := range deps {
		if strings.HasPrefix(dep, "github.com/nats-io/nats-server") || strings.HasSuffix(dep, "/natsembed") {
			t.Errorf("broker/nats depends on %s; the embedded server belongs to broker/nats/natsembed", dep)
		}
	}
}

// goListDeps returns what `go list -deps pkg` prints (the packages pkg
// builds, its tests left out), with the go command of the toolchain that
// runs the test.
func goListDeps(t *testing.T, pkg string) []string {
	t.Helper()
	//lint:ignore SA1019 the toolchain that built the test is the one to ask
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goCmd); err != nil {
		if goCmd, err = exec.LookPath("go"); err != nil {
			t.Fatalf("no go command to list the driver's imports: %v", err)
		}
	}
	out, err := exec.Command(goCmd, "list", "-deps", pkg).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}
