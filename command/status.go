package command

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"superfluid/status"
	"superfluid/statusui"
)

// statusFlags name the server `ps` and `top` read.
func statusFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "url", Value: "http://127.0.0.1:8080", Usage: "the server's base URL", EnvVars: env("URL")},
		&cli.StringFlag{Name: "api-key", Usage: "sent as Authorization: Bearer KEY", EnvVars: env("API_KEY")},
	}
}

func statusClient(c *cli.Context) *status.Client {
	return &status.Client{URL: c.String("url"), APIKey: c.String("api-key")}
}

func psCommand() *cli.Command {
	return &cli.Command{
		Name:      "ps",
		Usage:     "list a running server's loaded models: size, context, keep-alive, lanes busy, cache bytes",
		ArgsUsage: " ",
		Flags: append(statusFlags(),
			&cli.BoolFlag{Name: "json", Usage: "print the server's whole status (GET /v1/status) as JSON"}),
		Action: psAction,
	}
}

func psAction(c *cli.Context) error {
	if c.Args().Present() {
		return fmt.Errorf("ps: unexpected argument %q", c.Args().First())
	}
	st, err := statusClient(c).Fetch(c.Context)
	if err != nil {
		return fmt.Errorf("ps: %w", err)
	}
	if c.Bool("json") {
		out, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			return fmt.Errorf("ps: %w", err)
		}
		fmt.Fprintf(c.App.Writer, "%s\n", out)
		return nil
	}
	// The server's clock says when a model expires; ours may differ.
	now := st.Now
	if now.IsZero() {
		now = time.Now()
	}
	fmt.Fprint(c.App.Writer, statusui.PS(st, now))
	return nil
}

func topCommand() *cli.Command {
	return &cli.Command{
		Name:      "top",
		Usage:     "a running server's live view: models, lanes, queues per class, cache tiers, tokens/s (q quits)",
		ArgsUsage: " ",
		Flags:     statusFlags(),
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return fmt.Errorf("top: unexpected argument %q", c.Args().First())
			}
			return statusui.Top(c.Context, statusClient(c), os.Stdin, os.Stdout)
		},
	}
}
