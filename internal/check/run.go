package check

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ulysses-go/ulysses/a2a"
)

// Run checks SendRecvHeads, GatherHeads and AllGather (view and Into
// forms) of one case on comm, whose rank and world size must match the
// case, with inputs made from seed. Every rank of the group must call it
// with the same case and seed.
func Run(comm *a2a.Comm, cs Case, seed uint64) error {
	r, err := newRunner(comm, cs)
	if err != nil {
		return err
	}
	defer r.free()
	rank := comm.Rank()
	set, err := r.inputs(seed)
	if err != nil {
		return err
	}
	x, y := set.x, set.y
	// Two operations whose outputs are thrown away, so both halves of the
	// buffer are poisoned before the checked ones.
	for i := 0; i < 2; i++ {
		if _, err := r.view(comm.AllGather, x); err != nil {
			return fmt.Errorf("check: warm-up on rank %d: %w", rank, err)
		}
	}
	steps := []struct {
		what string
		run  func() ([]byte, error)
		want []byte
	}{
		{"SendRecvHeads", func() ([]byte, error) { return r.view(comm.SendRecvHeads, x) }, set.srh},
		{"SendRecvHeadsInto", func() ([]byte, error) { return r.into(comm.SendRecvHeadsInto, x, r.shardShape()) }, set.srh},
		{"GatherHeads", func() ([]byte, error) { return r.view(r.gatherHeads, y) }, set.own},
		{"GatherHeadsInto", func() ([]byte, error) { return r.into(r.gatherHeadsInto, y, r.localShape()) }, set.own},
		{"HeadAllGather", func() ([]byte, error) { return r.view(r.headAllGather, y) }, set.ag},
		{"HeadAllGatherInto", func() ([]byte, error) { return r.into(r.headAllGatherInto, y, r.fullShape()) }, set.ag},
		{"AllGather", func() ([]byte, error) { return r.view(comm.AllGather, x) }, set.ag},
		{"AllGatherInto", func() ([]byte, error) { return r.into(comm.AllGatherInto, x, r.fullShape()) }, set.ag},
		{"GatherHeads(SendRecvHeads view)", func() ([]byte, error) { return r.chain(x) }, set.own},
	}
	for _, st := range steps {
		got, err := st.run()
		if err != nil {
			return fmt.Errorf("check: %s on rank %d: %w", st.what, rank, err)
		}
		if got == nil && st.what == "GatherHeads(SendRecvHeads view)" {
			continue // single buffer: rejected as it must be
		}
		if err := compare(fmt.Sprintf("%s on rank %d", st.what, rank), got, st.want); err != nil {
			return err
		}
	}
	if cs.Tensors > 1 {
		return r.packed(seed)
	}
	return nil
}

// BackToBack runs iters operations (cycling through SendRecvHeads,
// GatherHeads, AllGather and HeadAllGather, on two alternating inputs) and
// checks every output. After each operation this
// rank sleeps a random time up to maxDelay before reading the view, so a
// faster peer has already enqueued the next operation: the view must stay
// intact until this rank's own next operation.
func BackToBack(comm *a2a.Comm, cs Case, iters int, maxDelay time.Duration, seed uint64) error {
	r, err := newRunner(comm, cs)
	if err != nil {
		return err
	}
	defer r.free()
	rank := comm.Rank()
	var sets [2]inputSet
	for i := range sets {
		if sets[i], err = r.inputs(seed + uint64(i)); err != nil {
			return err
		}
	}
	rng := rand.New(rand.NewPCG(seed, uint64(rank)+1))
	for i := 0; i < iters; i++ {
		st := sets[i%2]
		var out a2a.Tensor
		var want []byte
		switch i % 4 {
		case 0:
			out, err = comm.SendRecvHeads(st.x)
			want = st.srh
		case 1:
			out, err = r.gatherHeads(st.y)
			want = st.own
		case 2:
			out, err = comm.AllGather(st.x)
			want = st.ag
		case 3:
			out, err = r.headAllGather(st.y)
			want = st.ag
		}
		if err != nil {
			return fmt.Errorf("check: iteration %d: %w", i, err)
		}
		if err := comm.Sync(); err != nil {
			return fmt.Errorf("check: iteration %d: %w", i, err)
		}
		if maxDelay > 0 {
			time.Sleep(time.Duration(rng.Int64N(int64(maxDelay))))
		}
		got, err := r.readView(out)
		if err != nil {
			return fmt.Errorf("check: iteration %d: %w", i, err)
		}
		if err := compare(fmt.Sprintf("iteration %d (op %d) on rank %d", i, i%4, rank), got, want); err != nil {
			return err
		}
	}
	return nil
}

// chain runs GatherHeads on the view of SendRecvHeads, as attention code
// would with the zero-copy views, and returns the final view's bytes. With
// a single buffer a non-empty view is rejected as input (ErrAliased): chain
// then reports nil.
func (r *runner) chain(x a2a.Tensor) ([]byte, error) {
	mid, err := r.comm.SendRecvHeads(x)
	if err != nil {
		return nil, err
	}
	out, err := r.gatherHeads(mid)
	if r.comm.Config().SingleBuffer && mid.Bytes() > 0 {
		if !errors.Is(err, a2a.ErrAliased) {
			return nil, fmt.Errorf("check: GatherHeads of a view with a single buffer gave %v, want ErrAliased", err)
		}
		_, err := r.readView(mid)
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	return r.readView(out)
}
