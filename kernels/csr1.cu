// Algo CSR-1 (paper sect. 4.3, Algorithm 1): 1stPass counts nonzeros per row (count.cu's
// count_pass), an exclusive scan gives the row offsets, and this 2ndPass recomputes every
// pair and stores the nonzeros at their row's offset.
#include "common.cuh"
#include "segment.cuh"

// 2ndPass: a 1-D grid (x, which has no 65535 limit, read as the row dimension) of 2-D
// blocks; block b owns row slots [b*RB, (b+1)*RB) of the operand and walks all column
// segments. rowptr is int64 so offsets past 2**31 are exact.
extern "C" __global__ void __launch_bounds__(NT)
second_pass(const float* __restrict__ XT, int ldx, const int* __restrict__ row_ids, int D,
            float thr, float scale, const i64* __restrict__ rowptr, int* __restrict__ csr_col,
            float* __restrict__ csr_val) {
    extern __shared__ __align__(16) unsigned char smem[];
    int* s_cnt = reinterpret_cast<int*>(smem);  // nonzeros stored so far per row
    int* s_flag = s_cnt + RB;                   // row has an edge in the current segment
    int* s_range = s_cnt + 2 * RB;
    unsigned char* body = smem + HDR_BYTES(2);
    const int r0 = blockIdx.x * RB;
    for (int q = thread_rank(); q < RB; q += NT) {
        s_cnt[q] = 0;
        s_flag[q] = 0;
    }
    int myrow[TR];
    block_rows(row_ids, r0, myrow, s_range);
    const int lane = threadIdx.x & 31;

    walk_segments(XT, ldx, r0, XT, ldx, D, 0, thr, scale, myrow, s_range, s_flag, body,
                  [&](int r, int c0, const int* sc, const float* sv) {
                      const i64 base = rowptr[row_ids[r0 + r]] + s_cnt[r];
                      int added = 0;
                      for (int g = 0; g < CB; g += 32) {
                          const int c = sc[g + lane];
                          const bool nz = c != -1;
                          const unsigned m = __ballot_sync(FULL_MASK, nz);
                          if (nz) {
                              const i64 p = base + added + __popc(m & lanemask_lt());
                              csr_col[p] = c;
                              csr_val[p] = sv[g + lane];
                          }
                          added += __popc(m);
                      }
                      if (lane == 0) s_cnt[r] += added;
                  });
}
