package command

import (
	"flag"
	"testing"

	"github.com/urfave/cli/v2"

	"superfluid/kv"
	"superfluid/pressure"
)

func pressureContext(t *testing.T, args ...string) *cli.Context {
	t.Helper()
	set := flag.NewFlagSet("serve", flag.ContinueOnError)
	for _, f := range pressureFlags() {
		if err := f.Apply(set); err != nil {
			t.Fatal(err)
		}
	}
	if err := set.Parse(args); err != nil {
		t.Fatal(err)
	}
	return cli.NewContext(cli.NewApp(), set, nil)
}

// The defaults watch Linux with the default marks; the flags move them;
// the hidden testing hook reads a file; marks out of order are refused.
func TestPressureFlags(t *testing.T) {
	o, err := pressureOptions(pressureContext(t))
	if err != nil || o.Off || o.Watermarks != (kv.Watermarks{High: 85, Low: 70}) {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	if l, ok := o.Monitor.Source.(*pressure.Linux); !ok || l.Thresholds != pressure.DefaultThresholds {
		t.Fatalf("default source %#v", o.Monitor.Source)
	}
	o, err = pressureOptions(pressureContext(t, "--pressure-stall", "5, 20", "--pressure-available", "15,8", "--pressure-watermarks", "90,60"))
	if err != nil || o.Watermarks != (kv.Watermarks{High: 90, Low: 60}) ||
		o.Monitor.Source.(*pressure.Linux).Thresholds != (pressure.Thresholds{WarnStall: 5, CriticalStall: 20, WarnAvailable: 15, CriticalAvailable: 8}) {
		t.Fatalf("set: %+v, %v", o, err)
	}
	if o, err = pressureOptions(pressureContext(t, "--pressure-file", "/tmp/level")); err != nil || o.Monitor.Source != pressure.File("/tmp/level") {
		t.Fatalf("testing hook: %+v, %v", o, err)
	}
	if o, err = pressureOptions(pressureContext(t, "--no-memory-pressure")); err != nil || !o.Off {
		t.Fatalf("off: %+v, %v", o, err)
	}
	for _, args := range [][]string{
		{"--pressure-stall", "40,10"}, {"--pressure-stall", "10"}, {"--pressure-available", "5,10"},
		{"--pressure-watermarks", "70,85"}, {"--pressure-watermarks", "85.5,70"}, {"--pressure-watermarks", "101,70"}, {"--pressure-available", "x,y"},
	} {
		if _, err := pressureOptions(pressureContext(t, args...)); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
