package command

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"superfluid/keys"
)

// openKeys reads --api-keys-file (nil when it is unset) and reloads it on
// every SIGHUP until ctx ends: a file that fails to read or parse keeps
// the keys in force, and the log says why.
func openKeys(ctx context.Context, src string) (*keys.Keeper, error) {
	if src == "" {
		return nil, nil
	}
	k, err := keys.Open(keys.Source(src), time.Now)
	if err != nil {
		return nil, err
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := k.Reload(); err != nil {
					slog.Error("SIGHUP: the API keys were not reloaded; the previous ones stay in force", "source", k.Source().String(), "err", err)
				}
			}
		}
	}()
	return k, nil
}
