// method="gemm": similarity tiles from tensor-core products, screened with a proven
// error bound, every surviving pair decided and valued by the exact float32
// arithmetic of the CSR kernels.
//
// Pipeline (launched by kernels/gemm.py):
//   gemm_prepare    one warp per row: norms in double; the row scaled (cosine: to unit
//                   length; distances: centred and scaled by a power of two into
//                   [-1, 1]) and rounded once to fp16 for the GEMM.
//   cuBLAS          fp16 x fp16 -> fp32 accumulate -> fp16 tile, row block x columns.
//   gemm_tile_edges one warp per (tile row, column segment): screens the tile, re-checks
//                   each candidate with a warp-wide float32 dot product or squared
//                   distance on the original data, appends edges (i < j) to a COO list.
//   coo_degrees, coo_to_rows, sort_rows_rank (rowsort.cuh): the symmetric CSR.
// The screen keeps every pair the exact test could accept: docs/fast-builders.md
// derives the bound (A r_i r_j + B (r_i + r_j) + C) the launcher passes in.
//
// Compile-time: METRIC and FAST_EXP (edge_rule.cuh: the edge test, the float32 step
// of a pair's value and the weight, shared with the CSR kernels and the grid).
#include "edge_rule.cuh"
#include "rowsort.cuh"

#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float half_to_float(unsigned short h)
{
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

// One rounding, to nearest even, straight from double (no double rounding via float).
__device__ __forceinline__ unsigned short double_to_half(double v)
{
    unsigned short h;
    asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(v));
    return h;
}

__device__ __forceinline__ double warp_sum_double(double v)
{
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(FULL_MASK, v, off);
    return v;
}

// mode 0 (cosine): y = x / ||x|| (zero rows stay zero); nrm = ||x||.
// mode 1 (distances): y = (x - center) * scale; nrm = ||y||², rnrm = ||y||.
// H is n x d_pad fp16, zero-padded: d_pad is a multiple of 8 for tensor-core rows.
extern "C" __global__ void gemm_prepare(
    const float* __restrict__ X, int n, int d, int d_pad, int mode,
    const double* __restrict__ center, double scale,
    unsigned short* __restrict__ H, float* __restrict__ nrm, float* __restrict__ rnrm)
{
    const long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (row >= n) return;
    const float* x = X + row * d;
    unsigned short* h = H + row * d_pad;
    double acc = 0.0;
    for (int k = lane; k < d; k += 32) {
        const double v = mode ? ((double)x[k] - center[k]) * scale : (double)x[k];
        acc += v * v;
    }
    acc = warp_sum_double(acc);
    const double norm = sqrt(acc);
    if (mode == 0) {
        const double inv = norm > 0.0 ? 1.0 / norm : 0.0;
        for (int k = lane; k < d; k += 32) h[k] = double_to_half((double)x[k] * inv);
        if (lane == 0) nrm[row] = (float)norm;
    } else {
        for (int k = lane; k < d; k += 32) h[k] = double_to_half(((double)x[k] - center[k]) * scale);
        if (lane == 0) { nrm[row] = (float)acc; rnrm[row] = (float)norm; }
    }
    for (int k = d + lane; k < d_pad; k += 32) h[k] = 0;
}

// Exact float32 value of the pair (i, j) on the original data (a dot product for
// cosine, a squared distance otherwise), the same in every lane: lanes take features
// k = lane, lane + 32, ... (edge_rule.cuh's pair_step), then a fixed butterfly, and
// lane 0's sum is broadcast (other lanes' sums may differ in the last bit).
__device__ __forceinline__ float warp_pair_value(const float* __restrict__ xi,
                                                 const float* __restrict__ xj,
                                                 int d, int lane)
{
    float acc = 0.0f;
    // Unrolled so that a lane's loads of one row are in flight together.
#pragma unroll 8
    for (int k = lane; k < d; k += 32) acc = pair_step(acc, __ldg(xi + k), __ldg(xj + k));
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(FULL_MASK, acc, off);
    return __shfl_sync(FULL_MASK, acc, 0);
}

struct EdgeBuffer {
    int j;        // this lane's slot
    float v;
    int used;     // slots filled, the same in every lane
};

__device__ __forceinline__ void flush(EdgeBuffer& buf, int i, int lane,
                                      unsigned long long* __restrict__ counter, long long cap,
                                      int* __restrict__ out_i, int* __restrict__ out_j,
                                      float* __restrict__ out_v)
{
    if (buf.used == 0) return;
    unsigned long long base = 0;
    if (lane == 0) base = atomicAdd(counter, (unsigned long long)buf.used);
    base = __shfl_sync(FULL_MASK, base, 0);
    const unsigned long long at = base + lane;
    if (lane < buf.used && at < (unsigned long long)cap) {
        out_i[at] = i;
        out_j[at] = buf.j;
        out_v[at] = buf.v;
    }
    buf.used = 0;
}

// Tile C: `rows` x `cols` fp16, row-major with leading dimension ldc (a multiple of
// 8, rows 16-byte aligned). Tile row r is data row i = use_ids ? row_ids[r] : row0 + r;
// tile column c is data row j = col0 + c. upper != 0 keeps only j > i (each pair once);
// otherwise every j != i (the capacity estimate's sample rows).
//
// Screen: cosine: the tile value s > screen (and both rows non-zero).
//         distances: D = nn_i + nn_j - 2 s < screen + band_ij, band_ij =
//         A rr_i rr_j + B (rr_i + rr_j) + C + Cn (nn_i + nn_j), in scaled units.
// Decision (float32, original data, edge_rule.cuh's is_edge): cosine
// dot / (||x_i|| ||x_j||) > t; distances d2 < t. Value: edge_weight of the compared
// value (the cosine; exp(d2 * scale) with scale = -1/(2σ²); or one).
// counter[0] counts edges (all of them, also past `cap`, which bounds the writes);
// counter[1] counts candidates re-checked.
extern "C" __global__ void gemm_tile_edges(
    const unsigned short* __restrict__ C, long long ldc, int rows, int cols,
    int row0, const int* __restrict__ row_ids, int use_ids, int col0, int upper,
    const float* __restrict__ X, int d,
    const float* __restrict__ nrm, const float* __restrict__ rnrm,
    float screen, float coef_a, float coef_b, float coef_c, float coef_n,
    float t, float scale, int seg_cols,
    unsigned long long* __restrict__ counter, long long cap,
    int* __restrict__ out_i, int* __restrict__ out_j, float* __restrict__ out_v)
{
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    const int n_seg = (cols + seg_cols - 1) / seg_cols;
    const long long r = warp / n_seg;
    if (r >= rows) return;
    const int seg = (int)(warp % n_seg);
    const int i = use_ids ? row_ids[r] : row0 + (int)r;
    constexpr bool cosine = !METRIC_SQDIST;
    const float nrm_i = nrm[i];
    if (cosine && nrm_i == 0.0f) return;  // a zero vector has no edges
    const float rr_i = cosine ? 0.0f : rnrm[i];
    int c_begin = seg * seg_cols;
    const int c_end = min(cols, c_begin + seg_cols);
    if (upper) c_begin = max(c_begin, i + 1 - col0);
    if (c_begin >= c_end) return;

    const unsigned short* crow = C + r * ldc;
    const float* xi = X + (long long)i * d;
    EdgeBuffer buf = {0, 0.0f, 0};
    unsigned long long checked = 0;
    for (int base = c_begin & ~7; base < c_end; base += 256) {
        const int c0 = base + lane * 8;
        unsigned int mask = 0;
        if (c0 < c_end) {
            const uint4 raw = *reinterpret_cast<const uint4*>(crow + c0);
            const unsigned int w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const int c = c0 + e;
                const int j = col0 + c;
                if (c < c_begin || c >= c_end || j == i) continue;
                const float s = half_to_float((unsigned short)(w[e >> 1] >> ((e & 1) * 16)));
                bool pass;
                if (cosine) {
                    pass = s > screen && __ldg(nrm + j) != 0.0f;
                } else {
                    const float nn_j = __ldg(nrm + j), rr_j = __ldg(rnrm + j);
                    const float dist = (nrm_i + nn_j) - 2.0f * s;
                    const float band = fmaf(coef_a, rr_i * rr_j,
                                            fmaf(coef_b, rr_i + rr_j,
                                                 fmaf(coef_n, nrm_i + nn_j, coef_c)));
                    pass = dist < screen + band;
                }
                mask |= (unsigned int)pass << e;
            }
        }
        unsigned int lanes = __ballot_sync(FULL_MASK, mask != 0);
        while (lanes) {
            const int src = __ffs(lanes) - 1;
            lanes &= lanes - 1;
            unsigned int bits = __shfl_sync(FULL_MASK, mask, src);
            while (bits) {
                const int e = __ffs(bits) - 1;
                bits &= bits - 1;
                const int j = col0 + base + src * 8 + e;
                ++checked;
                const float acc = warp_pair_value(xi, X + (long long)j * d, d, lane);
                float compared = acc;
                if (cosine) {
                    compared = acc / (nrm_i * __ldg(nrm + j));
                    compared = fminf(fmaxf(compared, -1.0f), 1.0f);
                }
                if (is_edge(compared, t)) {
                    const float value = edge_weight(compared, scale);
                    if (lane == buf.used) { buf.j = j; buf.v = value; }
                    if (++buf.used == 32) flush(buf, i, lane, counter, cap, out_i, out_j, out_v);
                }
            }
        }
    }
    flush(buf, i, lane, counter, cap, out_i, out_j, out_v);
    if (lane == 0 && checked) atomicAdd(counter + 1, checked);
}

// Entries per row of the symmetric matrix of the COO pairs (i < j): both ends.
extern "C" __global__ void coo_degrees(const int* __restrict__ ei, const int* __restrict__ ej,
                                       long long m, int* __restrict__ counts)
{
    const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= m) return;
    atomicAdd(counts + ei[e], 1);
    atomicAdd(counts + ej[e], 1);
}

// Both entries of each pair into its rows' segments, in arrival order (sorted after).
extern "C" __global__ void coo_to_rows(const int* __restrict__ ei, const int* __restrict__ ej,
                                       const float* __restrict__ ev, long long m,
                                       const long long* __restrict__ row_start,
                                       int* __restrict__ cursor,
                                       int* __restrict__ out_cols, float* __restrict__ out_vals)
{
    const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= m) return;
    const int i = ei[e], j = ej[e];
    const float v = ev[e];
    const long long pi = row_start[i] + atomicAdd(cursor + i, 1);
    out_cols[pi] = j;
    out_vals[pi] = v;
    const long long pj = row_start[j] + atomicAdd(cursor + j, 1);
    out_cols[pj] = i;
    out_vals[pj] = v;
}
