// Command fakecuda builds the stub CUDA driver of internal/fakecuda into a
// directory and prints the library's path, for running whole test suites
// in a world of its own: ULYSSES_LIBCUDA=$(go run ./internal/fakecuda/cmd/fakecuda
// -no-device DIR) go test ./... runs every test on a machine with a driver
// and no GPU, whatever the machine has installed. It needs a C compiler.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/ulysses-go/ulysses/internal/fakecuda"
)

func main() {
	noDevice := flag.Bool("no-device", false, "a driver without a device: cuInit says CUDA_ERROR_NO_DEVICE")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: fakecuda [-no-device] DIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	build := fakecuda.Build
	if *noDevice {
		build = fakecuda.BuildNoDevice
	}
	path, err := build(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakecuda:", err)
		os.Exit(1)
	}
	fmt.Println(path)
}
