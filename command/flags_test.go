package command

import (
	"flag"
	"testing"

	"github.com/urfave/cli/v2"

	"superfluid/app"
)

func TestParseByteSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"10GiB", 10 << 30, true}, {"16MiB", 16 << 20, true}, {"1.5KiB", 1536, true}, {"2GB", 2e9, true},
		{"4096", 4096, true}, {"off", -1, true}, {" 1 MiB ", 1 << 20, true},
		{"0", 0, false}, {"-1GiB", 0, false}, {"lots", 0, false}, {"", 0, false}, {"0.5B", 0, false}, {"9999999TiB", 0, false},
	} {
		got, err := parseByteSize("--x", c.in)
		if (err == nil) != c.ok || c.ok && got != c.want {
			t.Errorf("%q: %d, %v; want %d (ok %v)", c.in, got, err, c.want, c.ok)
		}
	}
}

// The quota flags' defaults and an override reach app.DiskQuotas.
func TestDiskQuotaFlags(t *testing.T) {
	set := flag.NewFlagSet("serve", flag.ContinueOnError)
	for _, f := range diskQuotaFlags() {
		if err := f.Apply(set); err != nil {
			t.Fatal(err)
		}
	}
	if err := set.Parse([]string{"--max-pull-bytes", "off", "--max-files-bytes", "1GiB"}); err != nil {
		t.Fatal(err)
	}
	q, err := diskQuotas(cli.NewContext(cli.NewApp(), set, nil))
	if err != nil {
		t.Fatal(err)
	}
	if want := (app.DiskQuotas{FilesBytes: 1 << 30, ResponsesBytes: 1 << 30, ResponseBytes: 16 << 20, ConversationsBytes: 4 << 30, PullBytes: -1}); q != want {
		t.Fatalf("%+v, want %+v", q, want)
	}
}
