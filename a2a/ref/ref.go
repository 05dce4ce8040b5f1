// Package ref is the CPU reference implementation of the three byte-moving
// collectives used for sequence-parallel ("Ulysses") attention across P
// ranks. Other implementations (GPU kernels, NCCL exchanges, ...) are judged
// against it, so it is written as plainly as possible.
//
// Every tensor is row-major and contiguous with shape [B, T, H, D], each
// element ElemSize bytes wide. The operations only move bytes, so any
// positive ElemSize works (2 for bf16/fp16, 1 for fp8, ...).
//
// Rank r holds T_r tokens, T = T_0 + ... + T_{P-1} and the prefix
// p_r = T_0 + ... + T_{r-1}. Heads are split in contiguous ranges: rank q
// holds H_q heads from head h_q, with H_q = H/P, plus one for the first
// H mod P ranks (see HeadRange); when P divides H, H_q = Hp = H/P and
// h_q = q*Hp.
//
//	op             input on rank r   output on rank q
//	SendRecvHeads  [B, T_r, H, D]    [B, T, H_q, D] out_q[b, p_r+t, h, :] = in_r[b, t, h_q+h, :]
//	GatherHeads    [B, T, H_q, D]    [B, T_r, H, D] out_r[b, t, h_q+h, :] = in_q[b, p_r+t, h, :]
//	AllGather      [B, T_r, H, D]    [B, T, H, D]   out_q[b, p_r+t, :, :] = in_r[b, t, :, :]
//	HeadAllGather  [B, T, H_r, D]    [B, T, H, D]   out_q[b, t, h_r+h, :] = in_r[b, t, h, :]
//
// GatherHeads is the exact inverse of SendRecvHeads, and every output of
// AllGather and HeadAllGather is the same on all ranks.
package ref

import (
	"errors"
	"fmt"
)

// Shape describes one exchange across len(Tokens) ranks.
type Shape struct {
	// Batch is the batch size B (>= 1).
	Batch int
	// Heads is the total number of heads H (>= 1; split across the ranks by
	// HeadRange, evenly when the world size divides it).
	Heads int
	// HeadDim is the number of elements per head D (>= 1).
	HeadDim int
	// ElemSize is the size of one element in bytes (>= 1).
	ElemSize int
	// Tokens holds the number of tokens on each rank; len(Tokens) is the
	// world size P (>= 1) and every entry is >= 0.
	Tokens []int
}

// ErrShape is wrapped by every error this package returns: invalid shapes,
// wrong numbers of slices, wrong slice lengths and out-of-range ranks.
var ErrShape = errors.New("ref: invalid shape")

// World returns the world size P, i.e. len(s.Tokens).
func (s Shape) World() int { return len(s.Tokens) }

// TotalTokens returns T, the sum of the tokens of all ranks.
func (s Shape) TotalTokens() int { return s.Prefix(len(s.Tokens)) }

// Prefix returns p_r = T_0 + ... + T_{r-1}, the position of rank r's first
// token in the gathered sequence. r must be in [0, P]; Prefix(P) equals
// TotalTokens. It panics if r is out of that range.
func (s Shape) Prefix(r int) int {
	p := 0
	for _, t := range s.Tokens[:r] {
		p += t
	}
	return p
}

// HeadRange returns the contiguous range of heads rank q holds after
// SendRecvHeads (and holds as GatherHeads' and HeadAllGather's input):
// count heads from first. Each rank gets H/P heads and the first H mod P
// ranks one more, so the counts differ by at most one and the ranges tile
// [0, H) in rank order. It panics if q is not in [0, P).
func (s Shape) HeadRange(q int) (first, count int) {
	P := s.World()
	if q < 0 || q >= P {
		panic("ref: HeadRange: rank out of range")
	}
	base, extra := s.Heads/P, s.Heads%P
	first = q*base + min(q, extra)
	count = base
	if q < extra {
		count++
	}
	return first, count
}

// HeadsPerRank returns the most heads a rank holds after SendRecvHeads:
// H/P when P divides H, else H/P + 1 (rank 0's; see HeadRange). It is only
// meaningful for a valid shape.
func (s Shape) HeadsPerRank() int { return (s.Heads + len(s.Tokens) - 1) / len(s.Tokens) }

// Validate reports whether s describes a valid exchange: Batch, Heads,
// HeadDim, ElemSize and the world size are all >= 1, every token count is
// >= 0, and the largest buffer size (GatheredBytes) fits in an int. The
// error wraps ErrShape.
func (s Shape) Validate() error {
	switch {
	case s.Batch < 1:
		return fmt.Errorf("ref: batch must be >= 1, got %d: %w", s.Batch, ErrShape)
	case s.Heads < 1:
		return fmt.Errorf("ref: heads must be >= 1, got %d: %w", s.Heads, ErrShape)
	case s.HeadDim < 1:
		return fmt.Errorf("ref: head dim must be >= 1, got %d: %w", s.HeadDim, ErrShape)
	case s.ElemSize < 1:
		return fmt.Errorf("ref: element size must be >= 1, got %d: %w", s.ElemSize, ErrShape)
	case len(s.Tokens) < 1:
		return fmt.Errorf("ref: world size must be >= 1 (len(Tokens) = 0): %w", ErrShape)
	}
	const maxInt = int(^uint(0) >> 1)
	total := 0
	for r, t := range s.Tokens {
		if t < 0 {
			return fmt.Errorf("ref: tokens[%d] = %d is negative: %w", r, t, ErrShape)
		}
		if t > maxInt-total {
			return fmt.Errorf("ref: total token count overflows int: %w", ErrShape)
		}
		total += t
	}
	// GatheredBytes is the largest buffer; make sure its product fits.
	n := 1
	for _, f := range []int{s.Batch, total, s.Heads, s.HeadDim, s.ElemSize} {
		if f != 0 && n > maxInt/f {
			return fmt.Errorf("ref: buffer size B*T*H*D*ElemSize overflows int: %w", ErrShape)
		}
		n *= f
	}
	return nil
}

// RankInputBytes returns B*T_r*H*D*ElemSize: the size of rank r's input to
// SendRecvHeads and AllGather, and of rank r's output of GatherHeads.
// It panics if r is not in [0, P).
func (s Shape) RankInputBytes(r int) int {
	return s.Batch * s.Tokens[r] * s.Heads * s.HeadDim * s.ElemSize
}

// HeadShardBytes returns B*T*HeadsPerRank()*D*ElemSize: the size of each
// rank's output of SendRecvHeads and input to GatherHeads when P divides
// H, and the largest one (rank 0's) otherwise; HeadShardBytesFor gives
// each rank's.
func (s Shape) HeadShardBytes() int {
	return s.Batch * s.TotalTokens() * s.HeadsPerRank() * s.HeadDim * s.ElemSize
}

// HeadShardBytesFor returns B*T*H_q*D*ElemSize: the size of rank q's output
// of SendRecvHeads and input to GatherHeads and HeadAllGather. It panics if
// q is not in [0, P).
func (s Shape) HeadShardBytesFor(q int) int {
	_, n := s.HeadRange(q)
	return s.Batch * s.TotalTokens() * n * s.HeadDim * s.ElemSize
}

// GatheredBytes returns B*T*H*D*ElemSize: the size of each rank's output of
// AllGather.
func (s Shape) GatheredBytes() int {
	return s.Batch * s.TotalTokens() * s.Heads * s.HeadDim * s.ElemSize
}

// offset returns the byte offset of element [b, t, h, 0] in a contiguous
// [B, tokens, heads, D] tensor of shape s.
func (s Shape) offset(b, t, h, tokens, heads int) int {
	return ((b*tokens+t)*heads + h) * s.HeadDim * s.ElemSize
}

// checkInputs validates s, the number of slices in in and the length of each
// one, which must be want(r).
func checkInputs(op string, s Shape, in [][]byte, want func(r int) int) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if len(in) != s.World() {
		return fmt.Errorf("ref: %s: got %d input slices, want %d (one per rank): %w", op, len(in), s.World(), ErrShape)
	}
	for r, buf := range in {
		if len(buf) != want(r) {
			return fmt.Errorf("ref: %s: rank %d input has %d bytes, want %d: %w", op, r, len(buf), want(r), ErrShape)
		}
	}
	return nil
}

// checkOutput validates the destination rank and then the output buffer
// length, which must be want(rank).
func checkOutput(op string, s Shape, rank int, out []byte, want func(r int) int) error {
	if rank < 0 || rank >= s.World() {
		return fmt.Errorf("ref: %s: rank %d out of range [0, %d): %w", op, rank, s.World(), ErrShape)
	}
	if len(out) != want(rank) {
		return fmt.Errorf("ref: %s: rank %d output has %d bytes, want %d: %w", op, rank, len(out), want(rank), ErrShape)
	}
	return nil
}

// gatheredBytes adapts GatheredBytes to the per-rank signature of checkOutput.
func (s Shape) gatheredBytes(int) int { return s.GatheredBytes() }

// SendRecvHeadsFor writes rank q's output of SendRecvHeads into out.
// in[r] is rank r's [B, T_r, H, D] input of RankInputBytes(r) bytes; out must
// hold exactly HeadShardBytesFor(q) bytes and becomes rank q's
// [B, T, H_q, D] output: out[b, p_r+t, h, :] = in[r][b, t, h_q+h, :]. Every
// byte of out is written. Errors wrap ErrShape.
func SendRecvHeadsFor(s Shape, q int, in [][]byte, out []byte) error {
	const op = "SendRecvHeads"
	if err := checkInputs(op, s, in, s.RankInputBytes); err != nil {
		return err
	}
	if err := checkOutput(op, s, q, out, s.HeadShardBytesFor); err != nil {
		return err
	}
	H, T := s.Heads, s.TotalTokens()
	hq, Hq := s.HeadRange(q)
	chunk := Hq * s.HeadDim * s.ElemSize
	for r := 0; r < s.World(); r++ {
		Tr, pr := s.Tokens[r], s.Prefix(r)
		for b := 0; b < s.Batch; b++ {
			for t := 0; t < Tr; t++ {
				src := s.offset(b, t, hq, Tr, H)
				dst := s.offset(b, pr+t, 0, T, Hq)
				copy(out[dst:dst+chunk], in[r][src:src+chunk])
			}
		}
	}
	return nil
}

// GatherHeadsFor writes rank r's output of GatherHeads into out.
// in[q] is rank q's [B, T, H_q, D] head shard of HeadShardBytesFor(q)
// bytes; out must hold exactly RankInputBytes(r) bytes and becomes rank
// r's [B, T_r, H, D] output: out[b, t, h_q+h, :] = in[q][b, p_r+t, h, :].
// Every byte of out is written. Errors wrap ErrShape.
func GatherHeadsFor(s Shape, r int, in [][]byte, out []byte) error {
	const op = "GatherHeads"
	if err := checkInputs(op, s, in, s.HeadShardBytesFor); err != nil {
		return err
	}
	if err := checkOutput(op, s, r, out, s.RankInputBytes); err != nil {
		return err
	}
	H, T := s.Heads, s.TotalTokens()
	Tr, pr := s.Tokens[r], s.Prefix(r)
	for q := 0; q < s.World(); q++ {
		hq, Hq := s.HeadRange(q)
		chunk := Hq * s.HeadDim * s.ElemSize
		for b := 0; b < s.Batch; b++ {
			for t := 0; t < Tr; t++ {
				src := s.offset(b, pr+t, 0, T, Hq)
				dst := s.offset(b, t, hq, Tr, H)
				copy(out[dst:dst+chunk], in[q][src:src+chunk])
			}
		}
	}
	return nil
}

// AllGatherFor writes rank q's output of AllGather into out (the output is
// the same for every q). in[r] is rank r's [B, T_r, H, D] input of
// RankInputBytes(r) bytes; out must hold exactly GatheredBytes() bytes and
// becomes the [B, T, H, D] tensor out[b, p_r+t, :, :] = in[r][b, t, :, :].
// Every byte of out is written. Errors wrap ErrShape.
func AllGatherFor(s Shape, q int, in [][]byte, out []byte) error {
	const op = "AllGather"
	if err := checkInputs(op, s, in, s.RankInputBytes); err != nil {
		return err
	}
	if err := checkOutput(op, s, q, out, s.gatheredBytes); err != nil {
		return err
	}
	H, T := s.Heads, s.TotalTokens()
	chunk := H * s.HeadDim * s.ElemSize
	for r := 0; r < s.World(); r++ {
		Tr, pr := s.Tokens[r], s.Prefix(r)
		for b := 0; b < s.Batch; b++ {
			for t := 0; t < Tr; t++ {
				src := s.offset(b, t, 0, Tr, H)
				dst := s.offset(b, pr+t, 0, T, H)
				copy(out[dst:dst+chunk], in[r][src:src+chunk])
			}
		}
	}
	return nil
}

// SendRecvHeads scatters heads and gathers tokens: in[r] is rank r's
// [B, T_r, H, D] input (RankInputBytes(r) bytes) and the result out[q] is
// rank q's [B, T, H_q, D] output (HeadShardBytesFor(q) bytes) with
// out[q][b, p_r+t, h, :] = in[r][b, t, h_q+h, :]. Errors wrap ErrShape.
func SendRecvHeads(s Shape, in [][]byte) ([][]byte, error) {
	return everyRank("SendRecvHeads", s, in, s.RankInputBytes, s.HeadShardBytesFor, SendRecvHeadsFor)
}

// GatherHeads is the inverse of SendRecvHeads: in[q] is rank q's
// [B, T, H_q, D] head shard (HeadShardBytesFor(q) bytes) and the result
// out[r] is rank r's [B, T_r, H, D] tensor (RankInputBytes(r) bytes) with
// out[r][b, t, h_q+h, :] = in[q][b, p_r+t, h, :]. Errors wrap ErrShape.
func GatherHeads(s Shape, in [][]byte) ([][]byte, error) {
	return everyRank("GatherHeads", s, in, s.HeadShardBytesFor, s.RankInputBytes, GatherHeadsFor)
}

// AllGather concatenates every rank's tokens: in[r] is rank r's
// [B, T_r, H, D] input (RankInputBytes(r) bytes) and every result out[q] is
// the same [B, T, H, D] tensor (GatheredBytes() bytes) with
// out[q][b, p_r+t, :, :] = in[r][b, t, :, :]. The returned slices do not
// share memory. Errors wrap ErrShape.
func AllGather(s Shape, in [][]byte) ([][]byte, error) {
	return everyRank("AllGather", s, in, s.RankInputBytes, s.gatheredBytes, AllGatherFor)
}

// everyRank checks in (inBytes(r) bytes on rank r) and returns every
// rank's output of op, each in a new slice of outBytes(q) bytes written by
// forRank.
func everyRank(op string, s Shape, in [][]byte, inBytes, outBytes func(int) int,
	forRank func(s Shape, q int, in [][]byte, out []byte) error) ([][]byte, error) {
	if err := checkInputs(op, s, in, inBytes); err != nil {
		return nil, err
	}
	out := make([][]byte, s.World())
	for q := range out {
		out[q] = make([]byte, outBytes(q))
		if err := forRank(s, q, in, out[q]); err != nil {
			return nil, err
		}
	}
	return out, nil
}
