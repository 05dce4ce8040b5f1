package ref_test

import (
	"fmt"

	"github.com/ulysses-go/ulysses/a2a/ref"
)

// Two ranks of 2 and 1 tokens, 3 heads of one 1-byte element: each byte
// names its rank, token and head (0x100*rank + 0x10*token + head, kept to
// a byte), and SendRecvHeads gives each rank its heads (rank 0 the first
// two, rank 1 the third) of all three tokens, rank 0's tokens first.
func ExampleSendRecvHeads() {
	s := ref.Shape{Batch: 1, Heads: 3, HeadDim: 1, ElemSize: 1, Tokens: []int{2, 1}}
	in := [][]byte{
		{0x00, 0x01, 0x02, 0x10, 0x11, 0x12}, // rank 0: token 0's heads, then token 1's
		{0xa0, 0xa1, 0xa2},                   // rank 1: its one token
	}
	out, err := ref.SendRecvHeads(s, in)
	if err != nil {
		fmt.Println(err)
		return
	}
	for r, o := range out {
		fmt.Printf("rank %d: % x\n", r, o)
	}
	back, _ := ref.GatherHeads(s, out)
	fmt.Printf("back: % x | % x\n", back[0], back[1])
	// Output:
	// rank 0: 00 01 10 11 a0 a1
	// rank 1: 02 12 a2
	// back: 00 01 02 10 11 12 | a0 a1 a2
}

// The heads each of 3 ranks holds of 8: the first 8 mod 3 ranks hold one
// more.
func ExampleShape_HeadRange() {
	s := ref.Shape{Batch: 1, Heads: 8, HeadDim: 64, ElemSize: 2, Tokens: []int{4, 4, 4}}
	for q := range s.World() {
		first, count := s.HeadRange(q)
		fmt.Printf("rank %d: heads %d..%d\n", q, first, first+count-1)
	}
	// Output:
	// rank 0: heads 0..2
	// rank 1: heads 3..5
	// rank 2: heads 6..7
}
