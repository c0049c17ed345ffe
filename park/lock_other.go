//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package park

import "os"

// lockDir is a no-op where flock(2) is missing: one server per park
// directory is then the user's to ensure.
func lockDir(string) (*os.File, error) { return nil, nil }

func unlockDir(f *os.File) error {
	if f == nil {
		return nil
	}
	return f.Close()
}
