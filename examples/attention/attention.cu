// The example's local attention: softmax(q k^T / sqrt(D)) v for every
// query token and head of a [B, T, H, D] bf16 q, k and v, in fp32.
//
// One thread computes one (batch, token, head): it walks the keys in order
// with a running maximum and sum (online softmax), so a head's result
// depends only on that head's q, k and v and never on how many heads or
// tokens share the launch. That is what lets a rank's heads of the whole
// sequence come out bit-identical to the same heads computed on one GPU.
// It is plain on purpose, not fast: a model would call its own kernel.
//
// No CUDA headers: bf16 is handled as its bits, so any nvcc builds it.
// Regenerate attention.ptx with `go generate ./examples/attention`.

#define HEAD_DIM 64

__device__ __forceinline__ float bf16_to_float(unsigned short b) {
	return __uint_as_float((unsigned)b << 16);
}

// Round to nearest even; a NaN stays a NaN.
__device__ __forceinline__ unsigned short float_to_bf16(float f) {
	unsigned u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (unsigned short)(u >> 16);
}

// q, k and v have in_stride elements between tokens, o out_stride; head h
// of a token starts h*HEAD_DIM elements into its row. gridDim.y is the
// batch.
extern "C" __global__ void attention(const unsigned short* q, const unsigned short* k,
                                     const unsigned short* v, unsigned short* o, int tokens,
                                     int heads, int in_stride, int out_stride, float scale) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= (long long)tokens * heads) return;
	int t = (int)(i / heads), h = (int)(i % heads);
	long long in_base = (long long)blockIdx.y * tokens * in_stride + h * HEAD_DIM;
	long long out_base = (long long)blockIdx.y * tokens * out_stride + h * HEAD_DIM;

	float qf[HEAD_DIM], acc[HEAD_DIM];
	const unsigned short* qt = q + in_base + (long long)t * in_stride;
#pragma unroll
	for (int d = 0; d < HEAD_DIM; d++) {
		qf[d] = bf16_to_float(qt[d]) * scale;
		acc[d] = 0.0f;
	}
	float m = __uint_as_float(0xff800000u), l = 0.0f;  // -inf, 0
	for (int j = 0; j < tokens; j++) {
		const unsigned short* kj = k + in_base + (long long)j * in_stride;
		const unsigned short* vj = v + in_base + (long long)j * in_stride;
		float s = 0.0f;
#pragma unroll
		for (int d = 0; d < HEAD_DIM; d++) s = fmaf(qf[d], bf16_to_float(kj[d]), s);
		float mn = fmaxf(m, s);
		float c = expf(m - mn), p = expf(s - mn);
		l = l * c + p;
#pragma unroll
		for (int d = 0; d < HEAD_DIM; d++) acc[d] = fmaf(p, bf16_to_float(vj[d]), acc[d] * c);
		m = mn;
	}
	unsigned short* ot = o + out_base + (long long)t * out_stride;
#pragma unroll
	for (int d = 0; d < HEAD_DIM; d++) ot[d] = float_to_bf16(acc[d] / l);
}
