// The NEAREST landmarks of each row: the entries of the landmark affinity before it is
// stored as CSRC (kernels/csrc.py, nearest_landmarks).
//
// G is an m x p block of products x_i . c_j (cuBLAS); the key of (i, j) is
// a[i] + b[j] + scale * G[i, j] (squared distance: a = |x|^2, b = |c|^2, scale = -2;
// cosine on unit rows: a = b = 0, scale = -1, the negated cosine). The NEAREST smallest
// keys of each row are chosen, ties to the lower column, NaN never. One warp per row:
// each lane keeps its best NEAREST in registers (sorted insertion), then NEAREST rounds
// of a warp arg-min merge the lanes' lists.
//
// -DNEAREST=<r> (1..32) sets r.

#ifndef NEAREST
#error "compile with -DNEAREST=<landmarks per row, 1 to 32>"
#endif

#define BIG_INDEX 0x7fffffff

__device__ __forceinline__ bool before(float kv, int ki, float ov, int oi)
{
    return kv < ov || (kv == ov && ki < oi);
}

extern "C" __global__ void nearest_landmarks(const float* __restrict__ G,
                                             const float* __restrict__ a,
                                             const float* __restrict__ b,
                                             float scale,
                                             long long m,
                                             int p,
                                             int* __restrict__ idx,
                                             float* __restrict__ key)
{
    const int lane = threadIdx.x & 31;
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long row = warp; row < m; row += warps) {
        float kv[NEAREST];
        int ki[NEAREST];
#pragma unroll
        for (int i = 0; i < NEAREST; ++i) {
            kv[i] = __int_as_float(0x7f800000);  // +inf
            ki[i] = BIG_INDEX;
        }
        const float ar = a[row];
        const float* g = G + row * (long long)p;
        for (int j = lane; j < p; j += 32) {
            float cv = ar + b[j] + scale * g[j];
            if (cv != cv) continue;  // NaN: never a nearest landmark
            if (!before(cv, j, kv[NEAREST - 1], ki[NEAREST - 1])) continue;
            int ci = j;
#pragma unroll
            for (int i = 0; i < NEAREST; ++i) {  // sorted insertion by swaps (registers)
                if (before(cv, ci, kv[i], ki[i])) {
                    const float tv = kv[i];
                    const int ti = ki[i];
                    kv[i] = cv;
                    ki[i] = ci;
                    cv = tv;
                    ci = ti;
                }
            }
        }
        for (int t = 0; t < NEAREST; ++t) {
            float bv = kv[0];
            int bi = ki[0];
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) {
                const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
                const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
                if (before(ov, oi, bv, bi)) {
                    bv = ov;
                    bi = oi;
                }
            }
            if (ki[0] == bi && bi != BIG_INDEX) {  // the winning lane drops its head
#pragma unroll
                for (int i = 0; i + 1 < NEAREST; ++i) {
                    kv[i] = kv[i + 1];
                    ki[i] = ki[i + 1];
                }
                kv[NEAREST - 1] = __int_as_float(0x7f800000);
                ki[NEAREST - 1] = BIG_INDEX;
            }
            if (lane == 0) {
                idx[row * NEAREST + t] = bi == BIG_INDEX ? -1 : bi;
                key[row * NEAREST + t] = bv;
            }
        }
    }
}
