// Command twins writes the twins of a Comm's operations on a caller's
// stream (internal/twins) from a2a's ops.go into stream_ops.go. Run it
// through `go generate ./a2a` after changing an operation's methods.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/ulysses-go/ulysses/internal/twins"
)

func main() {
	in := flag.String("in", "ops.go", "the Comm's operations")
	out := flag.String("out", "stream_ops.go", "the file of their twins to write")
	flag.Parse()
	src, err := os.ReadFile(*in)
	if err == nil {
		src, err = twins.StreamOps(src)
	}
	if err == nil {
		err = os.WriteFile(*out, src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "twins:", err)
		os.Exit(1)
	}
}
