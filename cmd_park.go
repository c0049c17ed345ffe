package main

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

// parkDir maps the --park-dir value to app.Options.ParkDir, where "" is off.
func parkDir(flag string) string {
	if flag == "off" {
		return ""
	}
	return flag
}
