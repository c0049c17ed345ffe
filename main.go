// Command superfluid is a local LLM inference server and CLI with llama.cpp
// compiled in. The command line itself is package command.
package main

import (
	"os"

	"superfluid/command"
)

func main() {
	os.Exit(command.Main(os.Args, os.Stdout, os.Stderr))
}
