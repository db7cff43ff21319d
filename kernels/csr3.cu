// Algo CSR-3 (paper sect. 4.5, Algorithm 3): chkPass computes a horizontal chunk of the
// similarity matrix densely into global memory (2-D grid of 2-D blocks, Fig. 5a); the
// denseToCSR step (convert.cu's dense_to_csr) compacts it into the CSR arrays.
//
// Two departures from the paper, both for exactness first:
// - A pair that is not an edge is written as NaN, not 0: an edge may have the value 0 (a
//   cosine of exactly 0 when the threshold is negative, a gaussian weight that underflows),
//   and cuSPARSE's dense-to-CSR, which keeps nonzero values, would drop it. The compaction
//   is therefore our own kernel and detects edges as "not NaN".
// - chkPass also counts each row's edges (one atomicAdd per block row, as in 1stPass), so
//   the compaction reads the chunk once instead of once to count and once to fill.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(NT)
chk_pass(const float* __restrict__ XT, int ldx, const int* __restrict__ row_ids, int D,
         int row_begin, int row_tile0, int tiles_per_strip, float thr, float scale,
         float* __restrict__ dense, int* __restrict__ counts) {
    extern __shared__ __align__(16) unsigned char smem[];
    int* s_cnt = reinterpret_cast<int*>(smem);
    int* s_range = s_cnt + RB;
#if !REG_PATH
    float* sR = reinterpret_cast<float*>(smem + HDR_BYTES(1));
    float* sC = sR + KC * RB;
#endif
    const int r0 = row_begin + (row_tile0 + blockIdx.y) * RB;
    for (int q = thread_rank(); q < RB; q += NT) s_cnt[q] = 0;
    int myrow[TR];
    block_rows(row_ids, r0, myrow, s_range);
    int cnt[TR];
#pragma unroll
    for (int i = 0; i < TR; ++i) cnt[i] = 0;
#if REG_PATH
    float rv[TR][DREG];
    load_rows(XT, ldx, r0, rv);
#endif
    const float nan = __int_as_float(0x7fffffff);
    const int n_tiles = ldx / CB;
    const int t_end = min((int)blockIdx.x * tiles_per_strip + tiles_per_strip, n_tiles);
    for (int t = blockIdx.x * tiles_per_strip; t < t_end; ++t) {
        const int c0 = t * CB;
        float acc[TR][TC];
#if REG_PATH
        tile_values(rv, XT, ldx, c0, acc);
#else
        tile_values_staged(XT, ldx, r0, XT, ldx, c0, D, sR, sC, acc);
#endif
        const unsigned pm = edge_bits(acc, thr, c0, myrow, tile_meets_diagonal(c0, s_range));
#pragma unroll
        for (int i = 0; i < TR; ++i) {
            const unsigned bits = (pm >> (i * TC)) & 0xFu;
            float4 v;
            v.x = (bits & 1u) ? edge_weight(acc[i][0], scale) : nan;
            v.y = (bits & 2u) ? edge_weight(acc[i][1], scale) : nan;
            v.z = (bits & 4u) ? edge_weight(acc[i][2], scale) : nan;
            v.w = (bits & 8u) ? edge_weight(acc[i][3], scale) : nan;
            const i64 local = r0 - row_begin + threadIdx.y * TR + i;
            __stcs(reinterpret_cast<float4*>(dense + local * ldx + c0 + threadIdx.x * TC), v);
            cnt[i] += __popc(bits);
        }
    }
    const bool lane0 = (threadIdx.x & 31) == 0;
#pragma unroll
    for (int i = 0; i < TR; ++i) {
        const int c = warp_sum(cnt[i]);
        if (lane0 && c) atomicAdd_block(&s_cnt[threadIdx.y * TR + i], c);
    }
    __syncthreads();
    for (int q = thread_rank(); q < RB; q += NT)
        if (s_cnt[q] > 0) atomicAdd(&counts[r0 - row_begin + q], s_cnt[q]);
}
