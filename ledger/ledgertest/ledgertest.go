// Package ledgertest gives tests of the effect ledger, crash tests above
// all, an effect whose runs can be counted after the process that ran
// them was killed: it writes a file, and logs each run to another first.
package ledgertest

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/weirhq/weir/ledger"
)

// WritesFile is the file in dir where FileEffect logs its runs, one line
// each.
const WritesFile = "writes"

// FileEffect is an effect that appends name and a newline to
// dir/writes, then writes the file name in dir; its result is name. Its
// Check reports it happened when the file is there.
func FileEffect(dir, name string) ledger.Effect {
	path := filepath.Join(dir, name)
	return ledger.Effect{
		Run: func(context.Context) (string, error) {
			f, err := os.OpenFile(filepath.Join(dir, WritesFile), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return "", err
			}
			defer f.Close()
			if _, err := f.WriteString(name + "\n"); err != nil {
				return "", err
			}
			return name, os.WriteFile(path, []byte(name), 0o644)
		},
		Check: func(context.Context) (string, bool, error) {
			_, err := os.Stat(path)
			if errors.Is(err, os.ErrNotExist) {
				return "", false, nil
			}
			return name, err == nil, err
		},
	}
}
