package command

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"superfluid/app"
	"superfluid/kv"
	"superfluid/pressure"
)

// pressureFlags configure the watch on the machine's memory.
func pressureFlags() []cli.Flag {
	d := pressure.DefaultThresholds
	return []cli.Flag{
		&cli.BoolFlag{Name: "no-memory-pressure", Usage: "do not watch the machine's memory (Linux PSI and MemAvailable); by default the server sheds cached state at a warning and parks background work when it is critical", EnvVars: env("NO_MEMORY_PRESSURE")},
		&cli.StringFlag{Name: "pressure-stall", Value: fmt.Sprintf("%g,%g", d.WarnStall, d.CriticalStall), Usage: "WARNING,CRITICAL marks on PSI's memory \"some avg10\" (percent of the last 10 s some task stalled on memory)", EnvVars: env("PRESSURE_STALL")},
		&cli.StringFlag{Name: "pressure-available", Value: fmt.Sprintf("%g,%g", d.WarnAvailable, d.CriticalAvailable), Usage: "WARNING,CRITICAL marks on MemAvailable, percent of MemTotal (at or below)", EnvVars: env("PRESSURE_AVAILABLE")},
		&cli.StringFlag{Name: "pressure-watermarks", Value: fmt.Sprintf("%d,%d", kv.DefaultHighWatermark, kv.DefaultLowWatermark), Usage: "HIGH,LOW percent of the KV pool's and host cache's budgets: under pressure each is evicted to LOW (the pool only once above HIGH)", EnvVars: env("PRESSURE_WATERMARKS")},
		// The testing hook: the level read from a file ("none", "warning",
		// "critical") instead of the machine.
		&cli.StringFlag{Name: "pressure-file", Hidden: true, EnvVars: env("PRESSURE_FILE")},
	}
}

// pressureOptions reads the pressure flags.
func pressureOptions(c *cli.Context) (app.PressureOptions, error) {
	var o app.PressureOptions
	if c.Bool("no-memory-pressure") {
		o.Off = true
		return o, nil
	}
	var th pressure.Thresholds
	var err error
	if th.WarnStall, th.CriticalStall, err = floatPair("--pressure-stall", c.String("pressure-stall")); err != nil {
		return o, err
	}
	if th.WarnAvailable, th.CriticalAvailable, err = floatPair("--pressure-available", c.String("pressure-available")); err != nil {
		return o, err
	}
	if err := th.Validate(); err != nil {
		return o, err
	}
	high, low, err := floatPair("--pressure-watermarks", c.String("pressure-watermarks"))
	if err != nil {
		return o, err
	}
	if high != float64(int(high)) || low != float64(int(low)) || low <= 0 || low >= high || high > 100 {
		return o, fmt.Errorf("--pressure-watermarks %q: need whole percentages 0 < LOW < HIGH <= 100", c.String("pressure-watermarks"))
	}
	o.Watermarks = kv.Watermarks{High: int(high), Low: int(low)}
	o.Monitor.Source = pressure.NewLinux(th)
	if f := c.String("pressure-file"); f != "" {
		o.Monitor.Source = pressure.File(f)
	}
	return o, nil
}

// floatPair reads "A,B".
func floatPair(flag, s string) (float64, float64, error) {
	a, b, ok := strings.Cut(s, ",")
	x, err1 := strconv.ParseFloat(strings.TrimSpace(a), 64)
	y, err2 := strconv.ParseFloat(strings.TrimSpace(b), 64)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("%s %q: want two numbers, A,B", flag, s)
	}
	return x, y, nil
}
