package check

import "github.com/ulysses-go/ulysses/a2a"

// FusedShape is the shape of n tensors of shape fused token by token, as
// q, k and v of one projection: [B, T, n*H, D].
func FusedShape(shape [4]int, n int) [4]int {
	return [4]int{shape[0], shape[1], n * shape[2], shape[3]}
}

// Fuse interleaves parts, each tokens of row bytes, token by token: token i
// of part k lands at (i*n + k)*row of the result.
func Fuse(parts [][]byte, row int) []byte {
	n := len(parts)
	if n == 0 || row == 0 {
		return nil
	}
	out := make([]byte, len(parts[0])*n)
	for k, p := range parts {
		for i := range len(p) / row {
			copy(out[(i*n+k)*row:(i*n+k+1)*row], p[i*row:(i+1)*row])
		}
	}
	return out
}

// Unfuse is Fuse's inverse for n parts.
func Unfuse(fused []byte, n, row int) [][]byte {
	out := make([][]byte, n)
	if row == 0 {
		return out
	}
	for i := range len(fused) / (n * row) {
		for k := range out {
			out[k] = append(out[k], fused[(i*n+k)*row:(i*n+k+1)*row]...)
		}
	}
	return out
}

// FusedViews are the n tensors of shape inside the fused tensor at base
// (FusedShape(shape, n)): tensor k starts k heads-rows in, and its tokens
// are n*H*D elements apart.
func FusedViews(base uintptr, shape [4]int, dt a2a.DType, n int) []a2a.Tensor {
	row := shape[2] * shape[3]
	views := make([]a2a.Tensor, n)
	for k := range views {
		views[k] = a2a.Tensor{Ptr: base + uintptr(k*row*dt.Size()), Shape: shape, DType: dt, RowStride: n * row}
	}
	return views
}
