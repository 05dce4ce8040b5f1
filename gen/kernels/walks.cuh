// Where each input vector of an exact operation goes, and the loop that
// moves them: included by ulysses.cu after the vector types. The fp8
// wire's walks (wire.cuh) divide and place heads with the helpers here.
//
// A walk is a grid-stride loop over the vectors of the input; a map's
// route tells where vector j is read from and written to. Each vector's
// place is found by dividing its index by the walk's fixed sizes (vectors
// per chunk, ranks, tokens), so those divisions are most of a copy's
// instructions: they are multiplications by divisors made once per block.

#pragma once

// ---- division by a fixed divisor --------------------------------------------

// Division by a divisor fixed for a walk, in a multiplication and a shift
// (Granlund and Montgomery, "Division by invariant integers using
// multiplication", 1994): with l = ceil(log2 d) and
// mul = floor(2^32 * (2^l - d) / d) + 1, n / d = (umulhi(n, mul) + n) >> l
// for every 32-bit n and every d >= 1 (the sum taken in 64 bits). The
// hardware's division is a dozen instructions a quotient, this one four.
// divisor_of(0) divides by 1: a walk of no vectors never divides.
struct Divisor {
    u32 d, mul, shift;
    __device__ u32 div(u32 n) const { return static_cast<u32>((static_cast<u64>(__umulhi(n, mul)) + n) >> shift); }
    __device__ u32 rem(u32 n) const { return n - div(n) * d; }
};

// About a hundred dependent instructions (a 64-bit division): made once
// per block, never per vector. internal/plan's DivisorOf makes the same on
// the host.
__device__ __forceinline__ Divisor divisor_of(u32 d) {
    Divisor v;
    v.d = max(d, 1u);
    v.shift = 32u - static_cast<u32>(__clz(v.d - 1u));
    v.mul = static_cast<u32>((((1ull << v.shift) - v.d) << 32) / v.d + 1ull);
    return v;
}

// The divisors of the exact walks, by what they divide by.
#define DIV_UNITS 0u        // a.units: vectors per chunk or row
#define DIV_WORLD 1u        // ranks
#define DIV_RANK_TOKENS 2u  // this rank's tokens
#define DIV_MOST 3u         // the most tokens any rank has
#define DIV_HEAD_UNITS 4u   // vectors per head (general entries)
#define DIV_BASE 5u         // H / P: the heads of a rank past the first H mod P
#define DIV_BASE1 6u        // H / P + 1: those of the first H mod P ranks
#define DIVISORS 7u

// Makes the walk's divisors into div, one per lane of the block's second
// warp, all at once: a caller runs it before begin, whose barrier
// publishes them, so that its latency runs beside begin's loads. A
// captured operation's divisions by its token counts come made from the
// Live table (the host made them with the counts, which begin reads from
// the same table): made here after reading the counts, they ran past
// begin's loads.
template <bool CAPTURED>
__device__ __forceinline__ void divide_ahead(const Args &a, Divisor *div) {
    const u32 lane = threadIdx.x - 32u;  // wraps for the first warp
    if (lane >= DIVISORS) {
        return;
    }
    const Live *live = CAPTURED ? reinterpret_cast<const Live *>(a.live) : nullptr;  // the general entries: null unless captured
    if (live != nullptr && (lane == DIV_RANK_TOKENS || lane == DIV_MOST)) {
        const volatile u32 *w = live->token_div[lane == DIV_MOST ? TOKEN_DIV_MOST : TOKEN_DIV_RANK];
        div[lane] = Divisor{w[0], w[1], w[2]};
        return;
    }
    u32 d = a.units;
    if (lane == DIV_WORLD) {
        d = a.world;
    } else if (lane == DIV_RANK_TOKENS || lane == DIV_MOST) {
        u32 most = 0u, mine = 0u;
        for (u32 q = 0; q < a.world; q++) {
            const u32 t = static_cast<u32>(a.tokens[q]);
            most = max(most, t);
            mine = q == a.rank ? t : mine;
        }
        d = lane == DIV_MOST ? most : mine;
    } else if (lane == DIV_HEAD_UNITS) {
        d = a.head_units;
    } else if (lane >= DIV_BASE) {
        d = static_cast<u32>(a.heads[a.world]) / a.world + (lane - DIV_BASE);
    }
    div[lane] = divisor_of(d);
}

// ---- where each input vector goes -------------------------------------------

// Where one vector is read (from, in vectors from the map's src) and
// written (to, in vectors from a data half's start, at rank q; the
// gathers to every rank write the same place at each).
struct Route {
    u64 from, to;
    u32 q;
};

// What every map holds: its input, the destinations and the bound.
template <typename V>
struct MapBase {
    const V *src;
    const u64 *dst;  // Shared::data
    u64 limit;       // vectors in one data half: only ranks that disagree on the counts could go past it
    __device__ void store(const Route &r, const V &v) const { reinterpret_cast<V *>(dst[r.q])[r.to] = v; }
};

// The maps that write each vector to every rank.
template <typename V>
struct GatherMapBase : MapBase<V> {
    u32 world;
    __device__ void store(const Route &r, const V &v) const {
        for (u32 q = 0; q < world; q++) {
            reinterpret_cast<V *>(this->dst[q])[r.to] = v;
        }
    }
};

// SendRecvHeads. Input [B, T_r, H, D] read in order (b, t, q, v): chunk
// c = (b*T_r + t)*P + q holds heads q*Hp.. of token t, and goes to rank q at
// token p_r + t of its [B, T, Hp, D] output. The input is read linearly and
// consecutive chunks go to different ranks, so every block spreads its
// stores over all links.
template <typename V>
struct SendRecvHeadsMap : MapBase<V> {
    Divisor units, world, rank_tokens;
    u32 total_tokens, rank_prefix;
    __device__ bool route(u32 j, Route &r) const {
        const u32 c = units.div(j), u = j - c * units.d;
        const u32 row = world.div(c);
        const u32 b = rank_tokens.div(row), t = row - b * rank_tokens.d;
        r.q = c - row * world.d;
        r.from = j;
        r.to = (static_cast<u64>(b) * total_tokens + rank_prefix + t) * units.d + u;
        return r.to < this->limit;
    }
};

// Where vector j of GatherHeads' walk lies: chunk c = j / units of
// this rank's heads of one token, taken in the order (b, k, r) (below).
struct GatherIndex {
    u32 b, k, r, u;
};

__device__ __forceinline__ GatherIndex gather_index(u32 j, const Divisor &units, const Divisor &world, const Divisor &max_tokens) {
    GatherIndex g;
    const u32 c = units.div(j);
    g.u = j - c * units.d;
    g.r = world.rem(c);
    const u32 bk = world.div(c);
    g.b = max_tokens.div(bk);
    g.k = bk - g.b * max_tokens.d;
    return g;
}

// GatherHeads. Input [B, T, Hp, D]: token t holds this rank's heads of a
// token owned by the rank r with p_r <= t < p_r + T_r, and goes to token
// t - p_r, heads rank*Hp.. of r's [B, T_r, H, D] output. To keep every
// link busy all the time, chunks are taken in the order (b, k, r) -- the
// k-th token of each rank in turn -- rather than in input order, which would
// copy all of one rank's tokens before the next's. With uneven counts some
// (k, r) have no token (k >= T_r): those indices are skipped.
template <typename V>
struct GatherHeadsMap : MapBase<V> {
    const int *tokens;
    const int *prefix;
    Divisor units, world, max_tokens;
    u32 rank, total_tokens;
    __device__ bool route(u32 j, Route &r) const {
        const GatherIndex g = gather_index(j, units, world, max_tokens);
        const u32 rt = static_cast<u32>(tokens[g.r]);
        r.q = g.r;
        r.from = (static_cast<u64>(g.b) * total_tokens + prefix[g.r] + g.k) * units.d + g.u;
        r.to = ((static_cast<u64>(g.b) * rt + g.k) * world.d + rank) * units.d + g.u;
        return g.k < rt && r.to < this->limit;
    }
};

// AllGather. Input [B, T_r, H, D] read in order (b, t, v); token row (b, t)
// goes to row (b, p_r + t) of every rank's [B, T, H, D] output.
template <typename V>
struct AllGatherMap : GatherMapBase<V> {
    Divisor units, rank_tokens;
    u32 total_tokens, rank_prefix;
    __device__ bool route(u32 j, Route &r) const {
        const u32 row = units.div(j), u = j - row * units.d;
        const u32 b = rank_tokens.div(row), t = row - b * rank_tokens.d;
        r.from = j;
        r.to = (static_cast<u64>(b) * total_tokens + rank_prefix + t) * units.d + u;
        return r.to < this->limit;
    }
};

// ---- the general head operations --------------------------------------------
// Heads split unevenly (rank q holds heads heads[q]..heads[q+1]-1: H/P
// each, one more on the first H mod P ranks), inputs whose tokens are
// in_row vectors apart, and several tensors of one shape, tensor k's
// output region vectors after tensor k-1's. One head is head_units vectors.

// The rank holding head h: the first `extra` ranks hold base+1 heads
// (base1), the others base.
__device__ __forceinline__ u32 head_owner(u32 h, const Divisor &base1, const Divisor &base, u32 extra) {
    const u32 boundary = extra * base1.d;
    return h < boundary ? base1.div(h) : extra + base.div(h - boundary);
}

// SendRecvHeads, general. Input [B, T_r, H, D] (tokens in_row apart) read
// in order (b, t, h, v): head h of token t goes to rank q = head_owner(h),
// token p_r + t, head h - heads[q] of its [B, T, H_q, D] output. As in
// SendRecvHeadsMap, consecutive heads go to ranks in turn.
template <typename V>
struct GeneralSendMap : MapBase<V> {
    const int *heads;
    u64 region;  // vectors
    Divisor row_units, head_units, base, base1, rank_tokens;
    u32 in_row, extra, total_tokens, rank_prefix;
    __device__ bool route(u32 j, Route &r) const {
        const u32 row = row_units.div(j), col = j - row * row_units.d;
        const u32 h = head_units.div(col), u = col - h * head_units.d;
        const u32 q = head_owner(h, base1, base, extra);
        const u32 first = static_cast<u32>(heads[q]), count = static_cast<u32>(heads[q + 1]) - first;
        const u32 b = rank_tokens.div(row), t = row - b * rank_tokens.d;
        r.q = q;
        r.from = static_cast<u64>(row) * in_row + col;
        r.to = region + ((static_cast<u64>(b) * total_tokens + rank_prefix + t) * count + (h - first)) * head_units.d + u;
        return r.to < this->limit;
    }
};

// GatherHeads, general. Input [B, T, H_rank, D] (tokens in_row apart),
// walked in GatherHeadsMap's order (b, k, r): token p_r + k goes to token k
// of rank r's [B, T_r, H, D] output, heads heads[rank].. of it. units is
// this rank's heads times head_units; out_row is H * head_units.
template <typename V>
struct GeneralGatherMap : MapBase<V> {
    const int *tokens;
    const int *prefix;
    u64 region;  // vectors
    Divisor units, world, max_tokens;
    u32 in_row, out_row, col, total_tokens;
    __device__ bool route(u32 j, Route &r) const {
        const GatherIndex g = gather_index(j, units, world, max_tokens);
        const u32 rt = static_cast<u32>(tokens[g.r]);
        r.q = g.r;
        r.from = (static_cast<u64>(g.b) * total_tokens + prefix[g.r] + g.k) * in_row + g.u;
        r.to = region + (static_cast<u64>(g.b) * rt + g.k) * out_row + col + g.u;
        return g.k < rt && r.to < this->limit;
    }
};

// HeadAllGather. Input [B, T, H_rank, D] (tokens in_row apart) read in
// order (b, t, v); row (b, t) goes to heads heads[rank].. of row (b, t) of
// every rank's [B, T, H, D] output.
template <typename V>
struct HeadAllGatherMap : GatherMapBase<V> {
    u64 region;  // vectors
    Divisor units;
    u32 in_row, out_row, col;
    __device__ bool route(u32 j, Route &r) const {
        const u32 row = units.div(j), u = j - row * units.d;
        r.from = static_cast<u64>(row) * in_row + u;
        r.to = region + static_cast<u64>(row) * out_row + col + u;
        return r.to < this->limit;
    }
};

// ---- the copy loop ----------------------------------------------------------

// Grid-stride over n vectors with the `active` blocks, UNROLL loads in
// flight per thread before the stores. One pass of the grid covers a
// contiguous window, so each warp's loads and stores are coalesced, and
// every block sees every destination. Each vector is routed once: its
// load and its store share the division.
template <typename V, typename Map>
__device__ __forceinline__ void copy_vectors(u32 n, u32 active, const Map &m) {
    const u32 stride = active * blockDim.x;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += UNROLL * stride) {
        V v[UNROLL];
        Route r[UNROLL];
        bool ok[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
            const u32 j = i + k * stride;
            // Every route is computed, past n too (each map's indices stay
            // in their tables' bounds for any j): with a branch around it
            // ptxas 11.8 wrapped each vector in a BSSY/BSYNC region, 49
            // instructions a vector in SendRecvHeads' 16-byte entry
            // against 41 (not timed apart).
            ok[k] = m.route(j, r[k]) & (j < n);
            if (ok[k]) {
                v[k] = load_input(m.src + r[k].from);
            }
        }
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
            if (ok[k]) {
                m.store(r[k], v[k]);
            }
        }
    }
}
