package ref

// HeadAllGatherFor writes rank q's output of HeadAllGather into out (the
// output is the same for every q). in[r] is rank r's [B, T, H_r, D] head
// shard of HeadShardBytesFor(r) bytes; out must hold exactly
// GatheredBytes() bytes and becomes the [B, T, H, D] tensor
// out[b, t, h_r+h, :] = in[r][b, t, h, :]. Every byte of out is written.
// Errors wrap ErrShape.
func HeadAllGatherFor(s Shape, q int, in [][]byte, out []byte) error {
	const op = "HeadAllGather"
	if err := checkInputs(op, s, in, s.HeadShardBytesFor); err != nil {
		return err
	}
	if err := checkOutput(op, s, q, out, s.gatheredBytes); err != nil {
		return err
	}
	H, T := s.Heads, s.TotalTokens()
	for r := 0; r < s.World(); r++ {
		hr, Hr := s.HeadRange(r)
		chunk := Hr * s.HeadDim * s.ElemSize
		for b := 0; b < s.Batch; b++ {
			for t := 0; t < T; t++ {
				src := s.offset(b, t, 0, T, Hr)
				dst := s.offset(b, t, hr, T, H)
				copy(out[dst:dst+chunk], in[r][src:src+chunk])
			}
		}
	}
	return nil
}

// HeadAllGather gathers every rank's heads of every token: in[r] is rank
// r's [B, T, H_r, D] shard (HeadShardBytesFor(r) bytes) and every result
// out[q] is the same [B, T, H, D] tensor (GatheredBytes() bytes). It is
// AllGather along heads instead of tokens: HeadAllGather of SendRecvHeads'
// outputs equals AllGather of its inputs. Errors wrap ErrShape.
func HeadAllGather(s Shape, in [][]byte) ([][]byte, error) {
	return everyRank("HeadAllGather", s, in, s.HeadShardBytesFor, s.gatheredBytes, HeadAllGatherFor)
}
