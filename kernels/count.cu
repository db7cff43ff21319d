// The counting pass: nonzeros (and optionally weighted degrees) per row, nothing stored.
//
// It is CSR-1's 1stPass (paper sect. 4.3: a 2-D grid of 2-D blocks, counting within each
// block in shared memory with atomicAdd_block, then one atomicAdd per row of the block into
// global memory) and the live statistics' row counter (rows gathered from a sample).
//
// Grid: x walks strips of `tiles_per_strip` column tiles (one block evaluates RB x CB pairs
// per tile, so a block amortises its rows over a strip instead of one tile), y walks row
// tiles from `row_tile0` (the launcher splits a launch when row tiles exceed the grid's
// y limit of 65535, as the paper does).
#include "common.cuh"

#ifndef WITH_DEG
#define WITH_DEG 0
#endif

extern "C" __global__ void __launch_bounds__(NT)
count_pass(const float* __restrict__ XR, int ldr, const int* __restrict__ row_ids,
           const float* __restrict__ XC, int ldc, int D, int row_tile0, int tiles_per_strip,
           float thr, float scale, int* __restrict__ counts, float* __restrict__ degrees) {
    extern __shared__ __align__(16) unsigned char smem[];
    int* s_cnt = reinterpret_cast<int*>(smem);
    float* s_deg = reinterpret_cast<float*>(s_cnt + RB);
    int* s_range = s_cnt + 2 * RB;
#if !REG_PATH
    float* sR = reinterpret_cast<float*>(smem + HDR_BYTES(2));
    float* sC = sR + KC * RB;
#endif
    const int r0 = (row_tile0 + blockIdx.y) * RB;
    for (int q = thread_rank(); q < RB; q += NT) {
        s_cnt[q] = 0;
        s_deg[q] = 0.0f;
    }
    int myrow[TR];
    block_rows(row_ids, r0, myrow, s_range);  // its barriers also publish s_cnt/s_deg

    int cnt[TR];
#pragma unroll
    for (int i = 0; i < TR; ++i) cnt[i] = 0;
#if WITH_DEG
    float deg[TR];
#pragma unroll
    for (int i = 0; i < TR; ++i) deg[i] = 0.0f;
#endif
#if REG_PATH
    float rv[TR][DREG];
    load_rows(XR, ldr, r0, rv);
#endif
    const int n_tiles = ldc / CB;
    const int t_end = min((int)blockIdx.x * tiles_per_strip + tiles_per_strip, n_tiles);
    for (int t = blockIdx.x * tiles_per_strip; t < t_end; ++t) {
        const int c0 = t * CB;
        float acc[TR][TC];
#if REG_PATH
        tile_values(rv, XC, ldc, c0, acc);
#else
        tile_values_staged(XR, ldr, r0, XC, ldc, c0, D, sR, sC, acc);
#endif
        if (!tile_meets_diagonal(c0, s_range)) {
#pragma unroll
            for (int i = 0; i < TR; ++i)
#pragma unroll
                for (int j = 0; j < TC; ++j)
                    if (is_edge(acc[i][j], thr)) {
                        ++cnt[i];
#if WITH_DEG
                        deg[i] += edge_weight(acc[i][j], scale);
#endif
                    }
        } else {
            const unsigned pm = edge_bits(acc, thr, c0, myrow, true);
#pragma unroll
            for (int i = 0; i < TR; ++i)
#pragma unroll
                for (int j = 0; j < TC; ++j)
                    if ((pm >> (i * TC + j)) & 1u) {
                        ++cnt[i];
#if WITH_DEG
                        deg[i] += edge_weight(acc[i][j], scale);
#endif
                    }
        }
    }

    const bool lane0 = (threadIdx.x & 31) == 0;
#pragma unroll
    for (int i = 0; i < TR; ++i) {
        const int c = warp_sum(cnt[i]);
        if (lane0 && c) atomicAdd_block(&s_cnt[threadIdx.y * TR + i], c);
#if WITH_DEG
        const float g = warp_sum(deg[i]);
        if (lane0 && c) atomicAdd_block(&s_deg[threadIdx.y * TR + i], g);
#endif
    }
    __syncthreads();
    for (int q = thread_rank(); q < RB; q += NT) {
        const int slot = r0 + q;
        if (row_ids[slot] >= 0 && s_cnt[q] > 0) {
            atomicAdd(&counts[slot], s_cnt[q]);
#if WITH_DEG
            atomicAdd(&degrees[slot], s_deg[q]);
#endif
        }
    }
}
