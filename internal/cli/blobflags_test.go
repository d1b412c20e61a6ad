package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/blobtest"
)

// -incoming-url, -processed-url and -failed-url refuse an unknown scheme
// before anything is opened, and a container that does not exist when
// weir run opens it, naming the flag (or the variable it came from).
func TestBlobFlagsRefuseBadContainers(t *testing.T) {
	t.Parallel()
	c := blobtest.Azure(t)
	missing := strings.Replace(c.Prefix("failed/"), c.Name, c.Name+"-missing", 1)
	data := filepath.Join(t.TempDir(), "data")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"run", "-incoming-url", "ftp://files/in"}, []string{`-incoming-url "ftp://files/in": unknown scheme "ftp"`}},
		{[]string{"status", "-processed-url", "/var/lib/weir/processed"}, []string{"-processed-url", `unknown scheme ""`}},
		{[]string{"run", "-listen", "127.0.0.1:0", "-incoming-url", c.Prefix("incoming/"), "-failed-url", missing},
			[]string{"-failed-url", "the container does not exist"}},
	} {
		code, stdout, stderr := run(append(tc.args, "-data", data)...)
		want(t, strings.Join(tc.args, " "), code, 2, stdout+stderr, tc.want...)
	}
}
