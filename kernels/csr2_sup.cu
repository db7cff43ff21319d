// CSR-2's supPass (paper sect. 4.4): like CSR-1's 2ndPass, but over the rows whose nonzeros
// overflowed hypoMaxNnzRow only (gathered by the launcher into XR, their global ids in
// row_ids), and each row starts at the restart column that fullPass recorded: its nonzeros
// before that column are already in CSR (ellpackToCSR), the others are written from
// out_start (= rowptr[row] + nonzeros before the restart column) on.
#include "common.cuh"
#include "segment.cuh"

extern "C" __global__ void __launch_bounds__(NT)
sup_pass(const float* __restrict__ XR, int ldr, const int* __restrict__ row_ids,
         const float* __restrict__ XT, int ldx, int D, float thr, float scale,
         const int* __restrict__ col_restart, const i64* __restrict__ out_start,
         int* __restrict__ csr_col, float* __restrict__ csr_val) {
    extern __shared__ __align__(16) unsigned char smem[];
    int* s_cnt = reinterpret_cast<int*>(smem);
    int* s_flag = s_cnt + RB;
    int* s_rcol = s_cnt + 2 * RB;   // the row's restart column (INT_MAX for padding slots)
    int* s_begin = s_cnt + 3 * RB;  // [0]: the block's first column (min restart column)
    int* s_range = s_cnt + 4 * RB;
    unsigned char* body = smem + HDR_BYTES(4);
    const int r0 = blockIdx.x * RB;
    if (thread_rank() == 0) s_begin[0] = 0x7fffffff;
    for (int q = thread_rank(); q < RB; q += NT) {
        s_cnt[q] = 0;
        s_flag[q] = 0;
        s_rcol[q] = row_ids[r0 + q] >= 0 ? col_restart[r0 + q] : 0x7fffffff;
    }
    __syncthreads();
    for (int q = thread_rank(); q < RB; q += NT) atomicMin_block(s_begin, s_rcol[q]);
    int myrow[TR];
    block_rows(row_ids, r0, myrow, s_range);  // its barriers publish s_begin
    const int lane = threadIdx.x & 31;
    const int c_begin = s_begin[0] / CB * CB;

    walk_segments(XR, ldr, r0, XT, ldx, D, c_begin, thr, scale, myrow, s_range, s_flag, body,
                  [&](int r, int c0, const int* sc, const float* sv) {
                      const int rc = s_rcol[r];
                      if (c0 + CB <= rc) return;  // the whole segment precedes the restart
                      const i64 base = out_start[r0 + r] + s_cnt[r];
                      int added = 0;
                      for (int g = 0; g < CB; g += 32) {
                          if (c0 + g < rc) continue;  // groups are 32-aligned, like rc
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
