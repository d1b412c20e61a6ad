package admin_test

import (
	"os/exec"
	"strings"
	"testing"
)

// product is the import path of the ingestion service, the product built
// on the engine.
const product = "github.com/weirhq/weir/ingest"

// The engine's console, the admin API and the web UI, depends on no
// package of the product: the product mounts its reindex through
// admin.Reindexer.
func TestConsoleDependsOnNoProductPackage(t *testing.T) {
	t.Parallel()
	// go test puts its own GOROOT/bin first on the test's PATH.
	out, err := exec.Command("go", "list", "-e", "-deps", "-f", "{{.ImportPath}}",
		"github.com/weirhq/weir/admin", "github.com/weirhq/weir/ui").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 2 {
		t.Fatalf("go list -deps listed %q: want at least admin and ui", out)
	}
	for _, p := range deps {
		if p == product || strings.HasPrefix(p, product+"/") {
			t.Errorf("admin or ui depends on %s, a package of the ingestion service", p)
		}
	}
}
