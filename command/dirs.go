package command

import (
	"os"
	"path/filepath"
	"runtime"

	"github.com/urfave/cli/v2"
)

// defaultDataDir is where superfluid keeps what it must not lose to a
// cache cleaner: pulled models, batch files and batch state.
// $XDG_DATA_HOME/superfluid, else ~/.local/share/superfluid
// (~/Library/Application Support/superfluid on macOS).
func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "superfluid")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "superfluid")
	}
	if runtime.GOOS == "darwin" {
		return filepath.Join(home, "Library", "Application Support", "superfluid")
	}
	return filepath.Join(home, ".local", "share", "superfluid")
}

func dataDirFlag() cli.Flag {
	return &cli.StringFlag{Name: "data-dir", Value: defaultDataDir(), Usage: "directory for pulled models, the batch API's files and batches, and stored Responses API responses (serve: off turns the batch API off and keeps responses in memory)", EnvVars: env("DATA_DIR")}
}

func modelsDirFlag() cli.Flag {
	return &cli.StringFlag{Name: "models-dir", Usage: "directory of pulled models (default: DATA-DIR/models)", EnvVars: env("MODELS")}
}

// modelsDir is --models-dir, else the data directory's models folder.
func modelsDir(c *cli.Context) string {
	if d := c.String("models-dir"); d != "" {
		return d
	}
	data := c.String("data-dir")
	if data == "off" { // the batch API is off; pulled models are still here
		data = defaultDataDir()
	}
	return filepath.Join(data, "models")
}

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
