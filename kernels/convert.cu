// Format conversions that compute no similarity: ELLPACK -> CSR (CSR-2's ellpackToCSR) and
// dense chunk -> CSR (CSR-3's denseToCSR). Block shapes are read at run time (blockDim), so
// one compiled module serves every launch; blockDim.x must be 32 for dense_to_csr.

typedef long long i64;
#define FULL_MASK 0xffffffffu

// ellpackToCSR (paper sect. 4.4): row `row` copies its first k ELLPACK entries to
// csr[rowptr[row] ...), k = its nonzero count, or the count before its restart column when
// it overflowed (supPass writes the rest), and records where supPass resumes writing.
extern "C" __global__ void
ellpack_to_csr(int n, int hypo, const int* __restrict__ nnz_row,
               const int* __restrict__ idx_restart, const i64* __restrict__ rowptr,
               const int* __restrict__ ell_col, const float* __restrict__ ell_val,
               int* __restrict__ csr_col, float* __restrict__ csr_val,
               i64* __restrict__ out_start) {
    const int row = blockIdx.x * blockDim.y + threadIdx.y;
    if (row >= n) return;
    const int c = nnz_row[row];
    const int k = c > hypo ? idx_restart[row] : c;
    const i64 base = rowptr[row];
    const i64 ell = (i64)row * hypo;
    for (int q = threadIdx.x; q < k; q += blockDim.x) {
        csr_col[base + q] = ell_col[ell + q];
        csr_val[base + q] = ell_val[ell + q];
    }
    if (threadIdx.x == 0) out_start[row] = base + idx_restart[row];
}

// denseToCSR: one warp per chunk row; each lane reads 4 consecutive columns (a float4,
// streamed: the chunk is read once), a warp scan ranks the edges (entries that are not NaN)
// in column order, and they are written from rowptr[row_begin + q] on. ldx % 128 == 0.
extern "C" __global__ void
dense_to_csr(const float* __restrict__ dense, int ldx, int rows, int row_begin,
             const i64* __restrict__ rowptr, int* __restrict__ csr_col,
             float* __restrict__ csr_val) {
    const int q = blockIdx.x * blockDim.y + threadIdx.y;
    if (q >= rows) return;
    const int lane = threadIdx.x;
    const float* src = dense + (i64)q * ldx;
    i64 base = rowptr[row_begin + q];
    for (int c = lane * 4; c < ldx; c += 128) {
        const float4 v = __ldcs(reinterpret_cast<const float4*>(src + c));
        const bool e0 = v.x == v.x, e1 = v.y == v.y, e2 = v.z == v.z, e3 = v.w == v.w;
        const int k = (int)e0 + (int)e1 + (int)e2 + (int)e3;
        if (!__any_sync(FULL_MASK, k != 0)) continue;
        int s = k;  // inclusive scan over the warp
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int t = __shfl_up_sync(FULL_MASK, s, o);
            if (lane >= o) s += t;
        }
        i64 p = base + (s - k);
        if (e0) { csr_col[p] = c;     csr_val[p] = v.x; ++p; }
        if (e1) { csr_col[p] = c + 1; csr_val[p] = v.y; ++p; }
        if (e2) { csr_col[p] = c + 2; csr_val[p] = v.z; ++p; }
        if (e3) { csr_col[p] = c + 3; csr_val[p] = v.w; }
        base += __shfl_sync(FULL_MASK, s, 31);
    }
}
