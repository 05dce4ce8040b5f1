// The fp8 wire: bf16/fp16 rows exchanged as fp8 codes with one
// power-of-two scale per row (one head of one token), included by
// ulysses.cu when compiled with -DWIRE (ulysses_wire.ptx, sm_90 (Hopper) and later: ISA 7.8 has the fp8 conversions for sm_90 only:
// the cvt to and from e4m3x2/e5m2x2 needs them).
//
// The format is defined bit for bit on the host (internal/fp8, row.go);
// every step below is the one it names: an integer max over the row's
// finite bit patterns, k from amax's exponent, a multiplication by 2^-k
// built as a float32 (exact), cvt.rn.satfinite to fp8, NaN written as 0x7F
// whatever its sign; and back: fp8 to f16 (exact), to f32, times 2^k
// (exact, or beyond the output's range), then to bf16/fp16 by round to
// nearest even with saturation, NaN as the canonical 0x7FC0 / 0x7E00.
//
// An operation is two launches on the Comm's stream. The exchange entry
// (ulysses_<op>_wire_*) runs the protocol of ulysses.cu unchanged: each
// active block reads its rows of the local input, quantizes each one and
// stores the codes and the scale byte straight into the staging area of
// the rank (or every rank) that holds the row in its output, at the row's
// final index, then signals; the last block waits for the peers. The
// decode entry (ulysses_wire_decode_*), queued after it, turns this rank's
// staging area into the 16-bit output in the same half. Stream order makes
// the decode start after the waiting block saw every peer's signal, so
// every row has landed. With WIRE_LANDING the exchange also decodes the
// peers' rows that have landed while it runs, parcel by parcel, without
// ever waiting for one (a waiting block must not keep a block it depends
// on out of an SM), and the decode launch takes the rest ("the decode as
// rows land" below).
//
// This rank's own rows skip the staging area: the exchange stores the
// 16-bit values their codes decode to straight into the output (the bits
// the decode would write), and a scale byte 0 tells the decode to leave
// them. Small operations (WIRE_DIRECT) send every row that way, in one
// launch with the exact operation's bytes. Either way the result is
// the exact result with every row round-tripped, whichever rank held the
// row (a2a/ref's reference).

#if ELEM_BYTES != 2
#error "the wire kernels read 16-bit elements: compile with -DELEM_BYTES=2"
#endif

typedef unsigned short u16;
typedef unsigned char u8;

// FMT 0: E4M3 (max 448), 1: E5M2 (max 57344): the float32 bits of the
// largest finite value, and the smallest NaN code with the sign cleared
// (the conversion may make any NaN code of its format).
template <int FMT>
struct WireFormat {
    static constexpr u32 max_bits = FMT == 0 ? 0x43E00000u : 0x47600000u;
    static constexpr u32 first_nan = FMT == 0 ? 0x7Fu : 0x7Du;
};

// OUT 0: bf16, 1: fp16: the Inf pattern (finite patterns are below it),
// the largest finite value (as float32 bits and as a code) and the NaN
// the decode writes.
template <int OUT>
struct HalfFormat {
    static constexpr u32 inf = OUT == 0 ? 0x7F80u : 0x7C00u;
    static constexpr u32 max_bits = OUT == 0 ? 0x7F7F0000u : 0x477FE000u;
    static constexpr u32 max_code = OUT == 0 ? 0x7F7Fu : 0x7BFFu;
    static constexpr u32 nan = OUT == 0 ? 0x7FC0u : 0x7E00u;
};

// The scale exponent's range; the byte on the wire is k + 128.
#define MIN_SCALE_EXP (-120)
#define MAX_SCALE_EXP 120

// A 16-bit element as a float32 (exact).
template <int OUT>
__device__ __forceinline__ float half_to_float(u32 x) {
    if (OUT == 0) {
        return __uint_as_float(x << 16);
    }
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(static_cast<u16>(x)));
    return f;
}

// 2^n as a float32, for MIN_SCALE_EXP <= n <= MAX_SCALE_EXP (a normal).
__device__ __forceinline__ float pow2f(int n) {
    return __uint_as_float(static_cast<u32>(n + 127) << 23);
}

// The smallest k with amax <= MAX * 2^k, clamped; 0 for amax 0. amax is
// the largest finite magnitude's bit pattern (sign cleared).
template <int FMT, int OUT>
__device__ __forceinline__ int scale_exp(u32 amax) {
    if (amax == 0u) {
        return 0;
    }
    const u32 a = __float_as_uint(half_to_float<OUT>(amax));
    const u32 m = WireFormat<FMT>::max_bits;
    int k = static_cast<int>(a >> 23) - static_cast<int>(m >> 23);
    if ((a & 0x7FFFFFu) > (m & 0x7FFFFFu)) {
        k++;
    }
    return min(max(k, MIN_SCALE_EXP), MAX_SCALE_EXP);
}

// Two 16-bit halves as a word, lo in the low half, and back: register
// halves to ptxas, so that neither takes a mask or a shift.
__device__ __forceinline__ u32 join_halves(u16 lo, u16 hi) {
    u32 w;
    asm("mov.b32 %0, {%1, %2};" : "=r"(w) : "h"(lo), "h"(hi));
    return w;
}

__device__ __forceinline__ void split_halves(u32 w, u16 &lo, u16 &hi) { asm("mov.b32 {%0, %1}, %2;" : "=h"(lo), "=h"(hi) : "r"(w)); }

// Two float32 to two fp8 codes, lo in the low byte. cvt.rn.satfinite
// rounds to nearest even and saturates (Inf included); a NaN becomes some
// NaN code, which same_nan then makes 0x7F.
template <int FMT>
__device__ __forceinline__ u16 encode2(float lo, float hi) {
    u16 r;
    if (FMT == 0) {
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    } else {
        asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    }
    return r;
}

// c (four codes) with each byte's top bit set exactly where the byte is a
// NaN code (the other bits are meaningless): with the sign cleared a byte
// is at most 0x7F, so adding 0x80 - first_nan sets its top bit exactly
// when it is first_nan or above, and never carries into the next byte.
// ORed over many words, the top bits still say whether any code was NaN.
template <int FMT>
__device__ __forceinline__ u32 nan_tops(u32 c) {
    return (c & 0x7F7F7F7Fu) + (0x80u - WireFormat<FMT>::first_nan) * 0x01010101u;
}

// 0x80 in every byte of c (four codes) that is a NaN code, else 0: four
// codes a few instructions, instead of a comparison per element.
template <int FMT>
__device__ __forceinline__ u32 nan_bytes(u32 c) {
    return nan_tops<FMT>(c) & 0x80808080u;
}

// c (four codes) with every NaN code made 0x7F, whatever its sign and
// payload: the format's one NaN.
template <int FMT>
__device__ __forceinline__ u32 same_nan(u32 c) {
    const u32 top = nan_bytes<FMT>(c), low = top - (top >> 7);  // 0x80 and 0x7F in the NaN bytes
    return (c & ~(top | low)) | low;
}

// Two fp8 codes (lo in the low byte) to two float32, exactly (every fp8
// value is an f16).
template <int FMT>
__device__ __forceinline__ void decode2(u16 c, float &lo, float &hi) {
    u32 h;
    if (FMT == 0) {
        asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h) : "h"(c));
    } else {
        asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(h) : "h"(c));
    }
    lo = half_to_float<1>(h & 0xFFFFu);
    hi = half_to_float<1>(h >> 16);
}

// A float32 to the 16-bit output: NaN to the canonical NaN, beyond the
// largest finite (Inf included) to it with the sign, else round to
// nearest even (subnormals kept).
template <int OUT>
__device__ __forceinline__ u32 float_to_half(float v) {
    const u32 b = __float_as_uint(v), abs = b & 0x7FFFFFFFu;
    if (abs > 0x7F800000u) {
        return HalfFormat<OUT>::nan;
    }
    if (abs > HalfFormat<OUT>::max_bits) {
        return (b >> 16 & 0x8000u) | HalfFormat<OUT>::max_code;
    }
    u16 r;
    if (OUT == 0) {
        asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(v));
    } else {
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(v));
    }
    return r;
}

// ---- element groups ---------------------------------------------------------
// A lane handles EPL consecutive elements of a row at a time: 4 (an 8-byte
// load, a 4-byte store of codes) where the head size and every address
// allow it, else 1.

// EPL 16-bit patterns, two to a word (one word for EPL 1).
template <int EPL>
struct Elems {
    u32 w[(EPL + 1) / 2];
    __device__ __forceinline__ u32 at(int i) const { return EPL == 1 ? w[0] : (w[i / 2] >> (16 * (i & 1))) & 0xFFFFu; }
};

template <int EPL>
__device__ __forceinline__ Elems<EPL> load_elems(const u16 *p) {
    Elems<EPL> e;
    if (EPL == 4) {
        const uint2 v = __ldg(reinterpret_cast<const uint2 *>(p));
        e.w[0] = v.x;
        e.w[1 % ((EPL + 1) / 2)] = v.y;
    } else {
        e.w[0] = __ldg(p);
    }
    return e;
}

// The largest finite magnitude's pattern among e and amax.
template <int OUT, int EPL>
__device__ __forceinline__ u32 finite_max(const Elems<EPL> &e, u32 amax) {
#pragma unroll
    for (int i = 0; i < EPL; i++) {
        const u32 a = e.at(i) & 0x7FFFu;
        amax = a < HalfFormat<OUT>::inf ? max(amax, a) : amax;
    }
    return amax;
}

// Two words of two 16-bit patterns each, scaled by inv, to four codes. A
// LEAN caller's row is finite: its codes are never NaN, and same_nan is
// left out.
template <int FMT, int OUT, bool LEAN = false>
__device__ __forceinline__ u32 encode4(u32 a, u32 b, float inv) {
    const u16 lo = encode2<FMT>(half_to_float<OUT>(a & 0xFFFFu) * inv, half_to_float<OUT>(a >> 16) * inv);
    const u16 hi = encode2<FMT>(half_to_float<OUT>(b & 0xFFFFu) * inv, half_to_float<OUT>(b >> 16) * inv);
    const u32 c = join_halves(lo, hi);
    return LEAN ? c : same_nan<FMT>(c);
}

// EPL elements scaled by inv to EPL codes, the first in the low byte.
template <int FMT, int OUT, int EPL>
__device__ __forceinline__ u32 encode_elems(const Elems<EPL> &e, float inv) {
    if (EPL == 4) {
        return encode4<FMT, OUT>(e.w[0], e.w[1 % ((EPL + 1) / 2)], inv);
    }
    return same_nan<FMT>(encode2<FMT>(half_to_float<OUT>(e.at(0)) * inv, 0.0f) & 0xFFu);
}

// ---- where each row goes ----------------------------------------------------
// Row j of an operation's walk (one head of one token of tensor k's input)
// is read at src (elements from the tensor's input) and lands at row `row`
// of the output of ranks q0..q1-1 (one rank for the head exchanges, every
// rank for the gathers). The walks are those of walks.cuh's maps, one
// head at a time. A walk of n rows holds, in every period rows from a
// multiple of period on, `run` consecutive rows for rank q, from `off`
// (picks): the rows of a parcel that land on one rank, without locating
// the others. Each walk is made for any rank r (the *_rows functions), so
// that a receiver can walk a peer's rows as the peer does.

struct RowDest {
    u64 src;
    u32 row, q0, q1;
};

struct Picks {
    u32 run, off;
};

// SendRecvHeads: input [B, T_r, H, D], rows in order (b, t, h); head h goes
// to its owner q at token p_r + t, head h - heads[q] of [B, T, H_q, D].
struct SendRecvRows {
    const int *heads;
    u64 in_row;
    Divisor H, rank_tokens, base, base1;  // base1: base + 1
    u32 D, extra, total_tokens, rank_prefix, n, period;
    __device__ bool locate(u32 j, RowDest &d) const {
        const u32 tok = H.div(j), h = j - tok * H.d;
        const u32 b = rank_tokens.div(tok), t = tok - b * rank_tokens.d;
        const u32 q = head_owner(h, base1, base, extra);
        const u32 first = static_cast<u32>(heads[q]), count = static_cast<u32>(heads[q + 1]) - first;
        d.src = tok * in_row + static_cast<u64>(h) * D;
        d.row = (b * total_tokens + rank_prefix + t) * count + h - first;
        d.q0 = q;
        d.q1 = q + 1u;
        return true;
    }
    __device__ Picks picks(u32 q) const {
        return Picks{static_cast<u32>(heads[q + 1] - heads[q]), static_cast<u32>(heads[q])};
    }
};

// Rank r's SendRecvHeads walk; heads in shared memory.
__device__ __forceinline__ SendRecvRows send_recv_rows(const Args &a, const Shared &sh, const int *heads, u32 r) {
    SendRecvRows m;
    m.heads = heads;
    m.in_row = a.in_row;
    m.D = a.head_units;
    const u32 H = static_cast<u32>(heads[a.world]), base = H / a.world, rank_tokens = sh.tokens[r];
    m.H = divisor_of(H);
    m.base = divisor_of(base);
    m.base1 = divisor_of(base + 1u);
    m.extra = H - base * a.world;
    m.rank_tokens = divisor_of(rank_tokens);
    m.total_tokens = sh.prefix[a.world];
    m.rank_prefix = sh.prefix[r];
    m.n = a.batch * rank_tokens * H;
    m.period = H;
    return m;
}

// GatherHeads: input [B, T, H_rank, D] walked in chunks of this rank's heads
// of one token, in the order (b, k, r) (GatherHeadsMap says why); the k-th
// token of rank r goes to token k of r's [B, T_r, H, D], heads
// heads[rank]...
struct GatherRows {
    const int *tokens, *prefix;
    u64 in_row;
    Divisor mine, world, max_tokens;
    u32 D, H, first, total_tokens, n, period;
    __device__ bool locate(u32 j, RowDest &d) const {
        const GatherIndex g = gather_index(j, mine, world, max_tokens);  // g.u: the head among mine
        if (g.k >= static_cast<u32>(tokens[g.r])) {
            return false;
        }
        d.src = (static_cast<u64>(g.b) * total_tokens + prefix[g.r] + g.k) * in_row + static_cast<u64>(g.u) * D;
        d.row = (g.b * static_cast<u32>(tokens[g.r]) + g.k) * H + first + g.u;
        d.q0 = g.r;
        d.q1 = g.r + 1u;
        return true;
    }
    __device__ Picks picks(u32 q) const { return Picks{mine.d, q * mine.d}; }
};

// HeadAllGather: input [B, T, H_rank, D]; row (b, t) goes to heads
// heads[rank].. of row (b, t) of every rank's [B, T, H, D].
struct HeadGatherRows {
    u64 in_row;
    Divisor mine;
    u32 D, H, first, world, n, period;
    __device__ bool locate(u32 j, RowDest &d) const {
        const u32 tok = mine.div(j), hh = j - tok * mine.d;
        d.src = tok * in_row + static_cast<u64>(hh) * D;
        d.row = tok * H + first + hh;
        d.q0 = 0u;
        d.q1 = world;
        return true;
    }
    __device__ Picks picks(u32) const { return Picks{1u, 0u}; }
};

// What the walks of rank r's heads share (GatherRows, HeadGatherRows):
// the input's token stride, the head size, all heads and rank r's; mine
// is rank r's count of heads.
template <typename Rows>
__device__ __forceinline__ u32 set_heads_of(Rows &m, const Args &a, u32 r) {
    m.in_row = a.in_row;
    m.D = a.head_units;
    m.H = static_cast<u32>(a.heads[a.world]);
    m.first = static_cast<u32>(a.heads[r]);
    const u32 mine = static_cast<u32>(a.heads[r + 1]) - m.first;
    m.mine = divisor_of(mine);
    return mine;
}

__device__ __forceinline__ GatherRows gather_rows(const Args &a, const Shared &sh, u32 r) {
    GatherRows m;
    const u32 mine = set_heads_of(m, a, r);
    m.world = divisor_of(a.world);
    m.tokens = sh.tokens;
    m.prefix = sh.prefix;
    m.total_tokens = sh.prefix[a.world];
    u32 most;
    most_tokens(most, sh, a);
    m.max_tokens = divisor_of(most);
    m.n = a.batch * most * a.world * mine;
    m.period = a.world * mine;
    return m;
}

__device__ __forceinline__ HeadGatherRows head_gather_rows(const Args &a, const Shared &sh, u32 r) {
    HeadGatherRows m;
    const u32 mine = set_heads_of(m, a, r);
    m.world = a.world;
    m.n = a.batch * static_cast<u32>(sh.prefix[a.world]) * mine;
    m.period = 1u;
    return m;
}

// AllGather: input [B, T_r, H, D]; token (b, t) goes to token p_r + t of
// every rank's [B, T, H, D].
struct AllGatherRows {
    u64 in_row;
    Divisor H, rank_tokens;
    u32 D, world, total_tokens, rank_prefix, n, period;
    __device__ bool locate(u32 j, RowDest &d) const {
        const u32 tok = H.div(j), h = j - tok * H.d;
        const u32 b = rank_tokens.div(tok), t = tok - b * rank_tokens.d;
        d.src = tok * in_row + static_cast<u64>(h) * D;
        d.row = (b * total_tokens + rank_prefix + t) * H.d + h;
        d.q0 = 0u;
        d.q1 = world;
        return true;
    }
    __device__ Picks picks(u32) const { return Picks{1u, 0u}; }
};

__device__ __forceinline__ AllGatherRows all_gather_rows(const Args &a, const Shared &sh, u32 r) {
    AllGatherRows m;
    m.in_row = a.in_row;
    m.D = a.head_units;
    m.H = divisor_of(a.out_heads);
    m.world = a.world;
    m.rank_tokens = divisor_of(sh.tokens[r]);
    m.total_tokens = sh.prefix[a.world];
    m.rank_prefix = sh.prefix[r];
    m.n = a.batch * static_cast<u32>(sh.tokens[r]) * a.out_heads;
    m.period = 1u;
    return m;
}

// Pack (WIRE_PACK): tensor k's input [B, T_in, in_heads, D], with a token
// stride, row j in its own order, to row j of the local area (data[0] of
// the walk's one destination, 0). n is wire_rows, the rows of one tensor.
struct PackRows {
    u64 in_row;
    Divisor heads;
    u32 D, n;
    __device__ bool locate(u32 j, RowDest &d) const {
        const u32 tok = heads.div(j), h = j - tok * heads.d;
        d.src = tok * in_row + static_cast<u64>(h) * D;
        d.row = j;
        d.q0 = 0u;
        d.q1 = 1u;
        return true;
    }
};

__device__ __forceinline__ PackRows pack_rows(const Args &a) {
    PackRows m;
    m.in_row = a.in_row;
    m.heads = divisor_of(a.in_heads);
    m.D = a.head_units;
    m.n = a.wire_rows;
    return m;
}

// Two float32 to two 16-bit outputs (lo in the low half), rounded to
// nearest even: float_to_half's result for values that are not NaN and
// not beyond the output's largest finite value, in one instruction.
template <int OUT>
__device__ __forceinline__ u32 pack2(float lo, float hi) {
    u32 r;
    if (OUT == 0) {
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    } else {
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    }
    return r;
}

// Whether no code of a row with scale p can decode beyond the output's
// largest finite value (the format's largest times p is within it), so
// that float_to_half's saturation never applies to the row.
template <int FMT, int OUT>
__device__ __forceinline__ bool fits_output(float p) {
    return p * __uint_as_float(WireFormat<FMT>::max_bits) <= __uint_as_float(HalfFormat<OUT>::max_bits);
}

// Four codes times p to two words of two 16-bit outputs each, as
// float_to_half gives them. Codes of a row that fits_output, none of them
// NaN, take pack2: two conversions an instruction and no check per
// element (almost every row). A LEAN caller has checked that for the
// whole row, so the codes take pack2 with no check at all.
template <int FMT, int OUT, bool LEAN = false>
__device__ __forceinline__ uint2 decode4(u32 c, float p) {
    float v[4];
    u16 lo, hi;
    split_halves(c, lo, hi);
    decode2<FMT>(lo, v[0], v[1]);
    decode2<FMT>(hi, v[2], v[3]);
    uint2 o;
    if (LEAN || (nan_bytes<FMT>(c) == 0u && fits_output<FMT, OUT>(p))) {
        o.x = pack2<OUT>(v[0] * p, v[1] * p);
        o.y = pack2<OUT>(v[2] * p, v[3] * p);
    } else {
        o.x = float_to_half<OUT>(v[0] * p) | float_to_half<OUT>(v[1] * p) << 16;
        o.y = float_to_half<OUT>(v[2] * p) | float_to_half<OUT>(v[3] * p) << 16;
    }
    return o;
}

// ---- where a row's codes land ------------------------------------------------
// A lane stores N codes of a row at a time (1, 4 or 8; the first in the low
// byte of c.x, the fifth in c.y's). Rows for the peers go as codes into
// their staging areas, and the decode launch turns them into outputs;
// this rank's own rows, and every row with WIRE_DIRECT, go as
// the 16-bit values their codes decode to, straight into the outputs: the
// same bits the decode would write, without the staging area's write and
// read (and, with WIRE_DIRECT, without the decode launch).

// Whether a row for rank q is this rank's own, which goes to the output as
// values: never with WIRE_PACK, where every row goes to the local area as
// codes for a transport to send (this rank's own rows included: they
// must be round-tripped like the others, and the transport moves them).
__device__ __forceinline__ bool own_row(const Args &a, u32 q) { return q == a.rank && a.wire_mode != WIRE_PACK; }

__device__ __forceinline__ bool direct_to(const Args &a, u32 q) { return a.wire_mode == WIRE_DIRECT || own_row(a, q); }

// N codes times p as 16-bit values at out (LEAN: as decode4).
template <int FMT, int OUT, int N, bool LEAN = false>
__device__ __forceinline__ void put_values(u16 *out, uint2 c, float p) {
    if (N == 8) {
        const uint2 lo = decode4<FMT, OUT, LEAN>(c.x, p), hi = decode4<FMT, OUT, LEAN>(c.y, p);
        *reinterpret_cast<uint4 *>(out) = make_uint4(lo.x, lo.y, hi.x, hi.y);
    } else if (N == 4) {
        *reinterpret_cast<uint2 *>(out) = decode4<FMT, OUT>(c.x, p);
    } else {
        float lo, hi;
        decode2<FMT>(static_cast<u16>(c.x), lo, hi);
        *out = static_cast<u16>(float_to_half<OUT>(lo * p));
    }
}

template <int N>
__device__ __forceinline__ void put_codes(u8 *p, uint2 c) {
    if (N == 8) {
        *reinterpret_cast<uint2 *>(p) = c;
    } else if (N == 4) {
        *reinterpret_cast<u32 *>(p) = c.x;
    } else {
        *p = static_cast<u8>(c.x);
    }
}

// Stores a lane's N codes c of row d of tensor k (elements e..e+N-1, scale
// exponent s) at every destination of the row.
template <int FMT, int OUT, int N>
__device__ __forceinline__ void store_part(const Args &a, const Shared &sh, const RowDest &d, u32 k, u32 e, uint2 c, int s) {
    const u64 at = static_cast<u64>(d.row) * a.head_units + e;  // in the output's elements and in codes alike
    for (u32 q = d.q0; q < d.q1; q++) {
        if (direct_to(a, q)) {
            put_values<FMT, OUT, N>(reinterpret_cast<u16 *>(sh.data[q] + k * a.region) + at, c, pow2f(s));
        } else {
            put_codes<N>(reinterpret_cast<u8 *>(sh.data[q] + a.stage + k * a.stage_region) + at, c);
        }
    }
}

// Stores row d's scale byte (s + 128, from 8 to 248) in every staging area
// it goes to, and 0 in this rank's own for its own rows: the decode skips
// a row whose scale byte is 0, which is already in the output. With
// WIRE_DIRECT nothing is staged and no decode runs.
__device__ __forceinline__ void store_scale(const Args &a, const Shared &sh, const RowDest &d, u32 k, int s) {
    if (a.wire_mode == WIRE_DIRECT) {
        return;
    }
    for (u32 q = d.q0; q < d.q1; q++) {
        reinterpret_cast<u8 *>(sh.data[q] + a.scales + k * a.scale_region)[d.row] = own_row(a, q) ? 0 : static_cast<u8>(s + 128);
    }
}

// ---- the exchange -----------------------------------------------------------

// Lanes that share a row: enough for D elements EPL at a time, a power of
// two, at most a warp.
template <int EPL>
__device__ __forceinline__ u32 lanes_per_row(u32 D) {
    const u32 need = (D + EPL - 1) / EPL;
    u32 g = 1u;
    while (g < need && g < 32u) {
        g <<= 1;
    }
    return g;
}

// Quantizes rows 0..n-1 of tensor k's walk and stores each one at its
// destinations (store_part, store_scale). A group of G lanes
// takes a row: it reads it once for amax (shuffled across the group), then
// again (from L1) to encode and store. The loop bounds are the same for
// the whole warp, so every lane reaches every shuffle.
template <int FMT, int OUT, int EPL, typename Rows>
__device__ __forceinline__ void quantize_rows(const Args &a, const Shared &sh, u32 active, const Rows &m, u32 n, u32 k) {
    const u32 D = a.head_units;
    const u32 G = lanes_per_row<EPL>(D);
    const u32 lane = threadIdx.x & 31u, gl = lane & (G - 1u);
    const u32 warps = blockDim.x >> 5, per_warp = 32u / G;
    const u32 stride = active * warps * per_warp;
    const u16 *src = reinterpret_cast<const u16 *>(a.inputs[k]);
    for (u32 first = (blockIdx.x * warps + (threadIdx.x >> 5)) * per_warp; first < n; first += stride) {
        const u32 j = first + lane / G;
        RowDest d;
        const bool ok = j < n && m.locate(j, d) && d.row < a.wire_rows;
        u32 amax = 0u;
        if (ok) {
            for (u32 e = gl * EPL; e < D; e += G * EPL) {
                amax = finite_max<OUT, EPL>(load_elems<EPL>(src + d.src + e), amax);
            }
        }
        for (u32 o = G >> 1; o > 0u; o >>= 1) {
            amax = max(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
        }
        if (!ok) {
            continue;
        }
        const int s = scale_exp<FMT, OUT>(amax);
        const float inv = pow2f(-s);
        for (u32 e = gl * EPL; e < D; e += G * EPL) {
            const u32 codes = encode_elems<FMT, OUT, EPL>(load_elems<EPL>(src + d.src + e), inv);
            store_part<FMT, OUT, EPL>(a, sh, d, k, e, make_uint2(codes, 0u), s);
        }
        if (gl == 0u) {
            store_scale(a, sh, d, k, s);
        }
    }
}

// Rows of one warp in flight at once in quantize_held: each lane keeps its
// part of WIRE_UNROLL rows in registers, so that their loads are all issued
// before the first one is needed. (With one row at a time, SendRecvHeads
// of 128 MiB took 930 us on one H200 with two ranks, with eight 641 us; the
// wide path, with a few lanes per row, 296.)
#define WIRE_UNROLL 8

// quantize_rows for rows a group of lanes covers in one chunk each (D at
// most G*EPL): a warp takes WIRE_UNROLL slots of rows at once, loads them
// all, then reduces, encodes and stores each. Slot t of the warp with
// global index w holds rows (w + t*W)*per_warp.., W the warps of the
// active blocks, as in quantize_rows.
template <int FMT, int OUT, int EPL, typename Rows>
__device__ __forceinline__ void quantize_held(const Args &a, const Shared &sh, u32 active, const Rows &m, u32 n, u32 k) {
    const u32 D = a.head_units;
    const u32 G = lanes_per_row<EPL>(D);
    const u32 lane = threadIdx.x & 31u, gl = lane & (G - 1u), e = gl * EPL;
    const bool holds = e < D;  // the lane's elements e..e+EPL-1 are in the row
    const u32 warps = blockDim.x >> 5, per_warp = 32u / G;
    const u32 stride = active * warps * per_warp;
    const u16 *src = reinterpret_cast<const u16 *>(a.inputs[k]);
    for (u32 first = (blockIdx.x * warps + (threadIdx.x >> 5)) * per_warp; first < n; first += WIRE_UNROLL * stride) {
        RowDest d[WIRE_UNROLL];
        Elems<EPL> x[WIRE_UNROLL];
        u32 amax[WIRE_UNROLL];
        bool ok[WIRE_UNROLL];
#pragma unroll
        for (int r = 0; r < WIRE_UNROLL; r++) {
            const u32 j = first + r * stride + lane / G;
            ok[r] = j < n && m.locate(j, d[r]) && d[r].row < a.wire_rows;
            amax[r] = 0u;
            if (ok[r] && holds) {
                x[r] = load_elems<EPL>(src + d[r].src + e);
            }
        }
#pragma unroll
        for (int r = 0; r < WIRE_UNROLL; r++) {
            if (ok[r] && holds) {
                amax[r] = finite_max<OUT, EPL>(x[r], 0u);
            }
            for (u32 o = G >> 1; o > 0u; o >>= 1) {
                amax[r] = max(amax[r], __shfl_xor_sync(0xFFFFFFFFu, amax[r], o));
            }
        }
#pragma unroll
        for (int r = 0; r < WIRE_UNROLL; r++) {
            if (!ok[r]) {
                continue;
            }
            const int s = scale_exp<FMT, OUT>(amax[r]);
            if (holds) {
                store_part<FMT, OUT, EPL>(a, sh, d[r], k, e, make_uint2(encode_elems<FMT, OUT, EPL>(x[r], pow2f(-s)), 0u), s);
            }
            if (gl == 0u) {
                store_scale(a, sh, d[r], k, s);
            }
        }
    }
}

// ---- the wide path: eight elements a chunk, several chunks a lane -----------
// With a group of lanes as wide as the row (quantize_held), every lane
// repeats the row's index arithmetic and the group's shuffles for four
// elements, and the kernel is bound by those instructions. The wide path
// gives each lane WIDE_CHUNKS chunks of eight elements (16-byte loads,
// 8-byte stores of codes) so that a group of a few lanes covers a row
// (4 for D = 128: a warp works on 8 rows at once), and holds WIDE_ROWS
// rows at a time. It takes heads of a multiple of 8 elements, at most
// 32 * 8 * WIDE_CHUNKS, with 16-byte aligned inputs and token strides.

#define WIDE_CHUNKS 4
#define WIDE_ROWS 2

// The first element of chunk c of lane gl of a group of G lanes: the
// group's lanes take a row's chunks of eight in turn (lane gl holds chunks
// gl, gl + G, ...), so each of the group's loads and stores is contiguous.
__device__ __forceinline__ u32 chunk_at(u32 gl, int c, u32 G) { return (gl + c * G) * 8u; }

// Lanes per row of the wide path: the fewest, a power of two, whose
// WIDE_CHUNKS chunks of eight cover D; at most a warp.
__device__ __forceinline__ u32 wide_lanes(u32 D) {
    u32 g = 1u;
    while (g * 8u * WIDE_CHUNKS < D && g < 32u) {
        g <<= 1;
    }
    return g;
}

// The packed maximum of two words' magnitudes, half by half: each half of
// the result has the larger magnitude of its two inputs (its sign bit is
// meaningless), and a NaN wins over any number, so a half at or above the
// Inf pattern says a NaN or an Inf was among them.
template <int OUT>
__device__ __forceinline__ u32 max_abs2(u32 a, u32 b) {
    u32 r;
    if (OUT == 0) {
        asm("max.NaN.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    } else {
        asm("max.NaN.xorsign.abs.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    }
    return r;
}

// A chunk's eight magnitudes folded into m by max_abs2: two elements an
// instruction, with no mask and no check per element.
template <int OUT>
__device__ __forceinline__ u32 fold_abs8(const uint4 &v, u32 m) {
    return max_abs2<OUT>(max_abs2<OUT>(max_abs2<OUT>(v.x, v.y), max_abs2<OUT>(v.z, v.w)), m);
}

// The larger magnitude pattern of a word's two halves.
__device__ __forceinline__ u32 top_half(u32 m) { return max(m & 0x7FFFu, m >> 16 & 0x7FFFu); }

// Eight 16-bit patterns' largest finite magnitude, with amax, element by
// element: for a lane whose chunks hold a NaN or an Inf.
template <int OUT>
__device__ __forceinline__ u32 finite_max8(const uint4 &v, u32 amax) {
    const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const u32 a = (w[i / 2] >> (16 * (i & 1))) & 0x7FFFu;
        amax = a < HalfFormat<OUT>::inf ? max(amax, a) : amax;
    }
    return amax;
}

// Whether a lane's chunks of codes of a row with scale p (those in the
// row) can take decode4's LEAN path: none is a NaN code (nan_tops, ORed:
// five instructions a chunk of eight codes in ptxas 11.8's sm_90 code) and
// the row fits_output.
template <int FMT, int OUT>
__device__ __forceinline__ bool lean_codes(const uint2 (&codes)[WIDE_CHUNKS], u32 gl, u32 G, u32 D, float p) {
    u32 seen = 0u;
#pragma unroll
    for (int c = 0; c < WIDE_CHUNKS; c++) {
        if (chunk_at(gl, c, G) < D) {
            seen |= nan_tops<FMT>(codes[c].x) | nan_tops<FMT>(codes[c].y);
        }
    }
    return (seen & 0x80808080u) == 0u && fits_output<FMT, OUT>(p);
}

// A lane's chunks of codes of a row (chunk c: elements (gl + c*G)*8 ..+7)
// times p as 16-bit values at out, the row's first element (LEAN: as
// decode4).
template <int FMT, int OUT, bool LEAN>
__device__ __forceinline__ void put_chunks(u16 *out, const uint2 (&codes)[WIDE_CHUNKS], u32 gl, u32 G, u32 D, float p) {
#pragma unroll
    for (int c = 0; c < WIDE_CHUNKS; c++) {
        const u32 e = chunk_at(gl, c, G);
        if (e < D) {
            put_values<FMT, OUT, 8, LEAN>(out + e, codes[c], p);
        }
    }
}

// Stores a lane's chunks of row d's codes (chunk c holds elements
// (gl + c*G)*8 ..+7 of tensor k, scale exponent s) at every destination of
// the row: each destination's row address is found once, not once a chunk.
// LEAN: the row is finite and fits_output (put_values).
template <int FMT, int OUT, bool LEAN>
__device__ __forceinline__ void store_row(const Args &a, const Shared &sh, const RowDest &d, u32 k, u32 gl, u32 G, const uint2 (&codes)[WIDE_CHUNKS], int s) {
    const u32 D = a.head_units;
    const u64 at = static_cast<u64>(d.row) * D;  // in the output's elements and in codes alike
    const float p = pow2f(s);
    for (u32 q = d.q0; q < d.q1; q++) {
        if (direct_to(a, q)) {
            put_chunks<FMT, OUT, LEAN>(reinterpret_cast<u16 *>(sh.data[q] + k * a.region) + at, codes, gl, G, D, p);
        } else {
            u8 *staged = reinterpret_cast<u8 *>(sh.data[q] + a.stage + k * a.stage_region) + at;
#pragma unroll
            for (int c = 0; c < WIDE_CHUNKS; c++) {
                const u32 e = chunk_at(gl, c, G);
                if (e < D) {
                    put_codes<8>(staged + e, codes[c]);
                }
            }
        }
    }
}

// Encodes a lane's chunks x of row d with scale exponent s and stores them
// (store_row), and the row's scale byte (store_scale).
template <int FMT, int OUT, bool LEAN>
__device__ __forceinline__ void send_row(const Args &a, const Shared &sh, const RowDest &d, u32 k, u32 gl, u32 G, const uint4 (&x)[WIDE_CHUNKS], int s) {
    const float inv = pow2f(-s);
    uint2 codes[WIDE_CHUNKS];
#pragma unroll
    for (int c = 0; c < WIDE_CHUNKS; c++) {
        if (chunk_at(gl, c, G) < a.head_units) {
            codes[c].x = encode4<FMT, OUT, LEAN>(x[c].x, x[c].y, inv);
            codes[c].y = encode4<FMT, OUT, LEAN>(x[c].z, x[c].w, inv);
        }
    }
    store_row<FMT, OUT, LEAN>(a, sh, d, k, gl, G, codes, s);
    if (gl == 0u) {
        store_scale(a, sh, d, k, s);
    }
}

// send_row for each of a warp's held rows that is in the walk (ok).
template <int FMT, int OUT, bool LEAN>
__device__ __forceinline__ void send_rows(const Args &a, const Shared &sh, const RowDest (&d)[WIDE_ROWS], const bool (&ok)[WIDE_ROWS], u32 k, u32 gl, u32 G,
                                          const uint4 (&x)[WIDE_ROWS][WIDE_CHUNKS], const int (&s)[WIDE_ROWS]) {
#pragma unroll
    for (int r = 0; r < WIDE_ROWS; r++) {
        if (ok[r]) {
            send_row<FMT, OUT, LEAN>(a, sh, d[r], k, gl, G, x[r], s[r]);
        }
    }
}

// quantize_rows on the wide path, for rows j0..j1-1 of the walk shared by
// `slots` warps, this one being slot0 among them: slot t of warp w holds
// rows j0 + (w + t*slots)*per_warp.., and a warp takes WIDE_ROWS slots at
// once. The whole walk over the active blocks' warps is j0 = 0, j1 = n,
// slot0 the warp's global index, slots all active warps.
//
// Each lane folds its chunks' magnitudes with max_abs2 first. Where every
// row the warp holds is finite and fits_output (almost always), the warp
// takes the lean path: codes without same_nan, values without the checks
// for NaN and saturation, whose instructions made the kernel bound by its
// instructions on few SMs (docs/BENCHMARKS.md, "The fp8 wire's lean
// path"). Otherwise it takes the checked path, each lane finding its
// finite maximum element by element where its chunks hold a NaN or Inf.
// The choice is the whole warp's (__all_sync), so the two paths never
// split a warp.
template <int FMT, int OUT, typename Rows>
__device__ __forceinline__ void quantize_wide(const Args &a, const Shared &sh, const Rows &m, u32 k, u32 j0, u32 j1, u32 slot0, u32 slots) {
    const u32 D = a.head_units, G = wide_lanes(D);
    const u32 lane = threadIdx.x & 31u, gl = lane & (G - 1u);
    const u32 per_warp = 32u / G;
    const u32 stride = slots * per_warp;
    const u16 *src = reinterpret_cast<const u16 *>(a.inputs[k]);
    for (u32 first = j0 + slot0 * per_warp; first < j1; first += WIDE_ROWS * stride) {
        RowDest d[WIDE_ROWS];
        uint4 x[WIDE_ROWS][WIDE_CHUNKS];
        int s[WIDE_ROWS];
        bool ok[WIDE_ROWS];
#pragma unroll
        for (int r = 0; r < WIDE_ROWS; r++) {
            const u32 j = first + r * stride + lane / G;
            ok[r] = j < j1 && m.locate(j, d[r]) && d[r].row < a.wire_rows;
#pragma unroll
            for (int c = 0; c < WIDE_CHUNKS; c++) {
                const u32 e = chunk_at(gl, c, G);
                if (ok[r] && e < D) {
                    x[r][c] = __ldg(reinterpret_cast<const uint4 *>(src + d[r].src + e));
                }
            }
        }
        bool lean = true;
#pragma unroll
        for (int r = 0; r < WIDE_ROWS; r++) {
            u32 folded = 0u;
#pragma unroll
            for (int c = 0; c < WIDE_CHUNKS; c++) {
                if (ok[r] && chunk_at(gl, c, G) < D) {
                    folded = fold_abs8<OUT>(x[r][c], folded);
                }
            }
            u32 amax = top_half(folded);
            if (amax >= HalfFormat<OUT>::inf) {
                lean = false;
                amax = 0u;
#pragma unroll
                for (int c = 0; c < WIDE_CHUNKS; c++) {
                    if (ok[r] && chunk_at(gl, c, G) < D) {
                        amax = finite_max8<OUT>(x[r][c], amax);
                    }
                }
            }
            for (u32 o = G >> 1; o > 0u; o >>= 1) {
                amax = max(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
            }
            s[r] = scale_exp<FMT, OUT>(amax);
            lean = lean && (!ok[r] || fits_output<FMT, OUT>(pow2f(s[r])));
        }
        if (__all_sync(0xFFFFFFFFu, lean)) {
            send_rows<FMT, OUT, true>(a, sh, d, ok, k, gl, G, x, s);
        } else {
            send_rows<FMT, OUT, false>(a, sh, d, ok, k, gl, G, x, s);
        }
    }
}

// Rows of one warp's slots the decode holds at once: it reads their scale
// bytes, then the codes of those not 0, so each round trip to memory
// serves twice the rows quantize_wide holds.
#define DECODE_ROWS 4

// Writes the values of a lane's held rows: slot r is row row[r] of out,
// with scale byte sb[r] (0: nothing to write) and codes c[r].
template <int FMT, int OUT, int ROWS, bool LEAN>
__device__ __forceinline__ void decode_rows(u16 *out, const u32 (&row)[ROWS], const u32 (&sb)[ROWS], const uint2 (&c)[ROWS][WIDE_CHUNKS], u32 gl,
                                            u32 G, u32 D) {
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        if (sb[r] != 0u) {
            put_chunks<FMT, OUT, LEAN>(out + static_cast<u64>(row[r]) * D, c[r], gl, G, D, pow2f(static_cast<int>(sb[r]) - 128));
        }
    }
}

// decode_rows on the lean path where every held row of the warp passes
// lean_codes (almost always), else on the checked one: the choice is the
// whole warp's, so the two paths never split a warp.
template <int FMT, int OUT, int ROWS>
__device__ __forceinline__ void decode_held(u16 *out, const u32 (&row)[ROWS], const u32 (&sb)[ROWS], const uint2 (&c)[ROWS][WIDE_CHUNKS], u32 gl,
                                            u32 G, u32 D) {
    bool lean = true;
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        lean = lean && (sb[r] == 0u || lean_codes<FMT, OUT>(c[r], gl, G, D, pow2f(static_cast<int>(sb[r]) - 128)));
    }
    if (__all_sync(0xFFFFFFFFu, lean)) {
        decode_rows<FMT, OUT, ROWS, true>(out, row, sb, c, gl, G, D);
    } else {
        decode_rows<FMT, OUT, ROWS, false>(out, row, sb, c, gl, G, D);
    }
}

// The decode on the wide path: rows 0..rows-1 of one tensor, laid out as
// quantize_wide's, so that no element's row needs a division. A row whose
// scale byte is 0 is in the output already (store_scale): its codes are
// neither read nor decoded.
template <int FMT, int OUT>
__device__ __forceinline__ void decode_wide(u16 *out, const u8 *codes, const u8 *scales, u32 D, u32 rows) {
    const u32 G = wide_lanes(D);
    const u32 lane = threadIdx.x & 31u, gl = lane & (G - 1u);
    const u32 warps = blockDim.x >> 5, per_warp = 32u / G;
    const u32 stride = gridDim.x * warps * per_warp;
    for (u32 first = (blockIdx.x * warps + (threadIdx.x >> 5)) * per_warp; first < rows; first += DECODE_ROWS * stride) {
        uint2 c[DECODE_ROWS][WIDE_CHUNKS];
        u32 row[DECODE_ROWS], sb[DECODE_ROWS];
#pragma unroll
        for (int r = 0; r < DECODE_ROWS; r++) {
            row[r] = first + r * stride + lane / G;
            sb[r] = row[r] < rows ? __ldg(scales + row[r]) : 0u;
        }
#pragma unroll
        for (int r = 0; r < DECODE_ROWS; r++) {
            if (sb[r] != 0u) {
#pragma unroll
                for (int k = 0; k < WIDE_CHUNKS; k++) {
                    const u32 e = chunk_at(gl, k, G);
                    if (e < D) {
                        c[r][k] = __ldg(reinterpret_cast<const uint2 *>(codes + static_cast<u64>(row[r]) * D + e));
                    }
                }
            }
        }
        decode_held<FMT, OUT>(out, row, sb, c, gl, G, D);
    }
}

template <int FMT, int OUT, int EPL, typename Rows>
__device__ __forceinline__ void quantize_tensors(const Args &a, const Shared &sh, u32 active, const Rows &m, u32 n) {
    const bool held = a.head_units <= 32u * EPL;  // one chunk per lane: quantize_held
    for (u32 k = 0; k < a.tensors; k++) {
        if (EPL == 8) {
            const u32 warps = blockDim.x >> 5;
            quantize_wide<FMT, OUT>(a, sh, m, k, 0u, n, blockIdx.x * warps + (threadIdx.x >> 5), active * warps);
        } else if (held) {
            quantize_held<FMT, OUT, EPL>(a, sh, active, m, n, k);
        } else {
            quantize_rows<FMT, OUT, EPL>(a, sh, active, m, n, k);
        }
    }
}

// ---- the decode as rows land (the wide path, staged) ------------------------
// A staged operation on the wide path sends its rows in parcels: parcel c of
// tensor k (item g = k * per_tensor + c of the rank's walk) is rows c*rows..
// of tensor k's walk, rows a multiple of the walk's period, so that every
// parcel holds whole periods and its rows for one rank are picks. Active
// block b sends items b, b + active, ...; after each one it stores the
// operation's epoch into landed[rank][g] at every peer (a release: the
// block's stores of the parcel, ordered before it by a barrier, are visible
// to whoever acquires the word). Then it looks, without waiting, whether
// the next item of column b of each peer has landed here, and decodes the
// rows of those that have: it makes the peer's walk as the peer made it,
// picks the rows that land on this rank, turns their codes into the output
// and sets their scale bytes to 0. After its last item it looks again until
// nothing more has landed, then ends as every operation does. No block
// waits for a parcel (the last block's wait for the peers stays the only
// wait), so nothing here can keep a block another depends on out of an
// SM; what has not landed when a block ends is left to the decode launch,
// which skips every row whose scale byte is 0. The decode therefore runs
// beside the transfer, behind it by about one parcel.

// A walk's parcels: rows each (the last may hold fewer) and how many of
// them each tensor's walk of n rows takes.
struct Parcels {
    u32 rows, per_tensor;
};

// The fewest rows of a parcel: below this, the barrier and the landing
// word of each parcel cost more than the parcel's rows.
#define PARCEL_MIN_ROWS 128u

// The parcels of tensors walks of n rows with the given period: at most
// MAX_PARCELS in all. Every rank computes any rank's from values all ranks
// share.
__device__ __forceinline__ Parcels parcels_of(u32 n, u32 period, u32 tensors) {
    if (n == 0u) {
        return Parcels{1u, 0u};
    }
    const u32 most = MAX_PARCELS / tensors;
    u32 rows = max((n + most - 1u) / most, PARCEL_MIN_ROWS);
    rows = (rows + period - 1u) / period * period;
    return Parcels{rows, (n + rows - 1u) / rows};
}

// Rows of one warp's slots decode_landed holds at once (the decode
// launch's DECODE_ROWS made the exchange entries spill: 128 registers).
#define LANDED_ROWS 2

// Decodes the rows j0..j1-1 of tensor k of a peer's walk m that land on this
// rank (those pk picks), with every warp of the block, the way decode_wide
// does: from the codes and scale bytes the peer stored here during this
// launch, so read through L2 (__ldcg), not the non-coherent path. A
// decoded row's scale byte is set to 0, so that the decode launch leaves it.
template <int FMT, int OUT, typename Rows>
__device__ __forceinline__ void decode_landed(const Args &a, const Shared &sh, const Rows &m, u32 k, u32 j0, u32 j1, Picks pk) {
    const u32 D = a.head_units, G = wide_lanes(D);
    const u32 lane = threadIdx.x & 31u, gl = lane & (G - 1u), leader = lane & ~(G - 1u);
    const u32 warps = blockDim.x >> 5, per_warp = 32u / G, stride = warps * per_warp;
    const u32 count = (j1 - j0) / m.period * pk.run;
    u8 *half = reinterpret_cast<u8 *>(sh.data[a.rank]);
    u16 *out = reinterpret_cast<u16 *>(half + k * a.region);
    const u8 *codes = half + a.stage + k * a.stage_region;
    u8 *scales = half + a.scales + k * a.scale_region;
    for (u32 first = (threadIdx.x >> 5) * per_warp; first < count; first += LANDED_ROWS * stride) {
        u32 row[LANDED_ROWS], sb[LANDED_ROWS];
        uint2 c[LANDED_ROWS][WIDE_CHUNKS];
#pragma unroll
        for (int r = 0; r < LANDED_ROWS; r++) {
            const u32 i = first + r * stride + lane / G;
            RowDest d;
            bool ok = false;
            if (i < count) {
                const u32 per = i / pk.run;
                ok = m.locate(j0 + per * m.period + pk.off + (i - per * pk.run), d) && d.q0 <= a.rank && a.rank < d.q1 &&
                     d.row < a.wire_rows;
            }
            row[r] = ok ? d.row : 0u;
            // One lane of the row's group reads its scale byte and hands it
            // to the others (a lane that read it after the leader set it to
            // 0 would skip its part); the codes are read beside it, not
            // after it: every row of a landed parcel has its scale.
            const u32 mine = ok && gl == 0u ? static_cast<u32>(__ldcg(scales + d.row)) : 0u;
            if (ok) {
#pragma unroll
                for (int q = 0; q < WIDE_CHUNKS; q++) {
                    const u32 e = chunk_at(gl, q, G);
                    if (e < D) {
                        c[r][q] = __ldcg(reinterpret_cast<const uint2 *>(codes + static_cast<u64>(d.row) * D + e));
                    }
                }
            }
            sb[r] = __shfl_sync(0xFFFFFFFFu, mine, leader);
        }
        decode_held<FMT, OUT>(out, row, sb, c, gl, G, D);
#pragma unroll
        for (int r = 0; r < LANDED_ROWS; r++) {
            if (sb[r] != 0u && gl == 0u) {
                scales[row[r]] = 0;
            }
        }
    }
}

#define NO_ITEM 0xFFFFFFFFu

// Looks once, without waiting, whether the next item of column blockIdx.x
// of each peer's walk has landed here, and decodes those that have. Thread
// p < world looks for peer p and keeps its place in the column in next;
// pick holds what each found for the whole block. Returns whether any
// landed (the same in every thread).
template <int FMT, int OUT, typename Walk>
__device__ __forceinline__ bool decode_what_landed(const Args &a, const Shared &sh, u32 active, const Walk &walk_of, u32 *pick,
                                                   u32 &next) {
    const u32 p = threadIdx.x;
    if (p < a.world && p != a.rank) {
        const auto w = walk_of(p);
        const Parcels pc = parcels_of(w.n, w.period, a.tensors);
        const u32 g = blockIdx.x + next * active;
        u32 got = NO_ITEM;
        // Wrap-safe, as the flags: landed at this epoch (a peer cannot be
        // at the next one before this block has signalled its end).
        if (g < a.tensors * pc.per_tensor &&
            static_cast<int>(load_acquire_sys32(&signals_of(a, a.rank)->landed[p][g]) - sh.epoch) >= 0) {
            got = g;
            next++;
        }
        pick[p] = got;
    }
    __syncthreads();  // orders each looker's acquire before the block's reads of the parcel
    bool any = false;
    for (u32 q = 0; q < a.world; q++) {
        if (q == a.rank || pick[q] == NO_ITEM) {
            continue;
        }
        any = true;
        const auto w = walk_of(q);
        const Parcels pc = parcels_of(w.n, w.period, a.tensors);
        const u32 k = pick[q] / pc.per_tensor, j0 = (pick[q] - k * pc.per_tensor) * pc.rows;
        decode_landed<FMT, OUT>(a, sh, w, k, j0, min(w.n, j0 + pc.rows), w.picks(a.rank));
    }
    return any;
}

// The staged exchange on the wide path: this rank's walk sent in parcels,
// each followed by its landing words and a look for the peers' (above).
// walk_of(r) makes rank r's walk; this rank's is made again for each
// parcel rather than kept, so that it holds no registers while a landed
// parcel is decoded (kept, it made the kernels spill).
template <int FMT, int OUT, typename Walk>
__device__ __forceinline__ void exchange_parcels(const Args &a, const Shared &sh, u32 active, const Walk &walk_of) {
    __shared__ u32 pick[MAX_RANKS];
    const u32 p = threadIdx.x;
    u32 next = 0u;  // thread p < world: the items of peer p's column looked at so far
    for (u32 g = blockIdx.x;; g += active) {
        {
            const auto m = walk_of(a.rank);
            const Parcels pc = parcels_of(m.n, m.period, a.tensors);
            if (g >= a.tensors * pc.per_tensor) {
                break;
            }
            const u32 k = g / pc.per_tensor, j0 = (g - k * pc.per_tensor) * pc.rows;
            quantize_wide<FMT, OUT>(a, sh, m, k, j0, min(m.n, j0 + pc.rows), threadIdx.x >> 5, blockDim.x >> 5);
        }
        __syncthreads();  // the parcel's stores are issued before its landing words
        if (p < a.world && p != a.rank) {
            store_release_sys32(&signals_of(a, p)->landed[a.rank][g], sh.epoch);
        }
        decode_what_landed<FMT, OUT>(a, sh, active, walk_of, pick, next);
    }
    do {
        __syncthreads();  // every thread has read pick before it is written again
    } while (decode_what_landed<FMT, OUT>(a, sh, active, walk_of, pick, next));
}

// Every row of this rank's walk m sent to its destinations: in parcels,
// with the peers' rows decoded as they land, where the wide path stages;
// else in one pass over the walk, every block striding through it.
template <int FMT, int OUT, int EPL, typename Rows, typename Walk>
__device__ __forceinline__ void exchange_rows(const Args &a, const Shared &sh, u32 active, const Rows &m, const Walk &walk_of) {
    if (EPL == 8 && a.wire_mode == WIRE_LANDING && a.world > 1u) {
        exchange_parcels<FMT, OUT>(a, sh, active, walk_of);
    } else {
        quantize_tensors<FMT, OUT, EPL>(a, sh, active, m, m.n);
    }
}

template <int FMT, int OUT, int EPL>
__device__ __forceinline__ void send_recv_heads_wire(const Args &a) {
    __shared__ Shared sh;
    __shared__ int heads[MAX_RANKS + 1];
    if (threadIdx.x <= a.world) {
        heads[threadIdx.x] = a.heads[threadIdx.x];  // before begin's barrier
    }
    const u32 active = begin<true>(a, sh, true);
    if (active == 0u) {
        return;
    }
    const auto walk_of = [&](u32 r) { return send_recv_rows(a, sh, heads, r); };
    exchange_rows<FMT, OUT, EPL>(a, sh, active, walk_of(a.rank), walk_of);
    end(a, sh);
}

template <int FMT, int OUT, int EPL>
__device__ __forceinline__ void gather_heads_wire(const Args &a) {
    __shared__ Shared sh;
    const u32 active = begin<true>(a, sh, true);
    if (active == 0u) {
        return;
    }
    const auto walk_of = [&](u32 r) { return gather_rows(a, sh, r); };
    exchange_rows<FMT, OUT, EPL>(a, sh, active, walk_of(a.rank), walk_of);
    end(a, sh);
}

template <int FMT, int OUT, int EPL>
__device__ __forceinline__ void head_all_gather_wire(const Args &a) {
    __shared__ Shared sh;
    const u32 active = begin<true>(a, sh, true);
    if (active == 0u) {
        return;
    }
    const auto walk_of = [&](u32 r) { return head_gather_rows(a, sh, r); };
    exchange_rows<FMT, OUT, EPL>(a, sh, active, walk_of(a.rank), walk_of);
    end(a, sh);
}

template <int FMT, int OUT, int EPL>
__device__ __forceinline__ void all_gather_wire(const Args &a) {
    __shared__ Shared sh;
    const u32 active = begin<true>(a, sh, true);
    if (active == 0u) {
        return;
    }
    const auto walk_of = [&](u32 r) { return all_gather_rows(a, sh, r); };
    exchange_rows<FMT, OUT, EPL>(a, sh, active, walk_of(a.rank), walk_of);
    end(a, sh);
}

// ---- the decode -------------------------------------------------------------

// The decode of widths 8 and 2: element i of a tensor from code i and the
// scale byte of its row i / D, EPL elements a thread; elements of a row
// whose scale byte is 0 are in the output already.
template <int FMT, int OUT, int EPL>
__device__ __forceinline__ void decode_narrow(u16 *out, const u8 *codes, const u8 *scales, u32 D, u32 n) {
    const u32 step = gridDim.x * blockDim.x * EPL;
    // WIRE_UNROLL groups in flight per thread: all loads, then the
    // conversions and stores, as quantize_held does.
    for (u32 base = (blockIdx.x * blockDim.x + threadIdx.x) * EPL; base < n; base += WIRE_UNROLL * step) {
        u32 c[WIRE_UNROLL], sb[WIRE_UNROLL];
#pragma unroll
        for (int r = 0; r < WIRE_UNROLL; r++) {
            const u32 i = base + r * step;
            sb[r] = i < n ? __ldg(scales + i / D) : 0u;
        }
#pragma unroll
        for (int r = 0; r < WIRE_UNROLL; r++) {
            const u32 i = base + r * step;
            if (sb[r] != 0u) {
                c[r] = EPL == 4 ? __ldg(reinterpret_cast<const unsigned int *>(codes + i)) : __ldg(codes + i);
            }
        }
#pragma unroll
        for (int r = 0; r < WIRE_UNROLL; r++) {
            const u32 i = base + r * step;
            if (sb[r] == 0u) {
                continue;
            }
            const float p = pow2f(static_cast<int>(sb[r]) - 128);
            if (EPL == 4) {
                *reinterpret_cast<uint2 *>(out + i) = decode4<FMT, OUT>(c[r], p);
            } else {
                float lo, hi;
                decode2<FMT>(static_cast<u16>(c[r]), lo, hi);
                out[i] = static_cast<u16>(float_to_half<OUT>(lo * p));
            }
        }
    }
}

// Turns the staging area of the data half at half into the 16-bit outputs:
// element i of tensor k from code i and the scale byte of its row, for the
// rows of tokens tokens (this rank's, or all).
template <int FMT, int OUT, int EPL>
__device__ __forceinline__ void decode_half(const Args &a, u64 half, int tokens) {
    const u32 D = a.head_units;
    const u32 n = a.batch * static_cast<u32>(tokens) * a.out_heads * D;  // the host checks it fits
    for (u32 k = 0; k < a.tensors; k++) {
        u16 *out = reinterpret_cast<u16 *>(half + k * a.region);
        const u8 *codes = reinterpret_cast<const u8 *>(half + a.stage + k * a.stage_region);
        const u8 *scales = reinterpret_cast<const u8 *>(half + a.scales + k * a.scale_region);
        if (EPL == 8) {
            decode_wide<FMT, OUT>(out, codes, scales, D, n / D);
        } else {
            decode_narrow<FMT, OUT, EPL>(out, codes, scales, D, n);
        }
    }
}

// The output's tokens: this rank's (GatherHeads) or all.
__device__ __forceinline__ int out_tokens(const Args &a, const int *tokens, const int *prefix) {
    return a.out_rank_tokens != 0u ? tokens[a.rank] : prefix[a.world];
}

// Turns the staging area of the half the exchange just wrote into the
// 16-bit output (decode_half). Queued after the exchange entry: that launch
// has finished, its last block having seen every peer's signal, and it
// advanced the epoch to the operation's own, whose parity names the half. A
// failed exchange claimed the Comm; the decode then writes nothing. The
// token counts come from the Live table when the operation was captured.
template <int FMT, int OUT, int EPL>
__device__ __forceinline__ void wire_decode(const Args &a) {
    const State *st = reinterpret_cast<const State *>(a.state);
    if (*reinterpret_cast<const volatile u32 *>(&st->claimed) != 0u) {
        return;
    }
    const u32 e = st->epoch;
    const Live *live = reinterpret_cast<const Live *>(a.live);
    const int tokens = live != nullptr ? out_tokens(a, live->tokens, live->prefix) : out_tokens(a, a.tokens, a.prefix);
    decode_half<FMT, OUT, EPL>(a, a.data[a.rank] + ((e & 1u) ? a.half_bytes : 0ull), tokens);
}

// ---- a transport that sends the codes itself (NCCL) -------------------------
// No protocol here: the transport orders these launches around its own
// sends and receives on the stream. The pack quantizes every row of this
// rank's inputs, in their own order, into codes and scale bytes in a local
// area (data[0]: tensor k's codes at stage + k * stage_region, its scale
// bytes at scales + k * scale_region), which the transport sends as bytes
// to where the rows belong: the same places in each receiver's data half
// as the IPC exchange stores them. The unpack then decodes the data half
// at data[rank] as the decode launch does; every row there came as codes
// (this rank's own too), so every scale byte is set.

template <int FMT, int OUT, int EPL>
__device__ __forceinline__ void wire_pack(const Args &a) {
    __shared__ Shared sh;  // the stores (store_row, store_part, store_scale) write through sh.data
    if (threadIdx.x == 0u) {
        sh.data[0] = a.data[0];
    }
    __syncthreads();
    const PackRows m = pack_rows(a);
    quantize_tensors<FMT, OUT, EPL>(a, sh, gridDim.x, m, m.n);
}

template <int FMT, int OUT, int EPL>
__device__ __forceinline__ void wire_unpack(const Args &a) {
    decode_half<FMT, OUT, EPL>(a, a.data[a.rank], out_tokens(a, a.tokens, a.prefix));
}

// ---- entry points -----------------------------------------------------------
// ulysses_<op>_wire_<fmt>_<out>_v<W>: W = 16 is the wide path (D a multiple
// of 8, at most 1024; inputs and token strides 16-byte aligned), W = 8 reads
// 8-byte groups of 4 elements (D a multiple of 4, 8-byte alignment), W = 2
// one element at a time; ulysses_wire_pack_<fmt>_<out>_v<W> likewise.
// ulysses_wire_decode_<fmt>_<out>_v<W> and ulysses_wire_unpack_* by the head
// size alone (W = 16: D a multiple of 8, at most 1024; W = 8: a multiple
// of 4).

#define WIRE_ENTRY(OP, FMT, OUT, EPL, NAME) \
    extern "C" __global__ void __launch_bounds__(THREADS) NAME(const Args a) { OP<FMT, OUT, EPL>(a); }

#define WIRE_ENTRIES(FMT, OUT, F, O, EPL, W)                                                        \
    WIRE_ENTRY(send_recv_heads_wire, FMT, OUT, EPL, ulysses_send_recv_heads_wire_##F##_##O##_v##W) \
    WIRE_ENTRY(gather_heads_wire, FMT, OUT, EPL, ulysses_gather_heads_wire_##F##_##O##_v##W)       \
    WIRE_ENTRY(all_gather_wire, FMT, OUT, EPL, ulysses_all_gather_wire_##F##_##O##_v##W)           \
    WIRE_ENTRY(head_all_gather_wire, FMT, OUT, EPL, ulysses_head_all_gather_wire_##F##_##O##_v##W) \
    WIRE_ENTRY(wire_decode, FMT, OUT, EPL, ulysses_wire_decode_##F##_##O##_v##W)                   \
    WIRE_ENTRY(wire_pack, FMT, OUT, EPL, ulysses_wire_pack_##F##_##O##_v##W)                       \
    WIRE_ENTRY(wire_unpack, FMT, OUT, EPL, ulysses_wire_unpack_##F##_##O##_v##W)

#define WIRE_WIDTHS(FMT, OUT, F, O)         \
    WIRE_ENTRIES(FMT, OUT, F, O, 8, 16)     \
    WIRE_ENTRIES(FMT, OUT, F, O, 4, 8)      \
    WIRE_ENTRIES(FMT, OUT, F, O, 1, 2)

WIRE_WIDTHS(0, 0, e4m3, bf16)
WIRE_WIDTHS(0, 1, e4m3, fp16)
WIRE_WIDTHS(1, 0, e5m2, bf16)
WIRE_WIDTHS(1, 1, e5m2, fp16)
