package a2a_test

import (
	"fmt"

	"github.com/ulysses-go/ulysses/a2a"
)

// Heads the world size does not divide: 40 heads on 3 ranks.
func ExampleHeadRange() {
	for r := range 3 {
		first, count := a2a.HeadRange(40, 3, r)
		fmt.Printf("rank %d: %d heads from head %d\n", r, count, first)
	}
	// Output:
	// rank 0: 14 heads from head 0
	// rank 1: 13 heads from head 14
	// rank 2: 13 heads from head 27
}

// Element types by name, in any case.
func ExampleParseDType() {
	for _, name := range []string{"bf16", "FP8", "float16", "int8"} {
		d, err := a2a.ParseDType(name)
		fmt.Println(name, "->", d, d.Size(), err != nil)
	}
	// Output:
	// bf16 -> bf16 2 false
	// FP8 -> fp8e4m3 1 false
	// float16 -> fp16 2 false
	// int8 -> DType(0) 0 true
}
