package a2a_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// operations lists the methods of t that take a tensor or tensors: the
// operations, with their signatures less the receiver.
func operations(t reflect.Type) map[string][]reflect.Type {
	tensor, tensors := reflect.TypeFor[a2a.Tensor](), reflect.TypeFor[[]a2a.Tensor]()
	ops := map[string][]reflect.Type{}
	for i := range t.NumMethod() {
		m := t.Method(i)
		var sig []reflect.Type
		for i := 1; i < m.Type.NumIn(); i++ {
			sig = append(sig, m.Type.In(i))
		}
		for i := range m.Type.NumOut() {
			sig = append(sig, m.Type.Out(i))
		}
		if slices.Contains(sig[:m.Type.NumIn()-1], tensor) || slices.Contains(sig[:m.Type.NumIn()-1], tensors) {
			ops[m.Name] = sig
		}
	}
	return ops
}

// StreamOps has every operation of Comm, with the same signature, and
// nothing else; Comm's have pointer receivers.
func TestStreamOpsMirrorComm(t *testing.T) {
	comm := operations(reflect.TypeFor[*a2a.Comm]())
	onStream := operations(reflect.TypeFor[a2a.StreamOps]())
	require.Len(t, comm, 12, "the twelve operations")
	assert.Equal(t, comm, onStream)
	assert.Empty(t, operations(reflect.TypeFor[a2a.Comm]()), "no operation on a Comm value")
	assert.Equal(t, reflect.TypeFor[a2a.StreamOps]().NumMethod(), len(onStream), "StreamOps has only the operations")
}

// An operation on a nil Comm, or on a StreamOps that On did not make,
// fails with ErrNotConnected instead of panicking.
func TestOperationsOnNil(t *testing.T) {
	var c *a2a.Comm
	_, err := c.SendRecvHeads(a2a.Tensor{})
	assert.ErrorIs(t, err, a2a.ErrNotConnected)
	assert.ErrorIs(t, c.SendRecvHeadsPacked(make([]a2a.Tensor, 1), make([]a2a.Tensor, 1)), a2a.ErrNotConnected)
	_, err = a2a.StreamOps{}.AllGather(a2a.Tensor{})
	assert.ErrorIs(t, err, a2a.ErrNotConnected)
}

// Every operation of the planner's table has its methods on Comm (and so
// on StreamOps): its view form and its Into form, by the row's name.
func TestEveryOperationHasMethods(t *testing.T) {
	comm := operations(reflect.TypeFor[*a2a.Comm]())
	for _, o := range plan.Operations {
		assert.Contains(t, comm, o.Name, "%s has no method", o.Op)
		assert.Contains(t, comm, o.Name+"Into", "%s has no Into form", o.Op)
	}
}
