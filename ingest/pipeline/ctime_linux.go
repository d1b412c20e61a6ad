package pipeline

import (
	"io/fs"
	"syscall"
)

// changeTime is fi's status change time (ctime), in nanoseconds since the
// Unix epoch: when the file was last written, renamed into place or had
// its mode changed. Unlike the modification time no program can set it
// back, so that a file copied in with an old modification time (cp -p) is
// still newer than what was there before.
func changeTime(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ctim.Nano()
	}
	return fi.ModTime().UnixNano()
}
