package command

import (
	"strings"
	"testing"
)

// --background-url and --background-model reach bench's config, which
// checks them before sending anything.
func TestBenchBackgroundFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--scenario", "fim-under-load", "--background-url", "ftp://x"}, `--background-url "ftp://x"`},
		{[]string{"--scenario", "decode", "--background-url", "http://127.0.0.1:1"}, "for --scenario fim-under-load"},
		{[]string{"--scenario", "multi-turn", "--background-model", "big"}, "for --scenario fim-under-load"},
	} {
		_, _, err := runCLI(append([]string{"bench", "--url", "http://127.0.0.1:1"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
}
