// The walk shared by CSR-1's 2ndPass and CSR-2's fullPass and supPass (paper sect. 4.3-4.4,
// Fig. 5b): a 1-D grid of 2-D blocks; each block owns RB rows and walks them segment by
// segment (CB columns at a time). For every segment that holds an edge, the block writes the
// segment densely into shared memory, the column index of each pair or -1 (nonzeros are
// found by their column index, never by their value, which may underflow to 0), and then
// compacts each row of it in column order. The paper compacts with the first thread of each
// row walking the segment; here a warp compacts a row 32 columns at a time with a ballot.
//
// Segments without any edge are skipped after one vote (the paper's per-iteration nonzero
// count, Listing 1 lines 23, 31). With d <= 8 (REG_PATH) and one warp per block row
// (BSX == 32), a warp owns its TR rows completely, so the vote, the dense segment and the
// compaction stay within the warp and the walk needs no block barrier at all.
#ifndef SE_SEGMENT_CUH
#define SE_SEGMENT_CUH

#include "common.cuh"

#define WARP_LOCAL (REG_PATH && BSX == 32)

// Shared memory body after the header: the dense segment, seg_col[RB][CB] then
// seg_val[RB][CB]; with staged dimensions the staging buffers alias its start (they are never
// live at the same time: the vote is a block barrier between the two uses).
#define SEG_BYTES (RB * CB * 8)

__device__ __forceinline__ void seg_store(int* seg_col, float* seg_val, int c0, unsigned pm,
                                          const float (&acc)[TR][TC], float scale, int* s_flag) {
    const int cb = c0 + threadIdx.x * TC;
#pragma unroll
    for (int i = 0; i < TR; ++i) {
        const int r = threadIdx.y * TR + i;
        const unsigned bits = (pm >> (i * TC)) & 0xFu;
        int4 c;
        float4 v;
        c.x = (bits & 1u) ? cb : -1;
        c.y = (bits & 2u) ? cb + 1 : -1;
        c.z = (bits & 4u) ? cb + 2 : -1;
        c.w = (bits & 8u) ? cb + 3 : -1;
        v.x = (bits & 1u) ? edge_weight(acc[i][0], scale) : 0.0f;
        v.y = (bits & 2u) ? edge_weight(acc[i][1], scale) : 0.0f;
        v.z = (bits & 4u) ? edge_weight(acc[i][2], scale) : 0.0f;
        v.w = (bits & 8u) ? edge_weight(acc[i][3], scale) : 0.0f;
        *reinterpret_cast<int4*>(seg_col + r * CB + threadIdx.x * TC) = c;
        *reinterpret_cast<float4*>(seg_val + r * CB + threadIdx.x * TC) = v;
        if (bits) s_flag[r] = 1;
    }
}

// Walk columns [c_begin, ldc) of the block's rows; for each flagged row r of each segment
// with an edge, call compact(r, c0, seg_col_row, seg_val_row) on one whole warp (a row's
// compaction is always done by the same warp, so per-row running state in shared memory is
// only ever touched by that warp). s_flag[RB] must be zero on entry.
template <class Compact>
__device__ __forceinline__ void walk_segments(const float* __restrict__ XR, int ldr, int r0,
                                              const float* __restrict__ XC, int ldc, int D,
                                              int c_begin, float thr, float scale,
                                              const int (&myrow)[TR], const int* s_range,
                                              int* s_flag, unsigned char* body,
                                              Compact compact) {
    int* seg_col = reinterpret_cast<int*>(body);
    float* seg_val = reinterpret_cast<float*>(body + RB * CB * 4);
    const int lane = threadIdx.x & 31;
#if REG_PATH
    float rv[TR][DREG];
    load_rows(XR, ldr, r0, rv);
#else
    float* sR = reinterpret_cast<float*>(body);
    float* sC = sR + KC * RB;
#endif
    for (int c0 = c_begin; c0 < ldc; c0 += CB) {
        float acc[TR][TC];
#if REG_PATH
        tile_values(rv, XC, ldc, c0, acc);
#else
        tile_values_staged(XR, ldr, r0, XC, ldc, c0, D, sR, sC, acc);
#endif
        const unsigned pm = edge_bits(acc, thr, c0, myrow, tile_meets_diagonal(c0, s_range));
#if WARP_LOCAL
        if (!__any_sync(FULL_MASK, pm != 0u)) continue;
        seg_store(seg_col, seg_val, c0, pm, acc, scale, s_flag);
        __syncwarp();
#pragma unroll 1
        for (int i = 0; i < TR; ++i) {
            const int r = threadIdx.y * TR + i;
            if (s_flag[r]) {
                compact(r, c0, seg_col + r * CB, seg_val + r * CB);
                __syncwarp();
                if (lane == 0) s_flag[r] = 0;
            }
        }
        __syncwarp();
#else
        if (!__syncthreads_or(pm != 0u)) continue;
        seg_store(seg_col, seg_val, c0, pm, acc, scale, s_flag);
        __syncthreads();
        for (int r = thread_rank() / 32; r < RB; r += NWARPS) {
            if (s_flag[r]) {
                compact(r, c0, seg_col + r * CB, seg_val + r * CB);
                __syncwarp();
                if (lane == 0) s_flag[r] = 0;
            }
        }
        // No barrier here: the next segment's vote (or its staging's first barrier) orders
        // these reads before the segment buffer is written again.
#endif
    }
}

#endif  // SE_SEGMENT_CUH
