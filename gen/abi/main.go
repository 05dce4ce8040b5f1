// Command abi writes the two sides of the kernels' interface from their
// one description (internal/kernelabi/spec): the C header the kernels
// include and the Go file the host uses. Run it through
// `go generate ./internal/kernelabi`; the PTX must then be regenerated
// too (`make ptx`), since the header is part of the kernels' source.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/ulysses-go/ulysses/internal/kernelabi/spec"
)

func main() {
	goOut := flag.String("go", "abi_gen.go", "the Go file to write")
	cOut := flag.String("c", "../../gen/kernels/abi.cuh", "the C header to write")
	flag.Parse()
	for path, body := range map[string][]byte{*goOut: spec.Go(), *cOut: spec.C()} {
		if err := os.WriteFile(path, body, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "abi:", err)
			os.Exit(1)
		}
	}
}
