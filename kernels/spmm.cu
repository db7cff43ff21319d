// Sparse times dense block, out = A Y, for a CSR A and a row-major block Y of b <= 32
// columns: the product of the Chebyshev eigensolver (explorer/embedding/chebyshev.py).
//
// One warp per row. Lane l works on column j = l % G of Y and on every (32 / G)-th
// stored entry of the row from slot s = l / G, so the G lanes of a slot read one row of
// Y as one contiguous segment (b values: 32 bytes for b = 8 floats) and the warp walks
// 32 / G entries at a time; a shuffle sums the slots' partial sums. G is the power of
// two >= b, so no lane reads past its row of Y. Every entry of `out` is written, empty
// rows included (zero): no buffer needs clearing first.
//
// Sums run in the value type (float32 blocks accumulate in float32, as cuSPARSE's SpMM
// does); the eigensolver measures its residuals in float64.

template <int G, typename T, typename I>
__device__ __forceinline__ void spmm_rows(const I* __restrict__ indptr,
                                          const I* __restrict__ indices,
                                          const T* __restrict__ data,
                                          const T* __restrict__ Y, T* __restrict__ out,
                                          long long n, int b) {
    constexpr int SLOTS = 32 / G;
    const int lane = threadIdx.x & 31;
    const int j = lane % G;
    const int slot = lane / G;
    const long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (row >= n) return;  // whole warps leave together: blockDim.x is a multiple of 32
    const long long start = (long long)indptr[row];
    const long long end = (long long)indptr[row + 1];
    T acc = T(0);
    if (j < b) {
        for (long long e = start + slot; e < end; e += SLOTS) {
            acc += data[e] * __ldg(Y + (long long)indices[e] * b + j);
        }
    }
#pragma unroll
    for (int offset = 16; offset >= G; offset >>= 1) {
        acc += __shfl_down_sync(0xffffffffu, acc, offset);
    }
    if (slot == 0 && j < b) out[row * b + j] = acc;
}

#define SPMM_KERNEL(NAME, G, T, I)                                                  \
    extern "C" __global__ void NAME(const I* indptr, const I* indices, const T* data,  \
                                    const T* Y, T* out, long long n, int b) {         \
        spmm_rows<G, T, I>(indptr, indices, data, Y, out, n, b);                      \
    }

SPMM_KERNEL(spmm_g8_f32_i32, 8, float, int)
SPMM_KERNEL(spmm_g16_f32_i32, 16, float, int)
SPMM_KERNEL(spmm_g32_f32_i32, 32, float, int)
SPMM_KERNEL(spmm_g8_f64_i32, 8, double, int)
SPMM_KERNEL(spmm_g16_f64_i32, 16, double, int)
SPMM_KERNEL(spmm_g32_f64_i32, 32, double, int)
SPMM_KERNEL(spmm_g8_f32_i64, 8, float, long long)
SPMM_KERNEL(spmm_g16_f32_i64, 16, float, long long)
SPMM_KERNEL(spmm_g32_f32_i64, 32, float, long long)
SPMM_KERNEL(spmm_g8_f64_i64, 8, double, long long)
SPMM_KERNEL(spmm_g16_f64_i64, 16, double, long long)
SPMM_KERNEL(spmm_g32_f64_i64, 32, double, long long)
