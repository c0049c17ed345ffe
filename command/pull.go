package command

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"superfluid/pull"
)

func pullCommand() *cli.Command {
	return &cli.Command{
		Name:      "pull",
		Usage:     "download a GGUF model into the models directory (resumable, verified)",
		ArgsUsage: "REF",
		Description: "REF is hf.co/ORG/REPO:FILE, hf.co/ORG/REPO:QUANT (e.g. :Q4_K_M, the repository's one GGUF file\n" +
			"with that tag), hf.co/ORG/REPO (its only GGUF file), a https://huggingface.co/…/resolve/… URL or a\n" +
			"plain http(s) URL. HF_TOKEN is sent to Hugging Face for gated and private repositories; HF_ENDPOINT\n" +
			"names a mirror. An interrupted pull resumes where it stopped when run again.",
		Flags: []cli.Flag{
			dataDirFlag(),
			modelsDirFlag(),
			&cli.StringFlag{Name: "name", Usage: "local name (default: the remote file's name)"},
			&cli.StringFlag{Name: "sha256", Usage: "expected sha256 of the file (default: the one Hugging Face announces, if any)"},
		},
		Action: pullAction,
	}
}

func pullAction(c *cli.Context) error {
	args := c.Args().Slice()
	switch {
	case len(args) == 0:
		return errors.New("pull: missing REF (hf.co/ORG/REPO:FILE, hf.co/ORG/REPO:QUANT or a URL)")
	case len(args) > 1 && strings.HasPrefix(args[1], "-"):
		return fmt.Errorf("pull: flag %s needs a value", args[1])
	case len(args) > 1:
		return fmt.Errorf("pull: unexpected argument %q (one REF at a time)", args[1])
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	opts := pull.Options{Dir: modelsDir(c), Name: c.String("name"), SHA256: c.String("sha256")}
	var bar *pull.Bar
	if f, ok := c.App.ErrWriter.(*os.File); ok && isTerminal(f) {
		bar = pull.NewBar(f)
		opts.OnProgress = bar.Update
	}
	res, err := pull.Pull(ctx, args[0], opts)
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return err
	}
	w := c.App.ErrWriter
	if res.UpToDate {
		fmt.Fprintf(w, "%s is up to date (%s, %s)\n", res.Name, pull.FormatSize(res.Size), res.Path)
		if res.Note != "" {
			fmt.Fprintf(w, "note: %s\n", res.Note)
		}
		return nil
	}
	resumed := ""
	if res.Resumed > 0 {
		resumed = fmt.Sprintf(", resumed at %s", pull.FormatSize(res.Resumed))
	}
	fmt.Fprintf(w, "pulled %s (%s) sha256:%s in %s%s\n", res.Name, pull.FormatSize(res.Size), res.SHA256, res.Elapsed.Round(100*time.Millisecond), resumed)
	return nil
}
