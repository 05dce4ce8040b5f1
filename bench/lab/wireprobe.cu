// Wire probe: what do the fp8 wire's kernels need to run at the memory
// rate? On one GPU, with no library in the way, it times kernels that turn
// bf16 rows into the wire's row format (per row of D elements one scale
// byte k+128 and D E4M3 codes, e4m3 codes in a region of their own and the
// scale bytes in another, as the staging area holds them) and back, written
// in several shapes, beside a copy of the same bytes that sets the floor:
//
//   quantize  bf16 rows -> codes + scale bytes (what a sender does)
//   direct    bf16 rows -> the bf16 values their codes decode to (a rank
//             alone: the library's direct path)
//   decode    codes + scale bytes -> bf16 rows (what a receiver does)
//   copy      bf16 -> bf16 (kernels, and cudaMemcpyAsync D2D: the floor)
//
// varying the elements a lane loads at once (16-byte loads, or 32 bytes
// as two adjacent 16-byte loads), the loads a lane holds per row (chunks),
// the rows a lane holds in flight (unroll), threads per block (256/512),
// streaming stores (st.global.cs) and the grid (1x, 2x, 4x the SMs with a
// grid-stride loop, one-shot: one pass per block, and 32 blocks).
//
// The rounding is the library's (internal/fp8, a2a/ref.RoundTripRows):
// k the smallest integer with amax <= 448 * 2^k over the row's finite
// elements (0 for amax 0), clamped to [-120, 120]; code =
// cvt.rn.satfinite.e4m3(x * 2^-k), NaN as 0x7F; decode =
// bf16(rn, saturated to 0x7F7F, NaN 0x7FC0)(e4m3 value * 2^k). Every
// variant's output is compared byte for byte, all rows, with a CPU
// reference of that rounding; a mismatch prints FAIL and the first row.
//
// Each line: bytes read + written, the median of 50 timed launches (after
// 5 warm-ups, cudaEvents), GB/s, and the time over the floor: those bytes
// at the read+write rate of cudaMemcpyAsync of the same size in the same run.
//
// Last, a "decode as rows land" probe: a producer kernel writes chunks of
// codes (a copy from a source area, standing in for the peer's stores) and
// bumps a counter per chunk; a decode kernel on another stream, both
// grids resident at once, waits per chunk (bounded spin, a timeout flag)
// and decodes it. It prints producer alone, decode alone, both overlapped,
// and how much of the decode's time the overlap hid.
//
//   nvcc -O3 -arch=sm_90 -o wireprobe bench/lab/wireprobe.cu && ./wireprobe
//   ./wireprobe --selftest   (the CPU reference's own checks; needs no GPU)
//   ./wireprobe --dump DIR   (test rows and their reference as files, for a
//                             check against internal/fp8; needs no GPU)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ck.h"

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;

#define E4M3_MAX_BITS 0x43E00000u  // 448.0f
#define BF16_INF 0x7F80u
#define BF16_MAX_BITS 0x7F7F0000u  // the largest finite bf16 as a float32
#define MIN_K (-120)
#define MAX_K 120

// ---- the CPU reference ------------------------------------------------------

static inline u32 f2u(float f) {
    u32 u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float u2f(u32 u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline float pow2_host(int n) { return u2f((u32)(n + 127) << 23); }  // -126 <= n <= 127

// v / 2^s rounded to nearest, ties to even (1 <= s <= 31).
static inline u32 round_shift(u32 v, u32 s) {
    const u32 q = v >> s, rem = v & ((1u << s) - 1u), half = 1u << (s - 1u);
    return q + (rem > half || (rem == half && (q & 1u)));
}

// float32 -> E4M3 as cvt.rn.satfinite.e4m3x2.f32, NaN as 0x7F.
static u8 e4m3_of(float x) {
    const u32 b = f2u(x), sign = (b >> 24) & 0x80u, a = b & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0x7F;
    if (a > E4M3_MAX_BITS) return (u8)(sign | 0x7Eu);
    const int e = (int)std::max(a >> 23, 1u) - 127 + 7;  // biased exponent in E4M3
    if (e >= 1) return (u8)(sign | round_shift(a - (120u << 23), 20));
    const u32 s = (u32)(21 - e);  // a subnormal code: significand / 2^s
    if (s > 24) return (u8)sign;
    const u32 sig = (a & 0x7FFFFFu) | (a >= 0x800000u ? 0x800000u : 0u);
    return (u8)(sign | round_shift(sig, s));
}

// E4M3 -> float32, exactly; 0x7F/0xFF give NaN.
static float of_e4m3(u8 c) {
    const u32 sign = (u32)(c & 0x80u) << 24, e = (c >> 3) & 15u, m = c & 7u;
    if (e == 15u && m == 7u) return u2f(0x7FC00000u);
    if (e == 0u) return u2f(sign | f2u((float)m * pow2_host(-9)));
    return u2f(sign | (e + 120u) << 23 | m << 20);
}

// float32 -> bf16, round to nearest even, beyond the largest finite to it,
// NaN to 0x7FC0.
static u16 bf16_of(float v) {
    const u32 b = f2u(v), a = b & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0x7FC0;
    if (a > BF16_MAX_BITS) return (u16)((b >> 16 & 0x8000u) | 0x7F7Fu);
    return (u16)(round_shift(b, 16) & 0xFFFFu);  // a carry into the sign cannot happen below the max
}

static int scale_exp_host(const u16 *row, int D) {
    u32 amax = 0;
    for (int i = 0; i < D; i++) {
        const u32 a = row[i] & 0x7FFFu;
        if (a < BF16_INF && a > amax) amax = a;
    }
    if (amax == 0) return 0;
    const u32 a = amax << 16;
    int k = (int)(a >> 23) - (int)(E4M3_MAX_BITS >> 23);
    if ((a & 0x7FFFFFu) > (E4M3_MAX_BITS & 0x7FFFFFu)) k++;
    return std::min(std::max(k, MIN_K), MAX_K);
}

// The reference of the rows: codes, scale bytes, and the decoded bf16.
static void reference(const std::vector<u16> &in, int D, std::vector<u8> &codes, std::vector<u8> &scales,
                      std::vector<u16> &out) {
    const size_t rows = in.size() / D;
    codes.resize(in.size());
    scales.resize(rows);
    out.resize(in.size());
    for (size_t r = 0; r < rows; r++) {
        const u16 *x = &in[r * D];
        const int k = scale_exp_host(x, D);
        const float inv = pow2_host(-k), p = pow2_host(k);
        scales[r] = (u8)(k + 128);
        for (int i = 0; i < D; i++) {
            const u8 c = e4m3_of(u2f((u32)x[i] << 16) * inv);
            codes[r * D + i] = c;
            out[r * D + i] = bf16_of(of_e4m3(c) * p);
        }
    }
}

// Test data: rows of random finite bf16 at random magnitudes, with a few
// rows that take the rules' edges: all zeros, tiny (k at its lower clamp),
// huge (near the bf16 maximum: decodes beyond it saturate), and rows with
// one Inf or one NaN element.
static std::vector<u16> make_rows(size_t rows, int D, u64 seed) {
    std::vector<u16> v(rows * D);
    u64 s = seed;
    auto next = [&s]() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return s;
    };
    for (size_t r = 0; r < rows; r++) {
        const u64 kind = next() % 4096;
        int e = (int)(next() % 41) - 20;
        if (kind < 4) e = -128;  // tiny
        if (kind >= 4 && kind < 8) e = 126;  // huge
        const float mul = std::ldexp(1.0f, e);
        for (int i = 0; i < D; i++) {
            const u64 z = next();
            const float g = ((float)(z & 0xFFFF) + (float)(z >> 16 & 0xFFFF) + (float)(z >> 32 & 0xFFFF) -
                             1.5f * 65536.0f) / 32768.0f;  // about N(0, 1)
            u16 b = (u16)(round_shift(f2u(g * mul), 16) & 0xFFFF);
            if ((b & 0x7FFFu) >= BF16_INF) b = (u16)((b & 0x8000u) | 0x7F7Fu);  // finite
            v[r * D + i] = b;
        }
        if (kind >= 4 && kind < 8) v[r * D + next() % D] = (next() & 1) ? 0x7F7F : 0xFF7F;  // k = 120
        if (kind >= 8 && kind < 10) memset(&v[r * D], 0, D * 2);
        if (kind >= 10 && kind < 12) v[r * D + next() % D] = (next() & 1) ? 0x7F80 : 0xFF80;
        if (kind >= 12 && kind < 14) v[r * D + next() % D] = (next() & 1) ? 0x7FC1 : 0xFFFF;
    }
    return v;
}

static int selftest() {
    int bad = 0;
    auto want = [&bad](const char *what, u32 got, u32 exp) {
        if (got != exp) {
            printf("selftest FAIL %s: got 0x%X want 0x%X\n", what, got, exp);
            bad++;
        }
    };
    want("448", e4m3_of(448.0f), 0x7E);
    want("464 (saturates)", e4m3_of(464.0f), 0x7E);
    want("480 (saturates)", e4m3_of(480.0f), 0x7E);
    want("-Inf", e4m3_of(-INFINITY), 0xFE);
    want("NaN", e4m3_of(NAN), 0x7F);
    want("-NaN", e4m3_of(u2f(0xFFC00000u)), 0x7F);
    want("1", e4m3_of(1.0f), 0x38);
    want("1.0625 (tie to even)", e4m3_of(1.0625f), 0x38);
    want("1.1875 (tie to even, up)", e4m3_of(1.1875f), 0x3A);
    want("2^-9", e4m3_of(std::ldexp(1.0f, -9)), 0x01);
    want("2^-10 (tie to zero)", e4m3_of(std::ldexp(1.0f, -10)), 0x00);
    want("1.5*2^-10", e4m3_of(1.5f * std::ldexp(1.0f, -10)), 0x01);
    want("-0", e4m3_of(-0.0f), 0x80);
    want("7*2^-9 + 2^-10 (to 2^-6)", e4m3_of(7.5f * std::ldexp(1.0f, -9)), 0x08);
    for (int c = 0; c < 256; c++) {
        if ((c & 0x7F) == 0x7F) continue;
        want("code round trip", e4m3_of(of_e4m3((u8)c)), (u32)c);
    }
    want("bf16 max saturate", bf16_of(u2f(0x7F7FFFFFu)), 0x7F7F);
    want("bf16 Inf saturate", bf16_of(-INFINITY), 0xFF7F);
    want("bf16 NaN", bf16_of(NAN), 0x7FC0);
    want("bf16 tie", bf16_of(u2f(0x3F808000u)), 0x3F80);
    want("bf16 tie up", bf16_of(u2f(0x3F818000u)), 0x3F82);
    const u16 row1[4] = {0x43E0, 0, 0x7F80, 0x7FC0};  // 448, Inf, NaN: k 0
    want("k of 448", (u32)(scale_exp_host(row1, 4) + 128), 128);
    const u16 row2[2] = {0x43E1, 0};  // just above 448: k 1
    want("k above 448", (u32)(scale_exp_host(row2, 2) + 128), 129);
    const u16 row3[2] = {0x0001, 0};  // bf16's smallest subnormal: clamped
    want("k clamp", (u32)(scale_exp_host(row3, 2) + 128), 8);
    printf("selftest: %s (%d mismatches)\n", bad ? "FAIL" : "ok", bad);
    return bad ? 1 : 0;
}

// ---- device helpers ---------------------------------------------------------

__device__ __forceinline__ float dpow2(int n) { return __uint_as_float((u32)(n + 127) << 23); }

// Two float32 to two E4M3 codes (lo in the low byte).
__device__ __forceinline__ u32 cvt2(float lo, float hi) {
    unsigned short r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    return r;
}

// Four codes with every NaN code (0x7F or 0xFF) made 0x7F.
__device__ __forceinline__ u32 canon_nan(u32 c) {
    const u32 top = ((c & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u;  // set where the byte's low 7 bits are all ones
    const u32 all = top | (top - (top >> 7));                          // 0xFF in those bytes
    return (c & ~all) | (all & 0x7F7F7F7Fu);
}

// Two words of two bf16 each, times inv, to four codes.
__device__ __forceinline__ u32 enc4(u32 a, u32 b, float inv) {
    const u32 lo = cvt2(__uint_as_float(a << 16) * inv, __uint_as_float(a & 0xFFFF0000u) * inv);
    const u32 hi = cvt2(__uint_as_float(b << 16) * inv, __uint_as_float(b & 0xFFFF0000u) * inv);
    return canon_nan(lo | hi << 16);
}

// The largest finite magnitude of eight bf16 and amax: a packed max of
// the magnitudes (a NaN half loses), element by element only when that
// is Inf or NaN.
__device__ __forceinline__ u32 amax8(const uint4 &v, u32 amax) {
    const u32 mag = 0x7FFF7FFFu;
    u32 m1, m2, m;
    asm("max.bf16x2 %0, %1, %2;" : "=r"(m1) : "r"(v.x & mag), "r"(v.y & mag));
    asm("max.bf16x2 %0, %1, %2;" : "=r"(m2) : "r"(v.z & mag), "r"(v.w & mag));
    asm("max.bf16x2 %0, %1, %2;" : "=r"(m) : "r"(m1), "r"(m2));
    const u32 top = max(m & 0xFFFFu, m >> 16);
    if (top < BF16_INF) return max(amax, top);
    const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const u32 a = (w[i / 2] >> (16 * (i & 1))) & 0x7FFFu;
        amax = a < BF16_INF ? max(amax, a) : amax;
    }
    return amax;
}

__device__ __forceinline__ int kexp(u32 amax) {
    if (amax == 0u) return 0;
    const u32 a = amax << 16;
    int k = (int)(a >> 23) - (int)(E4M3_MAX_BITS >> 23);
    if ((a & 0x7FFFFFu) > (E4M3_MAX_BITS & 0x7FFFFFu)) k++;
    return min(max(k, MIN_K), MAX_K);
}

__device__ __forceinline__ u32 bf16_dev(float v) {
    const u32 b = __float_as_uint(v), a = b & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0x7FC0u;
    if (a > BF16_MAX_BITS) return (b >> 16 & 0x8000u) | 0x7F7Fu;
    unsigned short r;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(v));
    return r;
}

// Four codes times p to four bf16 (two words): one packed conversion per
// two elements when no code is NaN and no value can pass the bf16 maximum.
__device__ __forceinline__ uint2 dec4(u32 c, float p) {
    u32 h0, h1;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h0) : "h"((unsigned short)(c & 0xFFFFu)));
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h1) : "h"((unsigned short)(c >> 16)));
    float v[4];
    asm("cvt.f32.f16 %0, %1;" : "=f"(v[0]) : "h"((unsigned short)(h0 & 0xFFFFu)));
    asm("cvt.f32.f16 %0, %1;" : "=f"(v[1]) : "h"((unsigned short)(h0 >> 16)));
    asm("cvt.f32.f16 %0, %1;" : "=f"(v[2]) : "h"((unsigned short)(h1 & 0xFFFFu)));
    asm("cvt.f32.f16 %0, %1;" : "=f"(v[3]) : "h"((unsigned short)(h1 >> 16)));
    const bool nan = (((c & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u) != 0u;
    uint2 o;
    if (!nan && p * __uint_as_float(E4M3_MAX_BITS) <= __uint_as_float(BF16_MAX_BITS)) {
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(o.x) : "f"(v[1] * p), "f"(v[0] * p));
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(o.y) : "f"(v[3] * p), "f"(v[2] * p));
    } else {
        o.x = bf16_dev(v[0] * p) | bf16_dev(v[1] * p) << 16;
        o.y = bf16_dev(v[2] * p) | bf16_dev(v[3] * p) << 16;
    }
    return o;
}

template <bool CS, typename T>
__device__ __forceinline__ void put(T *p, T v) {
    if (CS) {
        __stcs(p, v);
    } else {
        *p = v;
    }
}

// ---- quantize (and the direct path) -----------------------------------------
// A group of G = D / (EPL * CH) lanes covers a row: lane gl of the group
// loads chunks c = 0..CH-1 of EPL elements at element (gl + c*G) * EPL
// (EPL 8: one 16-byte load, EPL 16: two adjacent ones), so neighbouring
// lanes read neighbouring bytes. A warp covers RPW = 32 / G rows (a tile)
// and holds U tiles at once: all their loads are issued before any amax.
// Warp w of W takes tiles w, w + W, ... (U of them a round). DIRECT
// stores the decoded bf16 values instead of codes and scale bytes.

template <int D, int EPL, int CH>
struct Shape {
    static constexpr int G = D / (EPL * CH);
    static constexpr int RPW = 32 / G;
    static_assert(D % (EPL * CH) == 0 && G >= 1 && G <= 32 && (G & (G - 1)) == 0, "shape");
};

// This lane's place in the tiling of rows rows by blocks of TH threads:
// its warp's first tile, the warps of the grid (W), the tiles (n), and
// where its chunk c of a row starts.
template <int D, int EPL, int CH, int TH>
struct Tiling {
    static constexpr int G = Shape<D, EPL, CH>::G, RPW = Shape<D, EPL, CH>::RPW;
    u32 gl, sub, first, W, n;
    __device__ explicit Tiling(u32 rows)
        : gl((threadIdx.x & 31u) % G),
          sub((threadIdx.x & 31u) / G),
          first(blockIdx.x * (TH / 32) + threadIdx.x / 32),
          W(gridDim.x * (TH / 32)),
          n((rows + RPW - 1) / RPW) {}
    __device__ u64 at(u32 row, int c) const { return (u64)row * D + (gl + c * G) * EPL; }
};

template <int D, int EPL, int CH, int U, int TH, bool CS, bool DIRECT>
__global__ void __launch_bounds__(TH)
    quantize(const u16 *__restrict__ in, u8 *__restrict__ codes, u8 *__restrict__ scales, u16 *__restrict__ out, u32 rows) {
    constexpr int G = Shape<D, EPL, CH>::G, RPW = Shape<D, EPL, CH>::RPW, V = EPL / 8;
    const Tiling<D, EPL, CH, TH> tl(rows);
    for (u32 t0 = tl.first; t0 < tl.n; t0 += U * tl.W) {
        uint4 x[U][CH][V];
        u32 row[U], amax[U];
        bool ok[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            row[u] = (t0 + u * tl.W) * RPW + tl.sub;
            ok[u] = t0 + u * tl.W < tl.n && row[u] < rows;
#pragma unroll
            for (int c = 0; c < CH; c++) {
#pragma unroll
                for (int v = 0; v < V; v++) {
                    const u16 *p = in + tl.at(row[u], c) + v * 8;
                    x[u][c][v] = ok[u] ? __ldg(reinterpret_cast<const uint4 *>(p)) : make_uint4(0, 0, 0, 0);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            amax[u] = 0u;
#pragma unroll
            for (int c = 0; c < CH; c++) {
#pragma unroll
                for (int v = 0; v < V; v++) amax[u] = amax8(x[u][c][v], amax[u]);
            }
#pragma unroll
            for (int o = G / 2; o > 0; o /= 2) amax[u] = max(amax[u], __shfl_xor_sync(0xFFFFFFFFu, amax[u], o));
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (!ok[u]) continue;
            const int k = kexp(amax[u]);
            const float inv = dpow2(-k), p = dpow2(k);
#pragma unroll
            for (int c = 0; c < CH; c++) {
                const u64 e = tl.at(row[u], c);
                u32 q[2 * V];
#pragma unroll
                for (int v = 0; v < V; v++) {
                    q[2 * v] = enc4(x[u][c][v].x, x[u][c][v].y, inv);
                    q[2 * v + 1] = enc4(x[u][c][v].z, x[u][c][v].w, inv);
                }
                if (DIRECT) {
#pragma unroll
                    for (int v = 0; v < V; v++) {
                        const uint2 lo = dec4(q[2 * v], p), hi = dec4(q[2 * v + 1], p);
                        put<CS>(reinterpret_cast<uint4 *>(out + e + v * 8), make_uint4(lo.x, lo.y, hi.x, hi.y));
                    }
                } else if (V == 1) {
                    put<CS>(reinterpret_cast<uint2 *>(codes + e), make_uint2(q[0], q[1 % (2 * V)]));
                } else {
                    put<CS>(reinterpret_cast<uint4 *>(codes + e), make_uint4(q[0], q[1 % (2 * V)], q[2 % (2 * V)], q[3 % (2 * V)]));
                }
            }
            if (!DIRECT && tl.gl == 0u) scales[row[u]] = (u8)(k + 128);
        }
    }
}

// ---- decode -----------------------------------------------------------------
// The same tiling over codes: lane gl of a row's group loads chunks of
// CPL codes (8: an 8-byte load and a 16-byte store, 16: a 16-byte load and
// two 16-byte stores). DEP is the library's order: the scale bytes of the
// U tiles first, then the codes of the rows whose byte is not 0 (a row
// with byte 0 is in the output already), so the code loads wait on the
// scale loads; !DEP issues both at once and tests the byte afterwards.

// 8 V codes at p into c (zeros where !ok).
template <int V>
__device__ __forceinline__ void load_codes(const u8 *p, bool ok, uint2 (&c)[V]) {
    if (V == 1) {
        c[0] = ok ? __ldg(reinterpret_cast<const uint2 *>(p)) : make_uint2(0, 0);
    } else {
        const uint4 w = ok ? __ldg(reinterpret_cast<const uint4 *>(p)) : make_uint4(0, 0, 0, 0);
        c[0] = make_uint2(w.x, w.y);
        c[V - 1] = make_uint2(w.z, w.w);
    }
}

// Decodes the U rows' codes c8 and stores them, skipping rows whose scale
// byte is 0.
template <int D, int CPL, int CH, int TH, int U, bool CS>
__device__ __forceinline__ void store_decoded(const Tiling<D, CPL, CH, TH> &tl, u16 *out, const uint2 (&c8)[U][CH][CPL / 8],
                                              const u32 (&sb)[U], const u32 (&row)[U]) {
#pragma unroll
    for (int u = 0; u < U; u++) {
        if (sb[u] == 0u) continue;
        const float p = dpow2((int)sb[u] - 128);
#pragma unroll
        for (int c = 0; c < CH; c++) {
            const u64 e = tl.at(row[u], c);
#pragma unroll
            for (int v = 0; v < CPL / 8; v++) {
                const uint2 lo = dec4(c8[u][c][v].x, p), hi = dec4(c8[u][c][v].y, p);
                put<CS>(reinterpret_cast<uint4 *>(out + e + v * 8), make_uint4(lo.x, lo.y, hi.x, hi.y));
            }
        }
    }
}

template <int D, int CPL, int CH, int U, int TH, bool CS, bool DEP>
__global__ void __launch_bounds__(TH)
    decode(const u8 *__restrict__ codes, const u8 *__restrict__ scales, u16 *__restrict__ out, u32 rows) {
    constexpr int RPW = Shape<D, CPL, CH>::RPW, V = CPL / 8;
    const Tiling<D, CPL, CH, TH> tl(rows);
    for (u32 t0 = tl.first; t0 < tl.n; t0 += U * tl.W) {
        uint2 c8[U][CH][V];
        u32 row[U], sb[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            row[u] = (t0 + u * tl.W) * RPW + tl.sub;
            const bool ok = t0 + u * tl.W < tl.n && row[u] < rows;
            sb[u] = ok ? __ldg(scales + row[u]) : 0u;
            if (!DEP) {
#pragma unroll
                for (int c = 0; c < CH; c++) load_codes<V>(codes + tl.at(row[u], c), ok, c8[u][c]);
            }
        }
        if (DEP) {
#pragma unroll
            for (int u = 0; u < U; u++) {
#pragma unroll
                for (int c = 0; c < CH; c++) load_codes<V>(codes + tl.at(row[u], c), sb[u] != 0u, c8[u][c]);
            }
        }
        store_decoded<D, CPL, CH, TH, U, CS>(tl, out, c8, sb, row);
    }
}

// ---- copy: the floor --------------------------------------------------------
// n vectors of 16 bytes; a thread takes V adjacent vectors (V = 2: 32
// bytes) U times a round, all loads before the stores.
template <int V, int U, int TH, bool CS>
__global__ void __launch_bounds__(TH) copy(const uint4 *__restrict__ src, uint4 *__restrict__ dst, u64 n) {
    const u64 step = (u64)gridDim.x * TH * V;
    for (u64 i = ((u64)blockIdx.x * TH + threadIdx.x) * V; i < n; i += U * step) {
        uint4 x[U][V];
#pragma unroll
        for (int u = 0; u < U; u++) {
#pragma unroll
            for (int v = 0; v < V; v++) {
                const u64 j = i + u * step + v;
                x[u][v] = j < n ? __ldg(src + j) : make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
#pragma unroll
            for (int v = 0; v < V; v++) {
                const u64 j = i + u * step + v;
                if (j < n) put<CS>(dst + j, x[u][v]);
            }
        }
    }
}

// ---- decode as rows land ----------------------------------------------------
// CHUNK_ROWS rows a chunk. The producer (a copy of codes and scale bytes
// from src into the staging area, block b taking chunks b, b+P, ...)
// counts each chunk once its bytes are stored: every thread's stores, then
// the block's barrier, then thread 0's fence and atomic add. The consumer's
// block c takes chunks c, c+C, ... in order; its thread 0 waits with an
// acquire load until the chunk's count reaches the epoch (bounded by
// limit_ns of %globaltimer: past it, the timeout flag is set and the block
// stops), then the block decodes the chunk, reading the codes through L2
// (ld.global.cg: the non-coherent path could hold stale lines).

#define CHUNK_ROWS 2048

__device__ __forceinline__ u64 now_ns() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ u32 load_acquire(const u32 *p) {
    u32 v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

template <int D>
__global__ void __launch_bounds__(512) producer(const uint4 *__restrict__ src_codes, const u8 *__restrict__ src_scales,
                                                uint4 *stage_codes, u8 *stage_scales, u32 *count, u32 chunks) {
    constexpr u32 VEC = CHUNK_ROWS * D / 16;  // 16-byte vectors of codes a chunk
    for (u32 ch = blockIdx.x; ch < chunks; ch += gridDim.x) {
        const u64 base = (u64)ch * VEC;
        for (u32 i = threadIdx.x; i < VEC; i += 4 * 512) {
            uint4 x[4];
#pragma unroll
            for (int u = 0; u < 4; u++) x[u] = i + u * 512 < VEC ? __ldg(src_codes + base + i + u * 512) : make_uint4(0, 0, 0, 0);
#pragma unroll
            for (int u = 0; u < 4; u++) {
                if (i + u * 512 < VEC) stage_codes[base + i + u * 512] = x[u];
            }
        }
        for (u32 i = threadIdx.x; i < CHUNK_ROWS; i += 512) stage_scales[(u64)ch * CHUNK_ROWS + i] = src_scales[(u64)ch * CHUNK_ROWS + i];
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence();
            atomicAdd(count + ch, 1u);
        }
    }
}

template <int D>
__global__ void __launch_bounds__(512) consumer(const u8 *stage_codes, const u8 *stage_scales, u16 *out, const u32 *count,
                                                u32 chunks, u32 epoch, u64 limit_ns, u32 *timed_out) {
    constexpr int CPL = 8, CH = 4, RPW = Shape<D, CPL, CH>::RPW, U = 4;
    __shared__ u32 stop;
    const Tiling<D, CPL, CH, 512> tl(chunks * CHUNK_ROWS);
    const u32 warp = threadIdx.x / 32;
    const u64 t_start = now_ns();
    for (u32 ch = blockIdx.x; ch < chunks; ch += gridDim.x) {
        if (threadIdx.x == 0) {
            u32 s = 0;
            while (load_acquire(count + ch) < epoch) {
                if (now_ns() - t_start > limit_ns) {
                    atomicExch(timed_out, 1u);
                    s = 1;
                    break;
                }
                __nanosleep(64);
            }
            stop = s;
        }
        __syncthreads();
        if (stop) return;
        const u32 row0 = ch * CHUNK_ROWS;
        for (u32 t0 = warp; t0 < CHUNK_ROWS / RPW; t0 += U * 16) {
            uint2 c8[U][CH][1];
            u32 sb[U], row[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                row[u] = row0 + (t0 + u * 16) * RPW + tl.sub;
                const bool ok = t0 + u * 16 < CHUNK_ROWS / RPW;
                sb[u] = ok ? __ldcg(stage_scales + row[u]) : 0u;
#pragma unroll
                for (int c = 0; c < CH; c++) {
                    c8[u][c][0] = ok ? __ldcg(reinterpret_cast<const uint2 *>(stage_codes + tl.at(row[u], c))) : make_uint2(0, 0);
                }
            }
            store_decoded<D, CPL, CH, 512, U, false>(tl, out, c8, sb, row);
        }
        __syncthreads();  // stop is rewritten for the next chunk
    }
}

// ---- the host ---------------------------------------------------------------

static int g_sms;
static cudaStream_t g_stream;
static double g_rw_rate;  // bytes read + written per us, cudaMemcpyAsync's, this configuration
static int g_fails;

template <typename F>
static double median_us(F launch, int iters = 50) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 5; i++) launch();
    CK(cudaStreamSynchronize(g_stream));
    CK(cudaGetLastError());
    std::vector<float> t(iters);
    for (int i = 0; i < iters; i++) {
        CK(cudaEventRecord(a, g_stream));
        launch();
        CK(cudaEventRecord(b, g_stream));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&t[i], a, b));
    }
    CK(cudaGetLastError());
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return 1000.0 * t[iters / 2];
}

static void line(const char *kind, const char *name, int grid, int threads, double rw_bytes, double us, const std::string &check) {
    printf("%-9s %-30s grid %5d x %3d  %8.1f MiB  %8.1f us  %7.0f GB/s  %5.2fx floor  %s\n", kind, name, grid, threads,
           rw_bytes / (1 << 20), us, rw_bytes / us / 1e3, us / (rw_bytes / g_rw_rate), check.c_str());
    fflush(stdout);
}

// The first differing byte of got and want, or -1.
static long long first_diff(const void *got, const void *want, size_t n) {
    const u8 *g = (const u8 *)got, *w = (const u8 *)want;
    if (memcmp(g, w, n) == 0) return -1;
    for (size_t i = 0; i < n; i++) {
        if (g[i] != w[i]) return (long long)i;
    }
    return -1;
}

struct Config {
    int D;
    size_t bytes, rows;
    std::vector<u16> in, ref_out;
    std::vector<u8> ref_codes, ref_scales;
    u16 *d_in, *d_out;
    u8 *d_codes, *d_scales;
    std::vector<int> grids;  // 0: one-shot
};

// "ok", or FAIL with the first differing byte of n device bytes at d.
static std::string check_bytes(const void *d, const void *want, size_t n, size_t row_bytes, const char *what) {
    static std::vector<u8> h;
    char msg[128];
    if (h.size() < n) h.resize(n);
    CK(cudaMemcpy(h.data(), d, n, cudaMemcpyDeviceToHost));
    const long long i = first_diff(h.data(), want, n);
    if (i < 0) return "ok";
    g_fails++;
    snprintf(msg, sizeof msg, "FAIL %s row %lld byte %lld: 0x%02X want 0x%02X", what, i / (long long)row_bytes,
             i % (long long)row_bytes, h[i], ((const u8 *)want)[i]);
    return msg;
}

static int grid_of(int g, int blocks_oneshot) { return g == 0 ? blocks_oneshot : g; }

static void grid_name(char *buf, size_t n, const char *base, int g) {
    if (g == 0) {
        snprintf(buf, n, "%s one-shot", base);
    } else if (g % g_sms == 0) {
        snprintf(buf, n, "%s %dxSM", base, g / g_sms);
    } else {
        snprintf(buf, n, "%s %d blocks", base, g);
    }
}

template <int D, int EPL, int CH, int U, int TH, bool CS, bool DIRECT>
static void run_quantize(Config &c, const char *name) {
    constexpr int RPW = Shape<D, EPL, CH>::RPW;
    const u32 rows = (u32)c.rows;
    const int oneshot = (int)((rows + RPW * U * (TH / 32) - 1) / (RPW * U * (TH / 32)));
    const double rw = DIRECT ? 2.0 * c.bytes : c.bytes * 1.5 + c.rows;
    for (int g0 : c.grids) {
        const int g = grid_of(g0, oneshot);
        CK(cudaMemsetAsync(c.d_codes, 0xEE, c.rows * D, g_stream));
        CK(cudaMemsetAsync(c.d_scales, 0xEE, c.rows, g_stream));
        CK(cudaMemsetAsync(c.d_out, 0xEE, c.bytes, g_stream));
        const double us = median_us([&] {
            quantize<D, EPL, CH, U, TH, CS, DIRECT><<<g, TH, 0, g_stream>>>(c.d_in, c.d_codes, c.d_scales, c.d_out, rows);
        });
        std::string ok;
        if (DIRECT) {
            ok = check_bytes(c.d_out, c.ref_out.data(), c.bytes, 2 * D, "values");
        } else {
            ok = check_bytes(c.d_scales, c.ref_scales.data(), c.rows, 1, "scale of");
            if (ok == "ok") ok = check_bytes(c.d_codes, c.ref_codes.data(), c.rows * D, D, "codes");
        }
        char full[96];
        grid_name(full, sizeof full, name, g0);
        line(DIRECT ? "direct" : "quantize", full, g, TH, rw, us, ok);
    }
}

template <int D, int CPL, int CH, int U, int TH, bool CS, bool DEP>
static void run_decode(Config &c, const char *name) {
    constexpr int RPW = Shape<D, CPL, CH>::RPW;
    const u32 rows = (u32)c.rows;
    const int oneshot = (int)((rows + RPW * U * (TH / 32) - 1) / (RPW * U * (TH / 32)));
    const double rw = c.bytes * 1.5 + c.rows;
    for (int g0 : c.grids) {
        const int g = grid_of(g0, oneshot);
        CK(cudaMemsetAsync(c.d_out, 0xEE, c.bytes, g_stream));
        const double us = median_us(
            [&] { decode<D, CPL, CH, U, TH, CS, DEP><<<g, TH, 0, g_stream>>>(c.d_codes, c.d_scales, c.d_out, rows); });
        char full[96];
        grid_name(full, sizeof full, name, g0);
        line("decode", full, g, TH, rw, us, check_bytes(c.d_out, c.ref_out.data(), c.bytes, 2 * D, "values"));
    }
}

template <int V, int U, int TH, bool CS>
static void run_copy(Config &c, const char *name) {
    const u64 n = c.bytes / 16;
    const int oneshot = (int)((n + (u64)V * U * TH - 1) / ((u64)V * U * TH));
    for (int g0 : c.grids) {
        const int g = grid_of(g0, oneshot);
        CK(cudaMemsetAsync(c.d_out, 0xEE, c.bytes, g_stream));
        const double us = median_us([&] {
            copy<V, U, TH, CS><<<g, TH, 0, g_stream>>>(reinterpret_cast<const uint4 *>(c.d_in), reinterpret_cast<uint4 *>(c.d_out), n);
        });
        char full[96];
        grid_name(full, sizeof full, name, g0);
        line("copy", full, g, TH, 2.0 * c.bytes, us, check_bytes(c.d_out, c.in.data(), c.bytes, 2 * c.D, "copy"));
    }
}

template <int D>
static void run_all(Config &c) {
    // The floor: cudaMemcpyAsync D2D of the same bytes.
    const double mc = median_us([&] { CK(cudaMemcpyAsync(c.d_out, c.d_in, c.bytes, cudaMemcpyDeviceToDevice, g_stream)); });
    g_rw_rate = 2.0 * c.bytes / mc;
    line("copy", "cudaMemcpyAsync D2D", 0, 0, 2.0 * c.bytes, mc, check_bytes(c.d_out, c.in.data(), c.bytes, 2 * D, "copy"));
    run_copy<1, 4, 512, false>(c, "16B u4");
    run_copy<1, 8, 512, false>(c, "16B u8");
    run_copy<1, 8, 256, false>(c, "16B u8");
    run_copy<2, 4, 512, false>(c, "32B u4");
    run_copy<1, 8, 512, true>(c, "16B u8 cs");

    // Quantize. eN: bytes a lane loads at once; cN: loads a lane holds per
    // row; uN: rows a lane holds in flight (loads in flight = c * u, twice
    // that in 16-byte loads for e32).
    run_quantize<D, 8, 4, 2, 512, false, false>(c, "e16 c4 u2 (library)");
    run_quantize<D, 8, 4, 2, 256, false, false>(c, "e16 c4 u2");
    run_quantize<D, 8, 1, 1, 512, false, false>(c, "e16 c1 u1");
    run_quantize<D, 8, 1, 2, 512, false, false>(c, "e16 c1 u2");
    run_quantize<D, 8, 1, 4, 512, false, false>(c, "e16 c1 u4");
    run_quantize<D, 8, 1, 8, 512, false, false>(c, "e16 c1 u8");
    run_quantize<D, 8, 1, 4, 256, false, false>(c, "e16 c1 u4");
    run_quantize<D, 8, 2, 2, 512, false, false>(c, "e16 c2 u2");
    run_quantize<D, 8, 2, 4, 512, false, false>(c, "e16 c2 u4");
    run_quantize<D, 16, 1, 1, 512, false, false>(c, "e32 c1 u1");
    run_quantize<D, 16, 1, 2, 512, false, false>(c, "e32 c1 u2");
    run_quantize<D, 16, 1, 4, 512, false, false>(c, "e32 c1 u4");
    run_quantize<D, 16, 1, 4, 256, false, false>(c, "e32 c1 u4");
    run_quantize<D, 16, 2, 2, 512, false, false>(c, "e32 c2 u2");
    run_quantize<D, 8, 4, 2, 512, true, false>(c, "e16 c4 u2 cs");
    run_quantize<D, 8, 1, 4, 512, true, false>(c, "e16 c1 u4 cs");
    run_quantize<D, 16, 1, 4, 512, true, false>(c, "e32 c1 u4 cs");

    // The direct path: the same kernels storing decoded values.
    run_quantize<D, 8, 4, 2, 512, false, true>(c, "e16 c4 u2 (library)");
    run_quantize<D, 8, 1, 4, 512, false, true>(c, "e16 c1 u4");
    run_quantize<D, 16, 1, 4, 512, false, true>(c, "e32 c1 u4");
    run_quantize<D, 16, 1, 4, 512, true, true>(c, "e32 c1 u4 cs");

    // Decode, from the reference's codes. cN: codes a lane loads at once.
    CK(cudaMemcpy(c.d_codes, c.ref_codes.data(), c.rows * D, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(c.d_scales, c.ref_scales.data(), c.rows, cudaMemcpyHostToDevice));
    run_decode<D, 8, 4, 4, 512, false, true>(c, "c8 ch4 u4 dep (library)");
    run_decode<D, 8, 4, 4, 512, false, false>(c, "c8 ch4 u4");
    run_decode<D, 8, 1, 4, 512, false, false>(c, "c8 ch1 u4");
    run_decode<D, 8, 1, 8, 512, false, false>(c, "c8 ch1 u8");
    run_decode<D, 8, 1, 4, 256, false, false>(c, "c8 ch1 u4");
    run_decode<D, 16, 1, 2, 512, false, false>(c, "c16 ch1 u2");
    run_decode<D, 16, 1, 4, 512, false, false>(c, "c16 ch1 u4");
    run_decode<D, 16, 2, 2, 512, false, false>(c, "c16 ch2 u2");
    run_decode<D, 8, 1, 8, 512, true, false>(c, "c8 ch1 u8 cs");
    run_decode<D, 16, 1, 4, 512, true, false>(c, "c16 ch1 u4 cs");
}

// Producer alone, consumer alone (its chunks already counted), and both at
// once, for a few splits of the SMs between them.
template <int D>
static void run_overlap(Config &c) {
    const u32 chunks = (u32)(c.rows / CHUNK_ROWS);
    const size_t code_bytes = (size_t)chunks * CHUNK_ROWS * D, rows = (size_t)chunks * CHUNK_ROWS;
    u8 *stage_codes, *stage_scales;
    u32 *count, *timed_out;
    CK(cudaMalloc(&stage_codes, code_bytes));
    CK(cudaMalloc(&stage_scales, rows));
    CK(cudaMalloc(&count, chunks * 4));
    CK(cudaMalloc(&timed_out, 4));
    CK(cudaMemset(count, 0, chunks * 4));
    CK(cudaMemset(timed_out, 0, 4));
    CK(cudaMemcpy(c.d_codes, c.ref_codes.data(), code_bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(c.d_scales, c.ref_scales.data(), rows, cudaMemcpyHostToDevice));
    int occ_p = 0, occ_c = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ_p, producer<D>, 512, 0));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ_c, consumer<D>, 512, 0));
    cudaStream_t s2;
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaEvent_t fork, join;
    CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    u32 epoch = 0;
    const u64 limit_ns = 200ull * 1000 * 1000;  // 200 ms: far beyond any one pass
    const double prod_rw = 2.0 * (code_bytes + rows), dec_rw = code_bytes * 3.0 + rows;
    printf("overlap: %u chunks of %d rows (D=%d), producer copies codes + scales (%.1f MiB r+w), consumer decodes "
           "(%.1f MiB r+w); occupancy %d/%d blocks an SM\n",
           chunks, CHUNK_ROWS, D, prod_rw / (1 << 20), dec_rw / (1 << 20), occ_p, occ_c);
    const int splits[][2] = {{16, g_sms - 16}, {32, g_sms - 32}, {g_sms / 2, g_sms / 2}};
    for (const auto &sp : splits) {
        const int P = sp[0], C = sp[1];
        if (P + C > g_sms * std::min(occ_p, occ_c)) {
            printf("overlap: %d + %d blocks do not fit at once; skipped\n", P, C);
            continue;
        }
        const double tp = median_us(
            [&] {
                producer<D><<<P, 512, 0, g_stream>>>(reinterpret_cast<const uint4 *>(c.d_codes), c.d_scales,
                                                     reinterpret_cast<uint4 *>(stage_codes), stage_scales, count, chunks);
                epoch++;
            },
            20);
        CK(cudaMemsetAsync(c.d_out, 0xEE, c.bytes, g_stream));
        const double td = median_us(
            [&] { consumer<D><<<C, 512, 0, g_stream>>>(stage_codes, stage_scales, c.d_out, count, chunks, epoch, limit_ns, timed_out); },
            20);
        const std::string ok_d = check_bytes(c.d_out, c.ref_out.data(), rows * 2 * D, 2 * D, "values");
        // The decode first, on the second stream, waiting; then the producer.
        auto both = [&] {
            epoch++;
            CK(cudaEventRecord(fork, g_stream));
            CK(cudaStreamWaitEvent(s2, fork, 0));
            consumer<D><<<C, 512, 0, s2>>>(stage_codes, stage_scales, c.d_out, count, chunks, epoch, limit_ns, timed_out);
            producer<D><<<P, 512, 0, g_stream>>>(reinterpret_cast<const uint4 *>(c.d_codes), c.d_scales,
                                                 reinterpret_cast<uint4 *>(stage_codes), stage_scales, count, chunks);
            CK(cudaEventRecord(join, s2));
            CK(cudaStreamWaitEvent(g_stream, join, 0));
        };
        const double tb = median_us(both, 20);
        // One more overlapped pass over poisoned staging bytes and output,
        // checked: a decode that read a chunk before it landed shows.
        CK(cudaMemsetAsync(stage_codes, 0xEE, code_bytes, g_stream));
        CK(cudaMemsetAsync(stage_scales, 0xEE, rows, g_stream));
        CK(cudaMemsetAsync(c.d_out, 0xEE, c.bytes, g_stream));
        both();
        CK(cudaStreamSynchronize(g_stream));
        CK(cudaGetLastError());
        u32 to = 0;
        CK(cudaMemcpy(&to, timed_out, 4, cudaMemcpyDeviceToHost));
        const std::string ok_b = check_bytes(c.d_out, c.ref_out.data(), rows * 2 * D, 2 * D, "values");
        if (to) g_fails++;
        printf("overlap   producer %3d + decode %3d blocks: producer alone %7.1f us (%5.0f GB/s), decode alone %7.1f us, "
               "both %7.1f us (sum %7.1f); decode hidden %5.1f%%  decode %s, overlapped %s%s\n",
               P, C, tp, prod_rw / tp / 1e3, td, tb, tp + td, 100.0 * (tp + td - tb) / td, ok_d.c_str(), ok_b.c_str(),
               to ? ", TIMED OUT" : "");
        fflush(stdout);
    }
    CK(cudaStreamDestroy(s2));
    CK(cudaEventDestroy(fork));
    CK(cudaEventDestroy(join));
    CK(cudaFree(stage_codes));
    CK(cudaFree(stage_scales));
    CK(cudaFree(count));
    CK(cudaFree(timed_out));
}

static void setup(Config &c, int D, size_t bytes, std::vector<int> grids, u64 seed) {
    c.D = D;
    c.bytes = bytes;
    c.rows = bytes / (2 * D);
    c.grids = grids;
    c.in = make_rows(c.rows, D, seed);
    reference(c.in, D, c.ref_codes, c.ref_scales, c.ref_out);
    CK(cudaMalloc(&c.d_in, bytes));
    CK(cudaMalloc(&c.d_out, bytes));
    CK(cudaMalloc(&c.d_codes, c.rows * D));
    CK(cudaMalloc(&c.d_scales, c.rows));
    CK(cudaMemcpy(c.d_in, c.in.data(), bytes, cudaMemcpyHostToDevice));
    printf("\n== bf16 rows of D=%d, %zu MiB (%zu rows), e4m3; floor: cudaMemcpyAsync's read+write rate ==\n", D, bytes >> 20,
           c.rows);
}

static void teardown(Config &c) {
    CK(cudaFree(c.d_in));
    CK(cudaFree(c.d_out));
    CK(cudaFree(c.d_codes));
    CK(cudaFree(c.d_scales));
}

// Writes rows of test data and their reference (in.bin: bf16, codes.bin,
// scales.bin, out.bin: bf16) under dir, for a check against the library's
// own reference (internal/fp8) with no GPU.
static int dump(const char *dir, int D, size_t rows) {
    std::vector<u16> in = make_rows(rows, D, 1), out;
    std::vector<u8> codes, scales;
    reference(in, D, codes, scales, out);
    const struct {
        const char *name;
        const void *p;
        size_t n;
    } files[] = {{"in.bin", in.data(), in.size() * 2}, {"codes.bin", codes.data(), codes.size()},
                 {"scales.bin", scales.data(), scales.size()}, {"out.bin", out.data(), out.size() * 2}};
    for (const auto &f : files) {
        const std::string path = std::string(dir) + "/" + f.name;
        FILE *fp = fopen(path.c_str(), "wb");
        if (fp == nullptr || fwrite(f.p, 1, f.n, fp) != f.n || fclose(fp) != 0) {
            fprintf(stderr, "dump: cannot write %s\n", path.c_str());
            return 1;
        }
    }
    printf("dump: %zu rows of D=%d under %s\n", rows, D, dir);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--selftest") == 0) return selftest();
    if (argc > 2 && strcmp(argv[1], "--dump") == 0) return dump(argv[2], 128, 1 << 18);
    if (selftest() != 0) return 1;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    g_sms = prop.multiProcessorCount;
    printf("%s, %d SMs, L2 %d MiB\n", prop.name, g_sms, prop.l2CacheSize >> 20);
    CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    const std::vector<int> all = {g_sms, 2 * g_sms, 4 * g_sms, 0, 32};
    const std::vector<int> few = {g_sms, 0, 32};
    {
        Config c;
        setup(c, 128, 128ull << 20, all, 1);
        run_all<128>(c);
        run_overlap<128>(c);
        teardown(c);
    }
    {
        Config c;
        setup(c, 128, 8ull << 20, few, 2);
        run_all<128>(c);
        teardown(c);
    }
    {
        Config c;
        setup(c, 64, 128ull << 20, few, 3);
        run_all<64>(c);
        teardown(c);
    }
    printf("\n%s: %d mismatches\n", g_fails ? "FAIL" : "ok", g_fails);
    return g_fails ? 1 : 0;
}
