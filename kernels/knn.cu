// k nearest neighbours on the GPU: a grid searched ring by ring (low d) and a per-row
// top-k over cuBLAS distance tiles with a float64 re-check (high d).
//
// Every final decision is made on float64 values computed as the reference computes
// them (explorer/graph/_reference.py): squared distances accumulated feature by feature
// from the float32 data widened to double, cosines as dot / (|a| |b|) clipped to
// [-1, 1], with explicitly rounded operations (__dadd_rn, __dmul_rn: no fused
// multiply-add), ties broken by the lower index. Lists are kept sorted ascending by
// (key, index) in per-thread arrays of KMAX entries (a compile-time bound on k).
//
// Defines: KMAX (list capacity, >= k), DC (grid kernel: cell dimensions, 1..3),
// TILE_HALF (the tile kernels read fp16 tiles instead of float32 ones).

#ifndef KMAX
#define KMAX 16
#endif

// One similarity of a cuBLAS tile, as float32 (an fp16 value converts exactly).
#ifdef TILE_HALF
typedef unsigned short tile_t;
__device__ __forceinline__ float tile_value(tile_t h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
#else
typedef float tile_t;
__device__ __forceinline__ float tile_value(tile_t v) { return v; }
#endif

#define KNN_INF __longlong_as_double(0x7ff0000000000000LL)
#define KNN_NONE 0x7fffffffffffffffLL

__device__ __forceinline__ bool pair_less(double a, long long ia, double b, long long ib) {
    return a < b || (a == b && ia < ib);
}

// Insert (v, j) into the sorted list (kv, ki) of `cnt` entries, capacity K.
template <typename T>
__device__ __forceinline__ void list_insert(T* kv, long long* ki, int& cnt, int K, T v,
                                            long long j) {
    if (cnt == K && !pair_less((double)v, j, (double)kv[K - 1], ki[K - 1])) return;
    int p = cnt < K ? cnt : K - 1;
    while (p > 0 && pair_less((double)v, j, (double)kv[p - 1], ki[p - 1])) {
        kv[p] = kv[p - 1];
        ki[p] = ki[p - 1];
        --p;
    }
    kv[p] = v;
    ki[p] = j;
    if (cnt < K) ++cnt;
}

// The reference's squared distance of rows a and b of X (n × d, float32).
__device__ __forceinline__ double sqdist64(const float* __restrict__ X, long long a,
                                           long long b, int d) {
    const float* xa = X + a * d;
    const float* xb = X + b * d;
    double acc = 0.0;
    for (int f = 0; f < d; ++f) {
        double t = __dsub_rn((double)xa[f], (double)xb[f]);
        acc = __dadd_rn(acc, __dmul_rn(t, t));
    }
    return acc;
}

__device__ __forceinline__ double dot64(const float* __restrict__ X, long long a, long long b,
                                        int d) {
    const float* xa = X + a * d;
    const float* xb = X + b * d;
    double acc = 0.0;
    for (int f = 0; f < d; ++f) acc = __dadd_rn(acc, __dmul_rn((double)xa[f], (double)xb[f]));
    return acc;
}

#ifdef DC
// One thread per point (in cell order): visit the cells at Chebyshev cell distance
// r = 0, 1, 2, ... around the point's cell until the k-th best squared distance is
// below (r h)^2, the least any point of an unvisited cell can have (its coordinate in
// some cell dimension differs by more than r h); then no unvisited point can be nearer
// or tie. Cells: `dims` per dimension, row-major ids, `start` the offsets of each cell's
// points in the cell-ordered arrays.
extern "C" __global__ void knn_grid(const float* __restrict__ Xs,
                                    const long long* __restrict__ perm,
                                    const int* __restrict__ cellc,
                                    const long long* __restrict__ start,
                                    int dim0, int dim1, int dim2, int n, int d, int K,
                                    double h, long long* __restrict__ out_idx,
                                    double* __restrict__ out_val) {
    int q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= n) return;
    const int dims[3] = {dim0, dim1, dim2};
    int home[3] = {0, 0, 0};
    for (int a = 0; a < DC; ++a) home[a] = cellc[(long long)q * DC + a];
    int reach = 0;  // rings needed to cover every cell
    for (int a = 0; a < DC; ++a) {
        int far = max(home[a], dims[a] - 1 - home[a]);
        reach = max(reach, far);
    }
    double kv[KMAX];
    long long ki[KMAX];
    int cnt = 0;
    const long long self = perm[q];
    for (int r = 0; r <= reach; ++r) {
        int lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
        for (int a = 0; a < DC; ++a) {
            lo[a] = -r;
            hi[a] = r;
        }
        for (int o0 = lo[0]; o0 <= hi[0]; ++o0) {
            int c0 = home[0] + o0;
            if (c0 < 0 || c0 >= dims[0]) continue;
            for (int o1 = lo[1]; o1 <= hi[1]; ++o1) {
                int c1 = home[1] + o1;
                if (DC > 1 && (c1 < 0 || c1 >= dims[1])) continue;
                bool edge01 = abs(o0) == r || (DC > 1 && abs(o1) == r);
                int step2 = (DC > 2 && !edge01 && r > 0) ? 2 * r : 1;
                for (int o2 = lo[2]; o2 <= hi[2]; o2 += step2) {
                    int c2 = home[2] + o2;
                    if (DC > 2 && (c2 < 0 || c2 >= dims[2])) continue;
                    if (DC <= 2 && !edge01) continue;  // an inner cell of an earlier ring
                    long long cell = c0;
                    if (DC > 1) cell = cell * dims[1] + c1;
                    if (DC > 2) cell = cell * dims[2] + c2;
                    long long e = start[cell + 1];
                    for (long long p = start[cell]; p < e; ++p) {
                        long long j = perm[p];
                        if (j == self) continue;
                        double v = sqdist64(Xs, q, p, d);
                        list_insert<double>(kv, ki, cnt, K, v, j);
                    }
                }
            }
        }
        double bound = (double)r * h;
        bound = bound * bound * (1.0 - 1e-6);
        if (cnt == K && kv[K - 1] < bound) break;
    }
    long long base = self * K;
    for (int t = 0; t < K; ++t) {
        out_idx[base + t] = t < cnt ? ki[t] : -1LL;
        out_val[base + t] = t < cnt ? kv[t] : __longlong_as_double(0x7ff8000000000000LL);
    }
}
#endif

// One warp per row of a similarity tile G (rows × ldg, float32 or fp16 (TILE_HALF), from
// cuBLAS): the C best columns by the float32 key (squared distance sq_i + sq_j - 2 g_ij,
// or -g_ij for cosines of unit rows; g_ij the tile's value times `scale`, a power of two
// that undoes the scaling of fp16 operands, so exact), ties by the lower column. Each lane keeps its own sorted list
// of its KMAX best among the columns lane, lane + 32, ... in registers (columns come
// ascending, so a later column never wins a tie against a listed one); C rounds of a
// warp-wide minimum merge the 32 lists. Rows and columns with
// valid == 0 (zero vectors under cosine; valid may be null: all valid) and the
// diagonal never enter. Out: rows × C columns, -1 padded, and each row's cut: the key of
// its C-th candidate (+inf where that place is padding), so that every column left out
// has a key >= the cut (NaN where a left-out key overflowed or is NaN).
extern "C" __global__ void knn_tile_topk(const tile_t* __restrict__ G, long long ldg, int rows,
                                         long long n, long long r0,
                                         const float* __restrict__ sq, float scale,
                                         const unsigned char* __restrict__ valid, int C,
                                         long long* __restrict__ out,
                                         float* __restrict__ cut,
                                         const int* __restrict__ only) {
    long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (warp >= rows) return;  // whole warps leave together
    if (only != nullptr && only[warp] == 0) return;  // rows knn_tile_select settled
    long long row = r0 + warp;
    const tile_t* g = G + warp * ldg;
    const float inf = __int_as_float(0x7f800000);
    // The lane's KMAX best, ascending, in registers: every index below is static.
    float kv[KMAX];
    long long ki[KMAX];
#pragma unroll
    for (int p = 0; p < KMAX; ++p) {
        kv[p] = inf;
        ki[p] = KNN_NONE;
    }
    bool wild = false;
    if (valid == nullptr || valid[row]) {
        float sqi = sq != nullptr ? sq[row] : 0.0f;
        for (long long j = lane; j < n; j += 32) {
            float gj = tile_value(g[j]) * scale;
            float key = sq != nullptr ? (sqi + sq[j]) - 2.0f * gj : -gj;
            if (!(key < kv[KMAX - 1])) {
                wild |= !(key < inf);  // overflow or NaN: a column the cut cannot bound
                continue;
            }
            if (j == row) continue;
            if (valid != nullptr && !valid[j]) continue;
            float cv = key;
            long long cj = j;
#pragma unroll
            for (int p = 0; p < KMAX; ++p) {  // strict: an equal key listed earlier stays first
                bool sw = cv < kv[p];
                float tv = sw ? kv[p] : cv;
                long long tj = sw ? ki[p] : cj;
                kv[p] = sw ? cv : kv[p];
                ki[p] = sw ? cj : ki[p];
                cv = tv;
                cj = tj;
            }
        }
    }
    for (int t = 0; t < C; ++t) {
        float bv = kv[0];
        long long bj = ki[0];
        for (int off = 16; off > 0; off >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, bv, off);
            long long oj = __shfl_xor_sync(0xffffffffu, bj, off);
            if (ov < bv || (ov == bv && oj < bj)) {
                bv = ov;
                bj = oj;
            }
        }
        if (bj != KNN_NONE && ki[0] == bj) {  // the winning lane pops its head
#pragma unroll
            for (int p = 0; p + 1 < KMAX; ++p) {
                kv[p] = kv[p + 1];
                ki[p] = ki[p + 1];
            }
            kv[KMAX - 1] = inf;
            ki[KMAX - 1] = KNN_NONE;
        }
        if (lane == 0) out[warp * C + t] = bj == KNN_NONE ? -1LL : bj;
        if (lane == 0 && t == C - 1) cut[warp] = bj == KNN_NONE ? inf : bv;
    }
    if (__any_sync(0xffffffffu, wild) && lane == 0) {
        cut[warp] = __int_as_float(0x7fffffff);  // NaN: the row is not settled by its cut
    }
}

#ifndef SELECT_CAP
#define SELECT_CAP 512
#endif
#define SELECT_GROUPS 8  // group minima per lane: 256 strided groups a row
#define SELECT_SAMPLE 4  // the threshold pass reads one round in 4 (long rows)
#define SELECT_UNROLL 2  // rounds whose loads are issued together
#define VEC (16 / (int)sizeof(tile_t))  // columns a lane reads at once: one 16-byte load

// Order-preserving map of a float32 onto uint32 (NaN never reaches it).
__device__ __forceinline__ unsigned int float_order(float v) {
    unsigned int b = __float_as_uint(v);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// The VEC tile values at p (16-byte aligned) as float32, times scale (exact).
__device__ __forceinline__ void tile_load(const tile_t* p, float scale, float* v) {
    uint4 w = __ldg(reinterpret_cast<const uint4*>(p));
    unsigned int ws[4] = {w.x, w.y, w.z, w.w};
#ifdef TILE_HALF
#pragma unroll
    for (int m = 0; m < 4; ++m) {
        v[2 * m] = tile_value((unsigned short)(ws[m] & 0xffffu)) * scale;
        v[2 * m + 1] = tile_value((unsigned short)(ws[m] >> 16)) * scale;
    }
#else
#pragma unroll
    for (int m = 0; m < 4; ++m) v[m] = __uint_as_float(ws[m]) * scale;
#endif
}

// The keys of the VEC columns j0 .. j0 + VEC - 1 (sq padded to a multiple of VEC).
__device__ __forceinline__ void tile_keys(const tile_t* g, const float* __restrict__ sq,
                                          float sqi, float scale, long long j0, float* key) {
    tile_load(g + j0, scale, key);
    if (sq != nullptr) {
#pragma unroll
        for (int m = 0; m < VEC; m += 4) {
            float4 s4 = __ldg(reinterpret_cast<const float4*>(sq + j0 + m));
            key[m] = (sqi + s4.x) - 2.0f * key[m];
            key[m + 1] = (sqi + s4.y) - 2.0f * key[m + 1];
            key[m + 2] = (sqi + s4.z) - 2.0f * key[m + 2];
            key[m + 3] = (sqi + s4.w) - 2.0f * key[m + 3];
        }
    } else {
#pragma unroll
        for (int m = 0; m < VEC; ++m) key[m] = -key[m];
    }
}

// The C best columns of each tile row by (float32 key, index), as knn_tile_topk lists
// them, in three steps over one warp per row (C <= 64 <= 256 groups). A round is
// 32 × VEC consecutive columns, VEC of them a lane's (one 16-byte load; the tile's
// rows and sq are padded to a multiple of VEC: ldg % VEC == 0).
// 1. a bound: the columns of the sampled rounds (one in SELECT_SAMPLE, or every round
//    of a row too short to give 256 groups so) fall into 256 groups (lane, sampled
//    round mod SELECT_GROUPS); tau is the C-th least of the groups' least keys. Those C
//    minima are C distinct eligible columns with keys <= tau, so at least C columns of
//    the row have a key <= tau;
// 2. every eligible column with key <= tau goes to the warp's buffer in shared memory
//    (SELECT_CAP entries; more sets only[warp] = 1 and knn_tile_topk lists the row);
// 3. each buffered column's rank by (key, index) among the buffer places it: the C
//    least are the row's C best, the C-th key its cut.
// Eligible: not the row itself, valid (cosine), key finite; a non-finite key makes
// the cut NaN (the row is not settled by its cut), as in knn_tile_topk.
extern "C" __global__ void knn_tile_select(const tile_t* __restrict__ G, long long ldg,
                                           int rows, long long n, long long r0,
                                           const float* __restrict__ sq, float scale,
                                           const unsigned char* __restrict__ valid, int C,
                                           long long* __restrict__ out,
                                           float* __restrict__ cut,
                                           int* __restrict__ only) {
    extern __shared__ unsigned char select_smem[];
    int wib = threadIdx.x >> 5;
    float* bkey = (float*)select_smem + (long long)wib * SELECT_CAP * 2;
    int* bidx = (int*)(bkey + SELECT_CAP);
    long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (warp >= rows) return;  // whole warps leave together
    long long row = r0 + warp;
    const tile_t* g = G + warp * ldg;
    const float inf = __int_as_float(0x7f800000);
    const unsigned int full = 0xffffffffu;
    const long long span = 32LL * VEC;  // columns a round
    long long rounds = (n + span - 1) / span;
    bool live = valid == nullptr || valid[row];
    float sqi = (sq != nullptr && live) ? sq[row] : 0.0f;
    // 1. the bound tau
    float gmin[SELECT_GROUPS];
#pragma unroll
    for (int q = 0; q < SELECT_GROUPS; ++q) gmin[q] = inf;
    long long step = rounds >= (long long)SELECT_SAMPLE * SELECT_GROUPS ? SELECT_SAMPLE : 1;
    if (live) {
        for (long long t = 0; t < rounds; t += step) {
            long long j0 = t * span + (long long)lane * VEC;
            if (j0 >= n) continue;
            float key[VEC];
            tile_keys(g, sq, sqi, scale, j0, key);
            float m = inf;
#pragma unroll
            for (int v = 0; v < VEC; ++v) {
                long long j = j0 + v;
                bool ok = j < n && j != row && key[v] < inf &&
                          (valid == nullptr || valid[j]);
                if (ok) m = fminf(m, key[v]);
            }
            int q = (int)((t / step) & (SELECT_GROUPS - 1));
#pragma unroll
            for (int p = 0; p < SELECT_GROUPS; ++p)
                if (p == q) gmin[p] = fminf(gmin[p], m);
        }
    }
    // The C-th least of the 32 * SELECT_GROUPS minima, bit by bit from the top.
    unsigned int prefix = 0u;
    int below = 0;  // minima whose order is < the prefix found so far
    for (int bit = 31; bit >= 0; --bit) {
        unsigned int hi_mask = bit == 31 ? 0u : (0xffffffffu << (bit + 1));
        int count = 0;
#pragma unroll
        for (int p = 0; p < SELECT_GROUPS; ++p) {
            unsigned int o = float_order(gmin[p]);
            count += ((o & hi_mask) == prefix && ((o >> bit) & 1u) == 0u) ? 1 : 0;
        }
        for (int off = 16; off > 0; off >>= 1) count += __shfl_xor_sync(full, count, off);
        if (below + count >= C) {
            // the C-th has this bit 0
        } else {
            below += count;
            prefix |= 1u << bit;
        }
    }
    // prefix is the order of the C-th least minimum; +inf when fewer than C are finite.
    float tau = __uint_as_float((prefix & 0x80000000u) ? (prefix & 0x7fffffffu) : ~prefix);
    // 2. the buffer of every eligible column with key <= tau
    int cnt = 0;
    bool wild = false;
    for (long long t0 = 0; t0 < rounds; t0 += SELECT_UNROLL) {
        float key[SELECT_UNROLL][VEC];
#pragma unroll
        for (int u = 0; u < SELECT_UNROLL; ++u) {
            long long j0 = (t0 + u) * span + (long long)lane * VEC;
            if (j0 < n) {
                tile_keys(g, sq, sqi, scale, j0, key[u]);
            } else {
#pragma unroll
                for (int v = 0; v < VEC; ++v) key[u][v] = inf;
            }
        }
#pragma unroll
        for (int u = 0; u < SELECT_UNROLL; ++u) {
            long long j0 = (t0 + u) * span + (long long)lane * VEC;
            unsigned int low = 0u;  // the lane's columns at or below tau
#pragma unroll
            for (int v = 0; v < VEC; ++v) {
                bool in = j0 + v < n;
                wild |= live && in && !(key[u][v] < inf);
                low |= (in && key[u][v] <= tau) ? (1u << v) : 0u;
            }
            if (!live || !__any_sync(full, low != 0u)) continue;
#pragma unroll
            for (int v = 0; v < VEC; ++v) {
                long long j = j0 + v;
                bool take = ((low >> v) & 1u) && key[u][v] < inf && j != row &&
                            (valid == nullptr || valid[j]);
                unsigned int ballot = __ballot_sync(full, take);
                if (take) {
                    int pos = cnt + __popc(ballot & ((1u << lane) - 1u));
                    if (pos < SELECT_CAP) {
                        bkey[pos] = key[u][v];
                        bidx[pos] = (int)j;
                    }
                }
                cnt += __popc(ballot);
            }
        }
    }
    wild = __any_sync(full, wild);
    if (cnt > SELECT_CAP) {  // too many at the bound (ties): the lists kernel decides
        if (lane == 0) only[warp] = 1;
        return;
    }
    if (lane == 0) only[warp] = 0;
    __syncwarp();
    // 3. ranks within the buffer
    for (int e = lane; e < cnt; e += 32) {
        float v = bkey[e];
        int j = bidx[e];
        int rank = 0;
        for (int f = 0; f < cnt; ++f) {
            float w = bkey[f];
            rank += (w < v || (w == v && bidx[f] < j)) ? 1 : 0;
        }
        if (rank < C) out[warp * C + rank] = (long long)j;
        if (rank == C - 1) cut[warp] = wild ? __int_as_float(0x7fffffff) : v;
    }
    for (int r = cnt + lane; r < C; r += 32) out[warp * C + r] = -1LL;
    if (cnt < C && lane == 0) cut[warp] = wild ? __int_as_float(0x7fffffff) : inf;
}

// The float64 reference key of the pair (i, j): the squared distance, or minus the
// cosine (+inf for a zero vector). norms: the reference's float64 row norms (cosine).
__device__ __forceinline__ double ref_key(const float* __restrict__ X, int d, long long i,
                                          long long j, int cosine,
                                          const double* __restrict__ norms) {
    if (!cosine) return sqdist64(X, i, j, d);
    double den = __dmul_rn(norms[i], norms[j]);
    if (den == 0.0) return KNN_INF;  // a zero vector is nobody's neighbour
    double cs = __ddiv_rn(dot64(X, i, j, d), den);
    return -fmin(fmax(cs, -1.0), 1.0);
}

// One thread per candidate pair (row t of the block, its c-th candidate): the float64
// reference key (squared distance, or minus the cosine; +inf for no candidate or a
// zero vector). norms: the reference's float64 row norms (cosine only).
extern "C" __global__ void knn_pair_keys(const float* __restrict__ X, int d, long long r0,
                                         int rows, const long long* __restrict__ cand, int C,
                                         int cosine, const double* __restrict__ norms,
                                         double* __restrict__ keys) {
    long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (long long)rows * C) return;
    long long i = r0 + e / C;
    long long j = cand[e];
    keys[e] = j >= 0 ? ref_key(X, d, i, j, cosine, norms) : KNN_INF;
}

// Write row i's list (kv, ki) of cnt entries as K outputs: values are squared distances
// or cosines (keys negated back), -1 / NaN padded.
__device__ __forceinline__ void write_row(long long i, const double* kv, const long long* ki,
                                          int cnt, int K, int cosine,
                                          long long* __restrict__ out_idx,
                                          double* __restrict__ out_val) {
    for (int s = 0; s < K; ++s) {
        out_idx[i * K + s] = s < cnt ? ki[s] : -1LL;
        double v = s < cnt ? kv[s] : __longlong_as_double(0x7ff8000000000000LL);
        out_val[i * K + s] = (cosine && s < cnt) ? -v : v;
    }
}

// One thread per row: the K best of its C candidates by (key, index), from the keys of
// knn_pair_keys, and whether they are the row's K best of all points. They are when
// every candidate list is complete (`complete`: C = n - 1, and the cut is not NaN), when the cut is padding
// under cosine (every valid column is a candidate: cosine keys never overflow), or when
// the K-th exact key is below cut[t] - slack[i]: slack[i] bounds the difference between
// the float32 keys of the tile and the reference's keys of row i, so every column left
// out (float32 key >= cut) is then strictly farther than the K-th. Unsettled rows are
// appended to `pending` (count in n_pending[0]). Out rows are global rows.
// The least float64 squared distance a column left out of row i's candidates can
// have (its tile key >= cut), over every column norm r <= M:
//   h1(r) = cut - safety (ca a r + cb (a + r)^2 + cl (a + r) + cc)   (key_slack with
//           M = r; cl and cc the absolute terms of fp16 tiles: falls in r)
//   h2(r) = ((r - a) - 2^-22 (a + r))^2 (1 - 2 (d + 4) 2^-53) for r >= a: the reverse
//           triangle inequality on the centred rows (norms a = ||zi||, r; each within
//           2^-24 of itself and the float64 norm's rounding), less the reference's own
//           rounding of the squared distance.
// A column of norm r <= a has distance >= h1(r) >= h1(min(a, M)); for r in [a, M] the
// larger of h1 (falling) and h2 (rising) is at least min(h1(hi), h2(lo)) for any
// lo <= hi bracketing their crossing, which bisection narrows.
__device__ double knn_settle_bound(double cut, double a, double M, double ca, double cb,
                                   double cl, double cc, double safety, int d) {
    const double gamma = 1.0 - 2.0 * (d + 4) * 1.1102230246251565e-16;
    const double delta = 2.384185791015625e-07;  // 2^-22
    auto h1 = [&](double r) {
        return cut - safety * (ca * a * r + cb * (a + r) * (a + r) + cl * (a + r) + cc);
    };
    auto h2 = [&](double r) {
        double g = fmax(0.0, (r - a) - delta * (a + r));
        return g * g * gamma * (1.0 - 1e-12);
    };
    double low = h1(fmin(a, M));
    if (M <= a) return low;
    double lo = a, hi = M;
    if (h1(hi) >= h2(hi)) return fmin(low, h1(hi));  // no crossing: the norm bound alone
    for (int it = 0; it < 64 && hi - lo > 1e-12 * hi; ++it) {
        double mid = 0.5 * (lo + hi);
        if (h1(mid) > h2(mid)) lo = mid; else hi = mid;
    }
    return fmin(low, fmin(h1(hi), h2(lo)));
}

extern "C" __global__ void knn_refine(long long r0, int rows,
                                      const long long* __restrict__ cand,
                                      const double* __restrict__ keys, int C, int K,
                                      int cosine, const float* __restrict__ cut,
                                      const double* __restrict__ slack,
                                      const double* __restrict__ zn, double M, double ca,
                                      double cb, double cl, double cc, double safety, int d,
                                      int complete,
                                      long long* __restrict__ out_idx,
                                      double* __restrict__ out_val,
                                      long long* __restrict__ pending,
                                      unsigned long long* __restrict__ n_pending) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= rows) return;
    long long i = r0 + t;
    double kv[KMAX];
    long long ki[KMAX];
    int cnt = 0;
    for (int c = 0; c < C; ++c) {
        long long e = (long long)t * C + c;
        double key = keys[e];
        if (cand[e] < 0 || !(key < KNN_INF)) continue;
        list_insert<double>(kv, ki, cnt, K, key, cand[e]);
    }
    write_row(i, kv, ki, cnt, K, cosine, out_idx, out_val);
    double c32 = (double)cut[t];
    bool settled = complete != 0 && c32 == c32;  // NaN: some column was never listed
    if (cosine && c32 == KNN_INF) settled = true;
    if (cnt == K && c32 < KNN_INF) {
        double bound = zn != nullptr ? knn_settle_bound(c32, zn[i], M, ca, cb, cl, cc, safety, d)
                                     : c32 - slack[i];
        if (kv[K - 1] < bound) settled = true;
    }
    if (!settled) pending[atomicAdd(n_pending, 1ULL)] = i;
}

// One thread per row rows[t]: the K best by (key, index) of its candidate columns
// cols[seg[t] .. seg[t + 1]) (any number, any order; itself and keys of +inf skipped),
// from the reference's keys.
extern "C" __global__ void knn_rows_exact(const float* __restrict__ X, int d,
                                          const long long* __restrict__ rows, int n_rows,
                                          const long long* __restrict__ seg,
                                          const long long* __restrict__ cols, int K,
                                          int cosine, const double* __restrict__ norms,
                                          long long* __restrict__ out_idx,
                                          double* __restrict__ out_val) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_rows) return;
    long long i = rows[t];
    double kv[KMAX];
    long long ki[KMAX];
    int cnt = 0;
    for (long long e = seg[t]; e < seg[t + 1]; ++e) {
        long long j = cols[e];
        if (j == i) continue;
        double key = ref_key(X, d, i, j, cosine, norms);
        if (!(key < KNN_INF)) continue;
        list_insert<double>(kv, ki, cnt, K, key, j);
    }
    write_row(i, kv, ki, cnt, K, cosine, out_idx, out_val);
}
