// Canonical CSR rows for the fast builders (grid.cu, gemm.cu): each row's entries
// arrive in some order (cell order, atomic cursors) and must leave with ascending
// column indices. Self-contained: NVRTC compiles this without standard headers.

// Rank sort, one warp per row: the entry with column c goes to the position equal to
// the number of columns of its row below c. Columns of a row are distinct (each pair
// is found once), so ranks are a permutation. O(k^2 / 32) per row of k entries, all
// lanes reading the same column at once (a broadcast from L1): for rows up to a few
// thousand entries this beats a global radix sort of (row, column) keys, and it
// needs no scratch beyond the unsorted copy. The launcher picks the global sort
// when rows are longer (see kernels/grid.py, sort_rows).
extern "C" __global__ void sort_rows_rank(
    const long long* __restrict__ row_start, int n,
    const int* __restrict__ in_cols, const float* __restrict__ in_vals,
    int* __restrict__ out_cols, float* __restrict__ out_vals)
{
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (warp >= n) return;
    const long long s = row_start[warp];
    const int k = (int)(row_start[warp + 1] - s);
    const int* cols = in_cols + s;
    for (int a = lane; a < k; a += 32) {
        const int c = cols[a];
        int rank = 0;
        for (int b = 0; b < k; ++b) rank += cols[b] < c;
        out_cols[s + rank] = c;
        out_vals[s + rank] = in_vals[s + a];
    }
}

// Row index of every stored entry (for the global (row, column) key sort).
extern "C" __global__ void expand_rows(
    const long long* __restrict__ row_start, int n, int* __restrict__ rows)
{
    const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    for (long long e = row_start[r]; e < row_start[r + 1]; ++e) rows[e] = (int)r;
}
