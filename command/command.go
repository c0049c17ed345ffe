// Package command is superfluid's command line: each command turns its
// flags into the options of the package that does the work, and main.go at
// the repository root only calls Main.
package command

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/urfave/cli/v2"
)

// version is set at link time by the Makefile
// (-X superfluid/command.version=…).
var version = "dev"

// Main runs the command line args (os.Args) writing to stdout and stderr,
// and returns the process's exit code: 0, or 1 after a one-line error.
func Main(args []string, stdout, stderr io.Writer) int {
	if err := runApp(newApp(stdout, stderr), args); err != nil {
		fmt.Fprintf(stderr, "superfluid: %s\n", oneLine(err))
		return 1
	}
	return 0
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:      "superfluid",
		Usage:     "a local LLM inference server and CLI with llama.cpp compiled in",
		Version:   version,
		Writer:    stdout,
		ErrWriter: stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error (debug includes llama.cpp's own log)", EnvVars: []string{"SUPERFLUID_LOG_LEVEL"}},
		},
		Before: func(c *cli.Context) error {
			return setupLogging(stderr, c.String("log-level"))
		},
		Commands: []*cli.Command{
			runCommand(),
			serveCommand(),
			benchCommand(),
			modelCommand(),
			batchCommand(),
			pullCommand(),
			modelsCommand(),
			psCommand(),
			topCommand(),
			versionCommand(),
		},
		OnUsageError:    usageError,
		HideHelpCommand: true,
	}
	for _, c := range app.Commands {
		setUsageErrors(c)
	}
	return app
}

// usageError makes a bad flag a one-line error instead of the help text.
func usageError(_ *cli.Context, err error, _ bool) error {
	return err
}

func setUsageErrors(c *cli.Command) {
	c.OnUsageError = usageError
	checkRequiredQuietly(c)
	for _, sub := range c.Subcommands {
		setUsageErrors(sub)
	}
}

// checkRequiredQuietly moves a command's required-flag check into its
// Before hook: urfave/cli prints the whole help text with a missing
// required flag, where one line says it better.
func checkRequiredQuietly(c *cli.Command) {
	var required []string
	for _, f := range c.Flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Required {
			sf.Required = false
			sf.Usage += " (required)"
			required = append(required, sf.Name)
		}
	}
	if len(required) == 0 {
		return
	}
	before := c.Before
	c.Before = func(ctx *cli.Context) error {
		for _, name := range required {
			if !ctx.IsSet(name) {
				return fmt.Errorf("%s: missing required flag --%s", c.Name, name)
			}
		}
		if before != nil {
			return before(ctx)
		}
		return nil
	}
}

func setupLogging(w io.Writer, level string) error {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})))
	return nil
}

func oneLine(err error) string {
	var exit cli.ExitCoder
	if errors.As(err, &exit) && exit.Error() == "" {
		return "failed"
	}
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version, the llama.cpp commit compiled in, the CPU backend build chosen and its features",
		Action: func(c *cli.Context) error {
			fmt.Fprintf(c.App.Writer, "superfluid %s\nllama.cpp: %s (%s)\ncpu variant: %s\ncpu: %s\n",
				version, llamaCommit(), llamaSource(), cpuVariant(), cpuFeatures())
			return nil
		},
	}
}
