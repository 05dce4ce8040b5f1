// Command twins writes the twins of a Comm's operations on a caller's
// stream (internal/twins) from a2a's ops.go into stream_ops.go, in the
// directory it runs in. Run it through `go generate ./a2a` after
// changing an operation's methods.
package main

import (
	"log"
	"os"

	"github.com/ulysses-go/ulysses/internal/twins"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("twins: ")
	src, err := os.ReadFile("ops.go")
	if err != nil {
		log.Fatal(err)
	}
	if src, err = twins.StreamOps(src); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("stream_ops.go", src, 0o644); err != nil {
		log.Fatal(err)
	}
}
