package command

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// runApp runs the command line with a subcommand's flags allowed after its
// arguments (`superfluid batch IN.jsonl -o OUT.jsonl`): urfave/cli stops
// reading flags at the first argument, so the flags are moved before them.
func runApp(app *cli.App, args []string) error {
	return app.Run(flagsFirst(app, args))
}

// flagsFirst reorders the arguments that follow the subcommand so that its
// flags come before its positional arguments. A "--" ends the flags, as
// usual; "-" (standard input) is an argument.
func flagsFirst(app *cli.App, args []string) []string {
	i := 1
	for i < len(args) && strings.HasPrefix(args[i], "-") { // global flags
		if takesValue(app.Flags, args[i]) {
			i++
		}
		i++
	}
	if i >= len(args) {
		return args
	}
	cmd := app.Command(args[i])
	for cmd != nil && i+1 < len(args) && len(cmd.Subcommands) > 0 {
		sub := cmd.Command(args[i+1])
		if sub == nil {
			break
		}
		cmd, i = sub, i+1
	}
	if cmd == nil {
		return args
	}
	out := append([]string(nil), args[:i+1]...)
	var positional []string
	rest := args[i+1:]
	for j := 0; j < len(rest); j++ {
		a := rest[j]
		switch {
		case a == "--":
			positional = append(positional, rest[j:]...)
			j = len(rest)
		case a == "-" || !strings.HasPrefix(a, "-"):
			positional = append(positional, a)
		case takesValue(cmd.Flags, a) && j+1 == len(rest):
			// A value flag with no value: left last, where urfave/cli
			// takes it for an argument and the command says what is wrong.
			positional = append(positional, a)
		default:
			out = append(out, a)
			if takesValue(cmd.Flags, a) {
				j++
				out = append(out, rest[j])
			}
		}
	}
	return append(out, positional...)
}

// takesValue reports whether arg names a flag that reads the next argument
// as its value (not a boolean, not written --flag=value).
func takesValue(flags []cli.Flag, arg string) bool {
	name := strings.TrimLeft(arg, "-")
	if strings.Contains(name, "=") {
		return false
	}
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				_, isBool := f.(*cli.BoolFlag)
				return !isBool
			}
		}
	}
	return false
}
