package command

import (
	"os"
	"path/filepath"
)

// defaultParkDir is $XDG_CACHE_HOME/superfluid/park (os.UserCacheDir), or
// "off" where the system names no cache directory.
func defaultParkDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "off"
	}
	return filepath.Join(dir, "superfluid", "park")
}

// dirOrOff maps a directory flag (--park-dir, --data-dir) to its
// app.Options field, where "" is off.
func dirOrOff(flag string) string {
	if flag == "off" {
		return ""
	}
	return flag
}
