package command

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/urfave/cli/v2"

	"superfluid/app"
	"superfluid/batch"
	sfhttp "superfluid/http"
	"superfluid/sched"
)

func batchCommand() *cli.Command {
	return &cli.Command{
		Name:      "batch",
		Usage:     "answer a JSONL file of requests (OpenAI batch format) into a JSONL file of results; rerun to resume",
		ArgsUsage: "IN.jsonl",
		Description: "Each input line is an OpenAI batch request {\"custom_id\", \"method\": \"POST\", \"url\": \"/v1/chat/completions\" | \"/v1/completions\", \"body\"}\n" +
			"or a bare body: {\"prompt\": …} (a completion) or {\"messages\": …} (a chat), custom_id optional (default line-N).\n" +
			"Each output line is an OpenAI batch result {\"id\", \"custom_id\", \"response\": {\"status_code\", \"request_id\", \"body\"}, \"error\"},\n" +
			"in the order requests finish. A malformed line gets an error record; rerunning with the same -o skips the custom_ids\n" +
			"already answered and retries the ones that got no answer.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Required: true, Usage: "results file (JSONL); an existing one is resumed"},
			&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "GGUF file or pulled model name to load (or --url)", EnvVars: env("MODEL")},
			&cli.StringFlag{Name: "url", Usage: "send the requests to this running server instead of loading a model, e.g. http://127.0.0.1:8080"},
			&cli.StringFlag{Name: "api-key", Usage: "with --url: sent as Authorization: Bearer KEY", EnvVars: env("API_KEY")},
			&cli.IntFlag{Name: "parallel", Aliases: []string{"p"}, Usage: "requests in flight at once", DefaultText: "twice the lanes, so none idles"},
			&cli.StringFlag{Name: "class", Value: "background", Usage: "scheduling class of the requests: background, agent or chat"},
			&cli.StringFlag{Name: "alias", Usage: "the model name request bodies may give (default: the file name without .gguf)"},
			dataDirFlag(),
			modelsDirFlag(),
		}, slices.Concat(engineFlags(8), loraFlags(), remoteMediaFlags())...),
		Action: batchAction,
	}
}

func batchAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return errors.New("batch: want one input file (IN.jsonl, or - for standard input)")
	}
	// SUPERFLUID_MODEL in the environment does not stand in --url's way.
	fromEnv := c.String("model") == os.Getenv("SUPERFLUID_MODEL")
	switch hasModel, hasURL := c.String("model") != "", c.String("url") != ""; {
	case !hasModel && !hasURL:
		return errors.New("batch: give --model (load it here) or --url (send to a running server)")
	case hasModel && hasURL && !fromEnv:
		return errors.New("batch: give --model or --url, not both")
	}
	if !c.IsSet("log-level") {
		// Piped, a batch prints its summary and nothing else; warnings
		// still show.
		if err := setupLogging(c.App.ErrWriter, "warn"); err != nil {
			return err
		}
	}
	class, err := sched.ParseClass(c.String("class"))
	if err != nil {
		return fmt.Errorf("batch: --class: %w", err)
	}
	reqs, err := readBatchInput(c.Args().First())
	if err != nil {
		return err
	}
	if in, err := os.Stat(c.Args().First()); err == nil {
		if o, err := os.Stat(c.String("output")); err == nil && os.SameFile(in, o) {
			return errors.New("batch: the output file is the input file; name another with -o")
		}
	}
	out, err := batch.OpenOutput(c.String("output"))
	if err != nil {
		return err
	}
	// Loading takes a while; Ctrl-C then just ends the process (nothing is
	// written yet). From here on it stops the run with the output valid.
	doer, parallel, closeDoer, err := batchDoer(c, class)
	if err != nil {
		out.Close()
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if n := c.Int("parallel"); n > 0 {
		parallel = n
	}
	bar := newProgressLine(c.App.ErrWriter)
	r := &batch.Runner{Doer: doer, Parallel: parallel, OnProgress: bar.update}
	p, runErr := r.Run(ctx, reqs, out)
	bar.finish()
	err = errors.Join(closeDoer(), out.Close())
	fmt.Fprintf(c.App.ErrWriter, "%s\n", p.Summary())
	switch {
	case runErr != nil && ctx.Err() != nil:
		return fmt.Errorf("batch: interrupted with %d of %d answered; %s is valid, rerun the same command to resume", p.Done, p.Total, out.Path())
	case runErr != nil:
		return runErr
	}
	return err
}

func readBatchInput(path string) ([]batch.Request, error) {
	var in io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("batch: %w", err)
		}
		defer f.Close()
		in = f
	}
	return batch.ReadInput(in)
}

// batchDoer is where the requests go: a server at --url, or a stack loaded
// here that runs them through the request core (app.Stack.Doer). parallel
// is the default in-flight count.
func batchDoer(c *cli.Context, class sched.Class) (d batch.Doer, parallel int, closeFn func() error, err error) {
	if url := c.String("url"); url != "" {
		d := &batch.HTTPDoer{BaseURL: url, APIKey: c.String("api-key"), Class: class.String(), Client: &http.Client{}}
		return d, 2 * d.Lanes(c.Context), func() error { return nil }, nil
	}
	path, err := resolveModelFlag(c)
	if err != nil {
		return nil, 0, nil, err
	}
	lanes := c.Int("lanes")
	if lanes < 1 || lanes > 64 {
		return nil, 0, nil, fmt.Errorf("batch: --lanes %d outside [1, 64]", lanes)
	}
	poll, err := pollOption(c)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("batch: %w", err)
	}
	typeK, typeV, err := cacheTypes(c, c.String("flash-attn"))
	if err != nil {
		return nil, 0, nil, fmt.Errorf("batch: %w", err)
	}
	lora, err := loraFiles(c)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("batch: %w", err)
	}
	st, err := app.Load(app.Options{
		ModelPath: path, Alias: c.String("alias"), LoRA: lora, Lanes: lanes, Ctx: c.Int("ctx"), Threads: c.Int("threads"),
		Batch: c.Int("batch"), UBatch: c.Int("ubatch"), CacheTypeK: typeK, CacheTypeV: typeV, FlashAttn: c.String("flash-attn"), NoRepack: c.Bool("no-repack"), Poll: poll, HTTP: sfhttp.Config{Version: version, RemoteMedia: remoteMedia(c)},
	})
	if err != nil {
		return nil, 0, nil, err
	}
	return st.Doer(class.String()), 2 * lanes, st.Close, nil
}
