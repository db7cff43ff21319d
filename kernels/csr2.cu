// Algo CSR-2 (paper sect. 4.4, Algorithm 2, Listing 1): one fullPass stores up to
// hypoMaxNnzRow nonzeros per row in ELLPACK arrays, counts every row's nonzeros, and records
// where to restart a row that overflows; ellpackToCSR (convert.cu) copies the ELLPACK part
// into CSR; supPass (csr2_sup.cu) recomputes overflowing rows from their restart column.
#include "common.cuh"
#include "segment.cuh"

// fullPass, Listing 1. The restart point of a row is the start (a multiple of 32 columns,
// as in the paper) of the 32-column group in which its (hypo+1)-th nonzero lies, with the
// number of nonzeros before that group: at every group start the row has not yet exceeded
// hypo, the pair (nonzeros so far, group column) is recorded (Listing 1 lines 37 and 47).
// A row with at most hypo nonzeros gets (its count, n): nothing to restart.
//
// Deviation from Listing 1: the ELLPACK rows are written straight to global memory (each
// group's nonzeros are consecutive, so the stores are coalesced) instead of being
// accumulated in shared memory and copied at the end. The paper traces CSR-2's slowdowns at
// large hypo to that shared footprint, sizeof(float+int)*BSY*hypo bytes per block
// (sect. 6.3.2); without it any hypo fits any block shape.
extern "C" __global__ void __launch_bounds__(NT)
full_pass(const float* __restrict__ XT, int ldx, const int* __restrict__ row_ids, int n, int D,
          float thr, float scale, int hypo, int* __restrict__ ell_col,
          float* __restrict__ ell_val, int* __restrict__ nnz_row, int* __restrict__ idx_restart,
          int* __restrict__ col_restart) {
    extern __shared__ __align__(16) unsigned char smem[];
    int* s_cnt = reinterpret_cast<int*>(smem);  // nonzeros found so far per row
    int* s_flag = s_cnt + RB;
    int* s_ridx = s_cnt + 2 * RB;  // restart: nonzeros before the restart column
    int* s_rcol = s_cnt + 3 * RB;  // restart: column (multiple of 32)
    int* s_range = s_cnt + 4 * RB;
    unsigned char* body = smem + HDR_BYTES(4);
    const int r0 = blockIdx.x * RB;
    for (int q = thread_rank(); q < RB; q += NT) {
        s_cnt[q] = 0;
        s_flag[q] = 0;
        s_ridx[q] = 0;
        s_rcol[q] = 0;
    }
    int myrow[TR];
    block_rows(row_ids, r0, myrow, s_range);
    const int lane = threadIdx.x & 31;

    walk_segments(XT, ldx, r0, XT, ldx, D, 0, thr, scale, myrow, s_range, s_flag, body,
                  [&](int r, int c0, const int* sc, const float* sv) {
                      const i64 ell = (i64)row_ids[r0 + r] * hypo;
                      int cnt = s_cnt[r], ridx = s_ridx[r], rcol = s_rcol[r];
                      for (int g = 0; g < CB; g += 32) {
                          if (cnt <= hypo) {
                              ridx = cnt;
                              rcol = c0 + g;
                          }
                          const int c = sc[g + lane];
                          const bool nz = c != -1;
                          const unsigned m = __ballot_sync(FULL_MASK, nz);
                          if (nz) {
                              const int p = cnt + __popc(m & lanemask_lt());
                              if (p < hypo) {
                                  ell_col[ell + p] = c;
                                  ell_val[ell + p] = sv[g + lane];
                              }
                          }
                          cnt += __popc(m);
                      }
                      if (lane == 0) {
                          s_cnt[r] = cnt;
                          s_ridx[r] = ridx;
                          s_rcol[r] = rcol;
                      }
                  });

    __syncthreads();
    for (int q = thread_rank(); q < RB; q += NT) {
        const int row = row_ids[r0 + q];
        if (row < 0) continue;
        const int c = s_cnt[q];
        nnz_row[row] = c;
        idx_restart[row] = c <= hypo ? c : s_ridx[q];
        col_restart[row] = c <= hypo ? n : s_rcol[q];
    }
}
