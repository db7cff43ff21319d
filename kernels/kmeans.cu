// One Lloyd step of k-means in a single pass over the data (explorer/kmeans.py, small k·d).
//
// For each row x: the nearest centre by ||c||^2 - 2 x·c (the same expression as the
// GEMM path, first index on ties, as argmin), the squared distance to it (clipped at
// 0), and, when `sums` is given, x and a count of 1 added to that cluster's float64
// accumulators. Accumulation follows papers/004's accurate update: values are summed
// in float64 within a warp, then a block, then across blocks; no float32 running sum
// ever grows with n.
//
// Why warp aggregation: float64 atomicAdd on shared memory is a compare-and-swap loop,
// and with few clusters every thread of a block hits the same k·(d+1) addresses; one
// atomic per row and dimension made a step at n = 5·10⁶, k = d = 4 take 6.5 ms (H200)
// instead of tens of microseconds. Here each warp first groups its lanes by cluster
// (one group per distinct label among its 32 rows) and sums each group with shuffles,
// so a block's shared accumulators see one atomic per group and dimension.
//
// Launch: 1-D grid of whole warps (grid-stride over rows), dynamic shared memory
// k*(d+1) doubles when `sums` is non-null. Centres are read through the read-only
// cache: every lane of a warp reads the same centre value at once (a broadcast).

#define FULL_MASK 0xffffffffu

extern "C" __global__ void kmeans_step(const float* __restrict__ X,      // n x d, row-major
                                       const float* __restrict__ x_sq,   // n
                                       const float* __restrict__ neg2c,  // k x d: -2 c
                                       const float* __restrict__ c_sq,   // k: ||c||^2
                                       long long n, int d, int k,
                                       int* __restrict__ labels,         // n (out)
                                       float* __restrict__ mind,         // n (out)
                                       double* __restrict__ sums) {      // k x (d+1), or null
    extern __shared__ double part[];
    const int width = d + 1;
    const int lane = threadIdx.x & 31;
    if (sums != nullptr) {
        for (int i = threadIdx.x; i < k * width; i += blockDim.x) part[i] = 0.0;
        __syncthreads();
    }
    const long long stride = (long long)gridDim.x * blockDim.x;
    // Whole warps iterate together (the shuffles below need every lane), rows past n idle.
    for (long long base = (long long)blockIdx.x * blockDim.x; base < n; base += stride) {
        const long long row = base + threadIdx.x;
        const bool valid = row < n;
        const float* x = X + row * d;
        int best = -1;
        if (valid) {
            float best_value = __int_as_float(0x7f800000);  // +inf (NVRTC has no INFINITY)
            best = 0;
            for (int j = 0; j < k; ++j) {
                const float* c = neg2c + (long long)j * d;
                float acc = 0.0f;
                for (int t = 0; t < d; ++t) acc = fmaf(x[t], __ldg(c + t), acc);
                acc += __ldg(c_sq + j);
                if (acc < best_value) {
                    best_value = acc;
                    best = j;
                }
            }
            labels[row] = best;
            mind[row] = fmaxf(best_value + x_sq[row], 0.0f);
        }
        if (sums == nullptr) continue;
        unsigned pending = __ballot_sync(FULL_MASK, valid);
        while (pending != 0u) {
            const int cluster = __shfl_sync(FULL_MASK, best, __ffs(pending) - 1);
            const bool mine = valid && best == cluster;
            const unsigned group = __ballot_sync(FULL_MASK, mine);
            pending &= ~group;
            double* s = part + cluster * width;
            for (int t = 0; t < d; ++t) {
                double v = mine ? (double)x[t] : 0.0;
                for (int offset = 16; offset > 0; offset >>= 1)
                    v += __shfl_down_sync(FULL_MASK, v, offset);
                if (lane == 0) atomicAdd(s + t, v);
            }
            if (lane == 0) atomicAdd(s + d, (double)__popc(group));
        }
    }
    if (sums != nullptr) {
        __syncthreads();
        for (int i = threadIdx.x; i < k * width; i += blockDim.x) {
            if (part[i] != 0.0) atomicAdd(sums + i, part[i]);
        }
    }
}
