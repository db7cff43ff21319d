// CSRC sparse products (Aliaga et al. 2023, "Sparse matrix-vector and matrix-multivector
// products for the truncated SVD on graphics processors"): one stored n x p matrix A serves
// both Y = A X and W = A^T U.
//
// Storage (kernels/csrc.py, CsrcMatrix): rows in blocks of ROWS; the entries of block g
// are blockptr[g] .. blockptr[g+1]-1, sorted by column inside the block; roff[h] is the
// row of entry h relative to the block's first row (8 bits), col[h] its column, val[h]
// its value. Dense operands are row-major with NV columns (NV a power of two, 1..64):
// a group of NV consecutive threads works on one entry, thread c on column c, so the NV
// values of a row of X or U are read in one coalesced transaction.
//
// -DNV=<width> selects the dense width (one compiled module per width).

#ifndef NV
#error "compile with -DNV=<dense width, a power of two from 1 to 64>"
#endif

#define ROWS 256

// Y = A X (X: p x NV, Y: n x NV). One thread block per row block (Aliaga et al., Fig. 3):
// the block's ROWS x NV results accumulate in shared memory (atomics there are cheap),
// then go to Y in one coalesced write; every row of Y is written, empty rows as 0.
extern "C" __global__ void csrc_spmm(const long long* __restrict__ blockptr,
                                     const unsigned char* __restrict__ roff,
                                     const int* __restrict__ col,
                                     const float* __restrict__ val,
                                     const float* __restrict__ X,
                                     float* __restrict__ Y,
                                     long long n)
{
    extern __shared__ float S[];  // ROWS * NV
    const long long g = blockIdx.x;
    for (int t = threadIdx.x; t < ROWS * NV; t += blockDim.x) S[t] = 0.0f;
    __syncthreads();
    const long long start = blockptr[g];
    const long long end = blockptr[g + 1];
    const int c = threadIdx.x % NV;
    const int groups = blockDim.x / NV;
    for (long long h = start + threadIdx.x / NV; h < end; h += groups) {
        atomicAdd(&S[(int)roff[h] * NV + c], X[(long long)col[h] * NV + c] * val[h]);
    }
    __syncthreads();
    const long long row0 = g * ROWS;
    const long long left = n - row0;
    const int rows = left < ROWS ? (int)left : ROWS;
    for (int t = threadIdx.x; t < rows * NV; t += blockDim.x) Y[row0 * NV + t] = S[t];
}

// W += A^T U (U: n x NV, W: p x NV, zeroed by the launcher), for small p: each thread
// block keeps all of W in shared memory (p * NV floats), walks row blocks grid-stride,
// and adds its partial W to global memory once at the end. Global atomics: p * NV per
// thread block instead of per entry. (The paper's transposed kernel, csrc_spmm_t_runs
// below, is for p too large for this.)
extern "C" __global__ void csrc_spmm_t_shared(const long long* __restrict__ blockptr,
                                              const unsigned char* __restrict__ roff,
                                              const int* __restrict__ col,
                                              const float* __restrict__ val,
                                              const float* __restrict__ U,
                                              float* __restrict__ W,
                                              long long nblocks,
                                              int p)
{
    extern __shared__ float S[];  // p * NV
    for (int t = threadIdx.x; t < p * NV; t += blockDim.x) S[t] = 0.0f;
    __syncthreads();
    const int c = threadIdx.x % NV;
    const int groups = blockDim.x / NV;
    for (long long g = blockIdx.x; g < nblocks; g += gridDim.x) {
        const long long start = blockptr[g];
        const long long end = blockptr[g + 1];
        const long long row0 = g * ROWS;
        for (long long h = start + threadIdx.x / NV; h < end; h += groups) {
            atomicAdd(&S[col[h] * NV + c], U[(row0 + roff[h]) * NV + c] * val[h]);
        }
    }
    __syncthreads();
    for (int t = threadIdx.x; t < p * NV; t += blockDim.x) {
        const float s = S[t];
        if (s != 0.0f) atomicAdd(&W[t], s);
    }
}

// W += A^T U for any p (Aliaga et al., Fig. 4): one thread block per row block; each group
// of NV threads walks a contiguous run of the block's entries, which are sorted by
// column, and sums the entries of one column in registers before a single global
// atomic per column change (the paper's segmented reduction, done along the run
// instead of across the warp's lanes).
extern "C" __global__ void csrc_spmm_t_runs(const long long* __restrict__ blockptr,
                                            const unsigned char* __restrict__ roff,
                                            const int* __restrict__ col,
                                            const float* __restrict__ val,
                                            const float* __restrict__ U,
                                            float* __restrict__ W)
{
    const long long g = blockIdx.x;
    const long long start = blockptr[g];
    const long long end = blockptr[g + 1];
    const long long row0 = g * ROWS;
    const int groups = blockDim.x / NV;
    const int c = threadIdx.x % NV;
    const long long per = (end - start + groups - 1) / groups;
    const long long h0 = start + (long long)(threadIdx.x / NV) * per;
    const long long h1 = h0 + per < end ? h0 + per : end;
    float acc = 0.0f;
    int current = -1;
    for (long long h = h0; h < h1; ++h) {
        const int j = col[h];
        if (j != current) {
            if (current >= 0) atomicAdd(&W[(long long)current * NV + c], acc);
            current = j;
            acc = 0.0f;
        }
        acc += U[(row0 + roff[h]) * NV + c] * val[h];
    }
    if (current >= 0) atomicAdd(&W[(long long)current * NV + c], acc);
}
