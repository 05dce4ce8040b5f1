package check

import (
	"fmt"

	"github.com/ulysses-go/ulysses/a2a"
)

// gatherHeads is GatherHeads of the case's heads: the plain form when the
// world size divides them, else the packed form of one tensor, which
// takes the head count.
func (r *runner) gatherHeads(y a2a.Tensor) (a2a.Tensor, error) {
	if r.cs.even() {
		return r.comm.GatherHeads(y)
	}
	var views [1]a2a.Tensor
	err := r.comm.GatherHeadsPacked(r.cs.Heads, views[:], []a2a.Tensor{y})
	return views[0], err
}

// gatherHeadsInto is gatherHeads' Into form.
func (r *runner) gatherHeadsInto(dst, y a2a.Tensor) error {
	if r.cs.even() {
		return r.comm.GatherHeadsInto(dst, y)
	}
	return r.comm.GatherHeadsPackedInto(r.cs.Heads, []a2a.Tensor{dst}, []a2a.Tensor{y})
}

func (r *runner) headAllGather(y a2a.Tensor) (a2a.Tensor, error) {
	return r.comm.HeadAllGather(r.cs.Heads, y)
}

func (r *runner) headAllGatherInto(dst, y a2a.Tensor) error {
	return r.comm.HeadAllGatherInto(r.cs.Heads, dst, y)
}

// packedSets are the inputs of the packed operations: tensor k made from
// seed+1+k, uploaded one by one or, for a strided case, as views into one
// fused tensor per operation.
func (r *runner) packedSets(seed uint64) (xs, ys []a2a.Tensor, sets []inputSet, err error) {
	n := r.cs.Tensors
	sets = make([]inputSet, n)
	for k := range sets {
		d, err := MakeData(r.cs, seed+1+uint64(k), r.comm.Rank())
		if err != nil {
			return nil, nil, nil, err
		}
		sets[k] = inputSet{own: d.X, srh: d.Shard, ag: d.Gathered}
	}
	own := func(s inputSet) []byte { return s.own }
	srh := func(s inputSet) []byte { return s.srh }
	if xs, err = r.uploadPacked(r.localShape(), sets, own); err != nil {
		return nil, nil, nil, err
	}
	if ys, err = r.uploadPacked(r.shardShape(), sets, srh); err != nil {
		return nil, nil, nil, err
	}
	for _, s := range sets {
		if err := r.overTheWire(s.own, s.srh, s.ag); err != nil {
			return nil, nil, nil, err
		}
	}
	return xs, ys, sets, nil
}

// uploadPacked uploads part(sets[k]) as tensor k of shape: separately, or
// interleaved token by token into one fused tensor whose tensor k is a
// view (RowStride = n * H * D) when the case is strided.
func (r *runner) uploadPacked(shape [4]int, sets []inputSet, part func(inputSet) []byte) ([]a2a.Tensor, error) {
	n := len(sets)
	ts := make([]a2a.Tensor, n)
	if !r.cs.Strided {
		for k := range sets {
			t, err := r.upload(shape, part(sets[k]))
			if err != nil {
				return nil, err
			}
			ts[k] = t
		}
		return ts, nil
	}
	parts := make([][]byte, n)
	for k := range sets {
		parts[k] = part(sets[k])
	}
	base, err := r.upload(FusedShape(shape, n), Fuse(parts, shape[2]*shape[3]*r.cs.DType.Size()))
	if err != nil {
		return nil, err
	}
	return FusedViews(base.Ptr, shape, r.cs.DType, n), nil
}

// packed checks SendRecvHeadsPacked and GatherHeadsPacked (views and Into
// forms) of the case's Tensors tensors against separate reference calls.
func (r *runner) packed(seed uint64) error {
	xs, ys, sets, err := r.packedSets(seed)
	if err != nil {
		return err
	}
	n, rank := len(sets), r.comm.Rank()
	srhWant, ghWant := make([][]byte, n), make([][]byte, n)
	for k, s := range sets {
		srhWant[k], ghWant[k] = s.srh, s.own
	}
	steps := []struct {
		what  string
		run   func() ([][]byte, error)
		wants [][]byte
	}{
		{"SendRecvHeadsPacked", func() ([][]byte, error) {
			return r.packedViews(func(v []a2a.Tensor) error { return r.comm.SendRecvHeadsPacked(v, xs) }, n)
		}, srhWant},
		{"SendRecvHeadsPackedInto", func() ([][]byte, error) {
			return r.packedInto(func(d []a2a.Tensor) error { return r.comm.SendRecvHeadsPackedInto(d, xs) }, r.shardShape(), n)
		}, srhWant},
		{"GatherHeadsPacked", func() ([][]byte, error) {
			return r.packedViews(func(v []a2a.Tensor) error { return r.comm.GatherHeadsPacked(r.cs.Heads, v, ys) }, n)
		}, ghWant},
		{"GatherHeadsPackedInto", func() ([][]byte, error) {
			return r.packedInto(func(d []a2a.Tensor) error { return r.comm.GatherHeadsPackedInto(r.cs.Heads, d, ys) }, r.localShape(), n)
		}, ghWant},
	}
	for _, st := range steps {
		got, err := st.run()
		if err != nil {
			return fmt.Errorf("check: %s on rank %d: %w", st.what, rank, err)
		}
		for k := range got {
			if err := compare(fmt.Sprintf("%s tensor %d on rank %d", st.what, k, rank), got[k], st.wants[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// packedViews runs a packed operation and reads its n views.
func (r *runner) packedViews(op func(views []a2a.Tensor) error, n int) ([][]byte, error) {
	views := make([]a2a.Tensor, n)
	if err := op(views); err != nil {
		return nil, err
	}
	return r.readViews(views)
}

// packedInto runs a packed Into form into n poisoned tensors of shape:
// separate ones, or for a strided case views into one fused tensor, as a
// caller writing q, k and v back into one [B, T, n, H, D] would.
func (r *runner) packedInto(op func(dsts []a2a.Tensor) error, shape [4]int, n int) ([][]byte, error) {
	if r.cs.Strided {
		return r.fusedInto(op, shape, n)
	}
	dsts := make([]a2a.Tensor, n)
	for k := range dsts {
		t, err := r.output(shape)
		if err != nil {
			return nil, err
		}
		dsts[k] = t
	}
	if err := op(dsts); err != nil {
		return nil, err
	}
	return r.readViews(dsts)
}

// fusedInto is packedInto into views of one poisoned fused tensor; it
// returns each view's rows.
func (r *runner) fusedInto(op func(dsts []a2a.Tensor) error, shape [4]int, n int) ([][]byte, error) {
	fused, err := r.output(FusedShape(shape, n))
	if err != nil {
		return nil, err
	}
	if err := op(FusedViews(fused.Ptr, shape, r.cs.DType, n)); err != nil {
		return nil, err
	}
	all, err := r.readViews([]a2a.Tensor{fused})
	if err != nil {
		return nil, err
	}
	return Unfuse(all[0], n, shape[2]*shape[3]*r.cs.DType.Size()), nil
}
