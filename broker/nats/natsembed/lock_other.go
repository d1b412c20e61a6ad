//go:build !unix

package natsembed

// dirLock does nothing where flock is missing: there, keep to one
// process per directory by hand.
type dirLock struct{}

func lockDir(string) (*dirLock, error) { return &dirLock{}, nil }

func (*dirLock) release() error { return nil }
