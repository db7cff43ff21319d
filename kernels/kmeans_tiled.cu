// Nearest centre of every row for few features and many centres (explorer/kmeans.py,
// kernels/kmeans.py: tiled_step).
//
// The GEMM path writes and reads an n x k block of cross terms: at d = 4 and
// k = 4096 that is 32 bytes of memory traffic per 8 flops, so the step runs at memory
// speed. Here each thread keeps ROWS rows of KM_DIM features in registers and walks
// the centres a tile at a time from shared memory (every lane reads the same centre:
// a broadcast), so nothing of size n x k is ever stored.
//
// Arithmetic as kmeans.cu's kmeans_step: for each centre j, sum_t fmaf(x_t, -2 c_jt)
// in increasing t, plus ||c_j||^2, in float32; the smallest wins, the first index on
// ties; the squared distance is max(that + ||x||^2, 0).
//
// With `changed`, the rows whose label differs from the one held before are counted
// into *changed (one atomic per block). With `state` (one restart's, as lloyd_update
// keeps it), a restart that is not running (stopped, or paused for re-seeding) leaves
// its labels and distances as they are: the steps the host launched before it read
// the states (DeviceStarts.run) return at once.
//
// Compile with -DKM_DIM=d (1 <= d <= 32). Launch: 1-D grid, blockDim.x == TILE,
// grid-stride over groups of TILE * ROWS rows.

#ifndef KM_DIM
#error "KM_DIM (the number of features) must be defined"
#endif

#define TILE 256  // centres per shared-memory tile, and threads per block
#define ROWS 2    // rows per thread: each centre read from shared memory serves ROWS rows

extern "C" __global__ void nearest_tiled(const float* __restrict__ X,      // n x KM_DIM
                                         const float* __restrict__ x_sq,   // n
                                         const float* __restrict__ neg2c,  // k x KM_DIM: -2 c
                                         const float* __restrict__ c_sq,   // k: ||c||^2
                                         long long n, int k,
                                         int* __restrict__ labels,         // n (out)
                                         float* __restrict__ mind,         // n (out)
                                         int* __restrict__ changed,        // 1, or null
                                         const int* __restrict__ state) {  // 1, or null
    if (state != nullptr && state[0] != 0) return;  // the whole grid alike
    __shared__ float tile_c[TILE * KM_DIM];
    __shared__ float tile_sq[TILE];
    __shared__ int block_changed;
    if (threadIdx.x == 0) block_changed = 0;
    int my_changed = 0;
    const long long step = (long long)gridDim.x * TILE * ROWS;
    // The loop condition is the same for every thread of a block (barriers inside).
    for (long long base = (long long)blockIdx.x * TILE * ROWS; base < n; base += step) {
        float x[ROWS][KM_DIM];
        float best[ROWS];
        int index[ROWS];
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
            const long long row = base + threadIdx.x + (long long)r * TILE;
#pragma unroll
            for (int t = 0; t < KM_DIM; ++t) x[r][t] = row < n ? X[row * KM_DIM + t] : 0.0f;
            best[r] = __int_as_float(0x7f800000);  // +inf
            index[r] = k;                          // past every centre
        }
        for (int j0 = 0; j0 < k; j0 += TILE) {
            const int cols = k - j0 < TILE ? k - j0 : TILE;
            __syncthreads();  // the previous tile is no longer read
            for (int e = threadIdx.x; e < cols * KM_DIM; e += TILE)
                tile_c[e] = neg2c[(long long)j0 * KM_DIM + e];
            if (threadIdx.x < cols) tile_sq[threadIdx.x] = c_sq[j0 + threadIdx.x];
            __syncthreads();
            for (int j = 0; j < cols; ++j) {
                const float* c = tile_c + j * KM_DIM;
                const float csq = tile_sq[j];
#pragma unroll
                for (int r = 0; r < ROWS; ++r) {
                    float acc = 0.0f;
#pragma unroll
                    for (int t = 0; t < KM_DIM; ++t) acc = fmaf(x[r][t], c[t], acc);
                    acc += csq;
                    if (acc < best[r]) {
                        best[r] = acc;
                        index[r] = j0 + j;
                    }
                }
            }
        }
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
            const long long row = base + threadIdx.x + (long long)r * TILE;
            if (row < n) {
                // Only an overflow to +inf for every centre leaves no winner: the first.
                const int label = index[r] < k ? index[r] : 0;
                if (changed != nullptr && labels[row] != label) ++my_changed;
                labels[row] = label;
                mind[row] = fmaxf(best[r] + x_sq[row], 0.0f);
            }
        }
    }
    __syncthreads();  // block_changed was set before any thread adds to it
    if (changed != nullptr && my_changed != 0) atomicAdd(&block_changed, my_changed);
    __syncthreads();
    if (changed != nullptr && threadIdx.x == 0 && block_changed != 0)
        atomicAdd(changed, block_changed);
}
