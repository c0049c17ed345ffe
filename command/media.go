package command

import (
	"github.com/urfave/cli/v2"

	"superfluid/http/wire"
	"superfluid/media"
)

// remoteMediaFlags let requests name images by http(s) URL, which the
// server then fetches (llama-server's and Ollama's users expect it; off by
// default, since any prompt could then make the server fetch a URL).
func remoteMediaFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "allow-remote-media", Usage: "fetch the images requests name by http(s) URL (OpenAI image_url, Anthropic url sources, Responses input_image): anyone who can send a prompt can then make the server fetch a URL from its network (link-local addresses are refused)", EnvVars: env("ALLOW_REMOTE_MEDIA")},
		&cli.DurationFlag{Name: "remote-media-timeout", Value: media.FetchTimeout, Usage: "how long one remote image's fetch may take, redirects and body included", EnvVars: env("REMOTE_MEDIA_TIMEOUT")},
	}
}

// remoteMedia is the server's fetcher of remote images, nil unless
// --allow-remote-media.
func remoteMedia(c *cli.Context) *media.Fetcher {
	if !c.Bool("allow-remote-media") {
		return nil
	}
	return media.NewFetcher(media.FetcherOptions{MaxBytes: wire.MaxMediaBytes, Timeout: c.Duration("remote-media-timeout")})
}
