package ui_test

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/weirhq/weir/ui"
)

// The overview lists the pauses with a Resume button each, and has a form
// that pauses a queue or a kind, through the admin API's pause endpoints.
func TestConsolePausesAndResumes(t *testing.T) {
	t.Parallel()
	b, err := fs.ReadFile(ui.Files(), "assets/app.js")
	if err != nil {
		t.Fatal(err)
	}
	js := string(b)
	for _, want := range []string{
		"api('GET', '/api/admin/pauses')",
		"api('POST', '/api/admin/pauses', body)",
		"api('POST', '/api/admin/pauses/resume', body)",
		"'Resume'", "id: 'pause-button' }, 'Pause'",
	} {
		if !strings.Contains(js, want) {
			t.Errorf("app.js lacks %s", want)
		}
	}
}
