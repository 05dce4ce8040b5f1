package twins

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const ops = `package a2a

import (
	"fmt"

	"github.com/ulysses-go/ulysses/internal/driver"
	p "github.com/ulysses-go/ulysses/ptx"
)

// Gather is documented at length.
func (c *Comm) Gather(x Tensor, cap int) (Tensor, error) {
	return c.one(ownStream, p.OpGather, cap, x, nil) // c's, on its stream
}

// GatherInto writes into dst.
func (c *Comm) GatherInto(dst, x Tensor) error {
	_, err := c.one(ownStream, p.OpGather, 0, x, []Tensor{dst})
	return err
}

func (c *Comm) one(s driver.Stream, op p.Op, n int, x Tensor, d []Tensor) (Tensor, error) {
	return Tensor{}, fmt.Errorf("%s", op)
}

// Close is not an operation of StreamOps' kind, but exported on *Comm too.
func (c Comm) Value() int { return 0 }
`

// Every exported method of *Comm gets its twin on StreamOps, in order,
// with the receiver read as o.c and the Comm's stream as o's (names that
// only contain them are left alone), and the imports the twins use.
func TestStreamOps(t *testing.T) {
	got, err := StreamOps([]byte(ops))
	require.NoError(t, err)
	assert.Equal(t, Header+`package a2a

import (
	p "github.com/ulysses-go/ulysses/ptx"
)

// Gather is Comm.Gather, enqueued on o's stream.
func (o StreamOps) Gather(x Tensor, cap int) (Tensor, error) {
	return o.c.one(o.s, p.OpGather, cap, x, nil) // c's, on its stream
}

// GatherInto is Comm.GatherInto, enqueued on o's stream.
func (o StreamOps) GatherInto(dst, x Tensor) error {
	_, err := o.c.one(o.s, p.OpGather, 0, x, []Tensor{dst})
	return err
}
`, string(got))
}

// A receiver of another name is refused rather than half rewritten, as
// is source that does not parse.
func TestStreamOpsRefuses(t *testing.T) {
	_, err := StreamOps([]byte("package a2a\n\nfunc (comm *Comm) Gather() error { return comm.x() }\n"))
	assert.ErrorContains(t, err, "not named c")
	_, err = StreamOps([]byte("package a2a\n\nfunc (c *Comm"))
	assert.Error(t, err)
}
