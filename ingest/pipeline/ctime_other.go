//go:build !linux

package pipeline

import "io/fs"

// changeTime is when fi was last modified, in nanoseconds since the Unix
// epoch (Linux reads the status change time, which no program can set
// back).
func changeTime(fi fs.FileInfo) int64 { return fi.ModTime().UnixNano() }
