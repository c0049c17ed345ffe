package command

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"superfluid/pull"
)

func modelsCommand() *cli.Command {
	return &cli.Command{
		Name:      "models",
		Usage:     "list the models in the models directory",
		ArgsUsage: " ",
		Flags: []cli.Flag{
			dataDirFlag(),
			modelsDirFlag(),
			&cli.BoolFlag{Name: "json", Usage: "print a JSON array (name, path, size, modified, source, sha256 …)"},
		},
		Action: modelsAction,
	}
}

func modelsAction(c *cli.Context) error {
	if c.Args().Present() {
		return fmt.Errorf("models: unexpected argument %q", c.Args().First())
	}
	dir := modelsDir(c)
	entries, err := pull.List(dir)
	if err != nil {
		return fmt.Errorf("models: %w", err)
	}
	if c.Bool("json") {
		if entries == nil {
			entries = []pull.Entry{}
		}
		out, err := json.MarshalIndent(entries, "", "  ")
		if err != nil {
			return fmt.Errorf("models: %w", err)
		}
		fmt.Fprintf(c.App.Writer, "%s\n", out)
		return nil
	}
	if len(entries) == 0 {
		fmt.Fprintf(c.App.ErrWriter, "no models in %s (`superfluid pull REF` fetches one)\n", dir)
		return nil
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSIZE\tSOURCE\tMODIFIED")
	for _, e := range entries {
		src := e.Source
		if src == "" {
			src = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Name, pull.FormatSize(e.Size), src, e.Modified.Local().Format("2006-01-02 15:04"))
	}
	return tw.Flush()
}

// resolveModelFlag is --model as a file path: a path as given, or the name
// (or the reference) of a model in the models directory.
func resolveModelFlag(c *cli.Context) (string, error) {
	return pull.Resolve(c.String("model"), modelsDir(c))
}
