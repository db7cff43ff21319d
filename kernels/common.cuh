// Shared by every pass of CSR-1, CSR-2 and CSR-3 and by the counting pass: the block/thread
// geometry and the tile of pair evaluations. The edge rule itself (pair_step, is_edge,
// edge_weight, and the METRIC / FAST_EXP options) is edge_rule.cuh's, shared with grid.cu
// and gemm.cu.
//
// Compile-time configuration (the launcher passes them as -D options; each combination is
// its own cached module, so the inner loops carry no run-time branching):
//   METRIC, FAST_EXP  the edge rule, see edge_rule.cuh
//   BSX, BSY  the thread block (the paper's Table 4 block shapes); BSX % 32 == 0
//   TR, TC    the register tile: each thread evaluates TR rows x TC columns (TC == 4)
//   DREG      d <= 8: the whole vectors live in registers (no shared staging), or
//   KC        d > 8: dimensions are staged through shared memory KC at a time
//
// Operand layout (kernels/_launch.py builds it): data transposed, [D][ld] float32, like the
// paper's GPU_dataT, so a warp reading consecutive points is coalesced. Columns past n hold
// NaN, and so do the rows of zero vectors under the cosine metric: a comparison with NaN is
// false, so padding and zero vectors never make an edge and the inner loop needs no bounds
// test. Dimensions past d hold 0, which adds exactly 0 to a squared distance or a dot.
//
// Exactness: a pair's value is accumulated with pair_step over k = 0..D-1 in order, so the
// counting pass, the filling pass and the supplementary pass decide every pair identically,
// which CSR-1 and CSR-2 rely on (offsets from one pass, values from another).
#ifndef SE_COMMON_CUH
#define SE_COMMON_CUH

#include "edge_rule.cuh"

#if !defined(BSX) || !defined(BSY) || !defined(TR) || !defined(TC)
#error "BSX, BSY, TR and TC must be defined by the launcher"
#endif
#if defined(DREG)
#define REG_PATH 1
#elif defined(KC)
#define REG_PATH 0
#else
#error "define DREG (d <= 8) or KC (staged dimensions)"
#endif

#define NT (BSX * BSY)
#define NWARPS (NT / 32)
#define RB (BSY * TR)  // rows of the block tile
#define CB (BSX * TC)  // columns of one segment (block tile)
#define FULL_MASK 0xffffffffu

static_assert(BSX % 32 == 0, "BSX must be a multiple of 32 (a warp never spans two rows)");
static_assert(TC == 4, "TC is 4: columns are loaded as float4");
static_assert(TR % 4 == 0 && TR * TC <= 32, "TR must be 4 or 8");

typedef long long i64;

// ----------------------------------------------------------------------------- helpers

__device__ __forceinline__ unsigned lanemask_lt() {
    unsigned m;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
    return m;
}

__device__ __forceinline__ int thread_rank() { return threadIdx.y * BSX + threadIdx.x; }

__device__ __forceinline__ int warp_sum(int v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

// Bytes of a block's shared-memory header of `nints` int arrays of RB entries plus the two
// ints of the row-id range, rounded to 16 (the launcher computes the same figure).
#define HDR_BYTES(nints) (((((nints) * RB + 2) * 4) + 15) / 16 * 16)

// The global row ids of the thread's TR rows (-1 for padding slots), and the block's row-id
// range [rmin, rmax] in s_range (two ints of shared memory). A tile needs the explicit
// "col != row" test only when its columns meet that range: the diagonal is tested on a few
// tiles and never costs the others anything.
__device__ __forceinline__ void block_rows(const int* __restrict__ row_ids, int r0, int (&myrow)[TR],
                                           int* s_range) {
    if (thread_rank() == 0) {
        s_range[0] = 0x7fffffff;
        s_range[1] = -1;
    }
    __syncthreads();
    int lo = 0x7fffffff, hi = -1;
#pragma unroll
    for (int i = 0; i < TR; ++i) {
        myrow[i] = row_ids[r0 + threadIdx.y * TR + i];
        if (myrow[i] >= 0) {
            lo = min(lo, myrow[i]);
            hi = max(hi, myrow[i]);
        }
    }
    if (threadIdx.x == 0 && hi >= 0) {
        atomicMin_block(&s_range[0], lo);
        atomicMax_block(&s_range[1], hi);
    }
    __syncthreads();
}

__device__ __forceinline__ bool tile_meets_diagonal(int c0, const int* s_range) {
    return c0 <= s_range[1] && s_range[0] < c0 + CB;
}

// ----------------------------------------------------------------------------- pair tiles
//
// acc[i][j] = value of pair (row slot r0 + threadIdx.y*TR + i, column c0 + threadIdx.x*TC + j).

#if REG_PATH

// d <= 8: the thread's TR rows are loaded once into registers and kept for the whole walk;
// each segment loads the thread's TC columns straight from global memory (one float4 per
// dimension, coalesced across the warp, L1-shared by the BSY warps of the block).
__device__ __forceinline__ void load_rows(const float* __restrict__ XR, int ldr, int r0,
                                          float (&rv)[TR][DREG]) {
    const int base = r0 + threadIdx.y * TR;
#pragma unroll
    for (int k = 0; k < DREG; ++k) {
#pragma unroll
        for (int i = 0; i < TR; i += 4) {
            const float4 v = __ldg(reinterpret_cast<const float4*>(XR + (i64)k * ldr + base + i));
            rv[i][k] = v.x;
            rv[i + 1][k] = v.y;
            rv[i + 2][k] = v.z;
            rv[i + 3][k] = v.w;
        }
    }
}

__device__ __forceinline__ void tile_values(const float (&rv)[TR][DREG], const float* __restrict__ XC,
                                            int ldc, int c0, float (&acc)[TR][TC]) {
    float cv[TC][DREG];
    const int cb = c0 + threadIdx.x * TC;
#pragma unroll
    for (int k = 0; k < DREG; ++k) {
        const float4 v = __ldg(reinterpret_cast<const float4*>(XC + (i64)k * ldc + cb));
        cv[0][k] = v.x;
        cv[1][k] = v.y;
        cv[2][k] = v.z;
        cv[3][k] = v.w;
    }
#pragma unroll
    for (int i = 0; i < TR; ++i) {
#pragma unroll
        for (int j = 0; j < TC; ++j) {
            float a = 0.0f;
#pragma unroll
            for (int k = 0; k < DREG; ++k) a = pair_step(a, rv[i][k], cv[j][k]);
            acc[i][j] = a;
        }
    }
}

#else

// d > 8: both operands stream through shared memory KC dimensions at a time (the rows'
// chunk sR[KC][RB], the columns' chunk sC[KC][CB]), and each thread accumulates its TR x TC
// register tile. Rows are re-read from L2 for every segment: keeping all D dimensions of a
// block's rows resident (the paper's way) would cost RB*D*4 bytes of shared memory (100 KB
// for 32 rows of MNIST) and halve the blocks per SM. Starts with a barrier, so a caller may
// reuse sR/sC between calls; a caller that writes them after a call must barrier first.
__device__ __forceinline__ void tile_values_staged(const float* __restrict__ XR, int ldr, int r0,
                                                   const float* __restrict__ XC, int ldc, int c0,
                                                   int D, float* sR, float* sC,
                                                   float (&acc)[TR][TC]) {
#pragma unroll
    for (int i = 0; i < TR; ++i)
#pragma unroll
        for (int j = 0; j < TC; ++j) acc[i][j] = 0.0f;
    const int tid = thread_rank();
    for (int k0 = 0; k0 < D; k0 += KC) {
        __syncthreads();  // the previous chunk (or the caller's use of this memory) is done
        for (int q = tid; q < KC * RB / 4; q += NT) {
            const int kk = q / (RB / 4), rr = q - kk * (RB / 4);
            reinterpret_cast<float4*>(sR)[q] =
                __ldg(reinterpret_cast<const float4*>(XR + (i64)(k0 + kk) * ldr + r0 + rr * 4));
        }
        for (int q = tid; q < KC * CB / 4; q += NT) {
            const int kk = q / (CB / 4), cc = q - kk * (CB / 4);
            reinterpret_cast<float4*>(sC)[q] =
                __ldg(reinterpret_cast<const float4*>(XC + (i64)(k0 + kk) * ldc + c0 + cc * 4));
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < KC; ++kk) {
            float a[TR];
#pragma unroll
            for (int i = 0; i < TR; i += 4) {
                const float4 v = *reinterpret_cast<const float4*>(sR + kk * RB + threadIdx.y * TR + i);
                a[i] = v.x;
                a[i + 1] = v.y;
                a[i + 2] = v.z;
                a[i + 3] = v.w;
            }
            const float4 b = *reinterpret_cast<const float4*>(sC + kk * CB + threadIdx.x * TC);
            const float bb[TC] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < TR; ++i)
#pragma unroll
                for (int j = 0; j < TC; ++j) acc[i][j] = pair_step(acc[i][j], a[i], bb[j]);
        }
    }
}

#endif  // REG_PATH

// Bit (i*TC + j) set when pair (i, j) of the thread's tile is an edge; on tiles that meet
// the diagonal the pairs (row, row) are cleared.
__device__ __forceinline__ unsigned edge_bits(const float (&acc)[TR][TC], float thr, int c0,
                                              const int (&myrow)[TR], bool diag) {
    unsigned pm = 0;
#pragma unroll
    for (int i = 0; i < TR; ++i)
#pragma unroll
        for (int j = 0; j < TC; ++j) pm |= (unsigned)is_edge(acc[i][j], thr) << (i * TC + j);
    if (diag) {
        const int cb = c0 + threadIdx.x * TC;
#pragma unroll
        for (int i = 0; i < TR; ++i)
#pragma unroll
            for (int j = 0; j < TC; ++j)
                if (cb + j == myrow[i]) pm &= ~(1u << (i * TC + j));
    }
    return pm;
}

#endif  // SE_COMMON_CUH
