// One Lloyd step of k-means in a single pass over the data (explorer/kmeans.py, small k·d).
//
// For each row x: the nearest centre by ||c||^2 - 2 x·c (the same expression as the
// GEMM path, first index on ties, as argmin), the squared distance to it (clipped at
// 0), and, when `sums` is given, x and a count of 1 added to that cluster's float64
// accumulators. Accumulation follows the accurate update of "Parallelization of the
// k-means Algorithm in a Spectral Clustering Chain on CPU-GPU Platforms": values are summed
// in float64 within a warp, then a block, then across blocks; no float32 running sum
// ever grows with n.
//
// Why warp aggregation: float64 atomicAdd on shared memory is a compare-and-swap loop,
// and with few clusters every thread of a block hits the same k·(d+1) addresses; one
// atomic per row and dimension made a step over millions of rows take milliseconds
// instead of tens of microseconds. Here each warp first groups its lanes by cluster
// (one group per distinct label among its 32 rows) and sums each group, so a block's
// shared accumulators see one atomic per group and dimension. A group is summed
// column-wise: lane t adds column t of the group's rows (read again, from L1), one
// pass over the warp's 32 rows per 32 columns in all, where a shuffle reduction per
// group and column took 5 double shuffles (10 groups x 10 columns x 5 per 32 rows at
// an embedding's k = d = 10, against 100 FMAs a row for the distances: by count of
// instructions, most of the step; not profiled apart).
//
// Launch: 2-D grid, x whole warps (grid-stride over rows), y one k-means restart each,
// dynamic shared memory k*(d+1) doubles when `sums` is non-null. Centres are read
// through the read-only cache: every lane of a warp reads the same centre value at
// once (a broadcast).
//
// Restarts (explorer.kmeans._lloyd_starts runs them side by side): with `slots`, the
// blocks of grid row y serve restart s = slots[y], whose centres, labels, distances
// and sums are the s-th of arrays holding every restart (neg2c S x k x d, c_sq S x k,
// labels and mind S x n, sums S x k x (d+1)); without, the one restart of a 1-row grid.
// With `changed`, the label a row held before is read first and the rows whose label
// changes are counted into changed[s] (one atomic per block). With `state`, the blocks
// of a restart whose state is not 0 (running) return at once (see lloyd_update).

#define FULL_MASK 0xffffffffu

extern "C" __global__ void kmeans_step(const float* __restrict__ X,      // n x d, row-major
                                       const float* __restrict__ x_sq,   // n
                                       const float* __restrict__ neg2c,  // k x d: -2 c
                                       const float* __restrict__ c_sq,   // k: ||c||^2
                                       long long n, int d, int k,
                                       int* __restrict__ labels,         // n (out)
                                       float* __restrict__ mind,         // n (out)
                                       double* __restrict__ sums,        // k x (d+1), or null
                                       const int* __restrict__ slots,    // grid rows, or null
                                       int* __restrict__ changed,        // S, or null
                                       const int* __restrict__ state) {  // S, or null
    extern __shared__ double part[];
    __shared__ int block_changed;
    const int width = d + 1;
    const int lane = threadIdx.x & 31;
    const long long slot = slots != nullptr ? slots[blockIdx.y] : 0;
    if (state != nullptr && state[slot] != 0) return;  // a stopped or paused restart
    neg2c += slot * k * d;
    c_sq += slot * k;
    labels += slot * n;
    mind += slot * n;
    if (sums != nullptr) sums += slot * k * width;
    if (threadIdx.x == 0) block_changed = 0;
    if (sums != nullptr) {
        for (int i = threadIdx.x; i < k * width; i += blockDim.x) part[i] = 0.0;
    }
    __syncthreads();
    int my_changed = 0;
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
            if (changed != nullptr && labels[row] != best) ++my_changed;
            labels[row] = best;
            mind[row] = fmaxf(best_value + x_sq[row], 0.0f);
        }
        if (sums == nullptr) continue;
        // Lane l of this warp holds row warp_row0 + l.
        const long long warp_row0 = base + (threadIdx.x & ~31);
        unsigned pending = __ballot_sync(FULL_MASK, valid);
        while (pending != 0u) {
            const int cluster = __shfl_sync(FULL_MASK, best, __ffs(pending) - 1);
            const unsigned group = __ballot_sync(FULL_MASK, valid && best == cluster);
            pending &= ~group;
            double* s = part + cluster * width;
            // Lane t sums column t (and t + 32, ...) over the group's rows in lane
            // order, reading them from L1 (this warp just read them): one pass over
            // the group per 32 columns and one atomic per column, no shuffles.
            for (int t = lane; t < d; t += 32) {
                double v = 0.0;
                for (unsigned rest = group; rest != 0u; rest &= rest - 1u)
                    v += (double)X[(warp_row0 + (__ffs(rest) - 1)) * d + t];
                atomicAdd(s + t, v);
            }
            if (lane == 0) atomicAdd(s + d, (double)__popc(group));
        }
    }
    if (changed != nullptr && my_changed != 0) atomicAdd(&block_changed, my_changed);
    __syncthreads();
    if (changed != nullptr && threadIdx.x == 0 && block_changed != 0)
        atomicAdd(changed + slot, block_changed);
    if (sums != nullptr) {
        for (int i = threadIdx.x; i < k * width; i += blockDim.x) {
            if (part[i] != 0.0) atomicAdd(sums + i, part[i]);
        }
    }
}


// ---------------------------------------------------------------- the GEMM path's kernels
//
// For larger k·d, explorer.kmeans forms the cross terms -2 X C^T with cuBLAS a block
// of rows at a time; these kernels do the rest of the step in one pass each, where
// the CPU's code (argmin, gather, a float64 copy of the data and a sparse product)
// took about fifteen passes.

// Nearest centre of each row of a block of cross terms D (rows x k, row-major):
// argmin_j (D[r, j] + ||c_j||^2), first index on ties (as argmin over the same float32
// sums), and the squared distance max(D[r, j] + ||c_j||^2 + ||x_r||^2, 0) to it. One
// warp per row: the row is read coalesced, lanes keep their own best, shuffles merge.
// With `changed`, the rows whose label differs from the one held before are counted
// into *changed (one atomic per block).
extern "C" __global__ void nearest_centre(const float* __restrict__ D,     // rows x k
                                          const float* __restrict__ c_sq,  // k
                                          const float* __restrict__ x_sq,  // rows
                                          long long rows, int k,
                                          int* __restrict__ labels,        // rows (out)
                                          float* __restrict__ mind,        // rows (out)
                                          int* __restrict__ changed) {     // 1, or null
    __shared__ int block_changed;
    if (threadIdx.x == 0) block_changed = 0;
    __syncthreads();
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long r = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < rows;
         r += warps) {
        const float* d = D + r * k;
        float best = __int_as_float(0x7f800000);  // +inf
        int index = k;                            // past every centre: loses every tie
        for (int j = lane; j < k; j += 32) {
            const float v = d[j] + __ldg(c_sq + j);
            if (v < best) {  // a lane sees its columns in increasing order
                best = v;
                index = j;
            }
        }
        for (int offset = 16; offset > 0; offset >>= 1) {
            const float other = __shfl_xor_sync(FULL_MASK, best, offset);
            const int other_index = __shfl_xor_sync(FULL_MASK, index, offset);
            if (other < best || (other == best && other_index < index)) {
                best = other;
                index = other_index;
            }
        }
        if (lane == 0) {
            // Only an overflow to +inf in every column leaves no winner: take the first.
            const int label = index < k ? index : 0;
            if (changed != nullptr && labels[r] != label) atomicAdd(&block_changed, 1);
            labels[r] = label;
            mind[r] = fmaxf(best + x_sq[r], 0.0f);
        }
    }
    __syncthreads();
    if (changed != nullptr && threadIdx.x == 0 && block_changed != 0)
        atomicAdd(changed, block_changed);
}

// Per-cluster float64 sums of the rows of X, and counts: sums[c, t] += X[i, t] and
// sums[c, d] += 1 for every row i of label c (the same accurate update: float64
// from the first addition on).
//
// Each warp walks its own contiguous run of rows; lane l covers the columns
// col0 + l + 32 p (p < COLS) of the d + 1 (column d is the count). A lane keeps running
// float64 sums while consecutive rows share a label and adds them to the accumulator
// when the label changes: rows ordered by cluster (as data sets and embeddings often
// are) cost one atomic per run, shuffled labels one per row and column, which then
// rarely collide. With `order` (the rows sorted by label, a permutation of 0..n-1)
// the rows are visited in that order, so every run is a whole cluster's share of the
// warp: about one atomic per cluster and column in all, whatever the labels' order.
// The accumulator is the block's shared memory when `use_shared` (k (d + 1) doubles;
// added to `sums` at the end), else `sums` itself.
//
// Launch: 1-D grid of whole warps; columns beyond 32 * COLS take further launches
// with col0 advanced.
#define SUM_COLS 4

extern "C" __global__ void cluster_sums(const float* __restrict__ X,       // n x d
                                        const int* __restrict__ labels,    // n
                                        const long long* __restrict__ order,  // n, or null
                                        long long n, int d, int k, int col0,
                                        int use_shared,
                                        double* __restrict__ sums) {       // k x (d+1)
    extern __shared__ double part[];
    const int width = d + 1;
    double* acc = use_shared ? part : sums;
    if (use_shared) {
        for (int i = threadIdx.x; i < k * width; i += blockDim.x) part[i] = 0.0;
        __syncthreads();
    }
    const int lane = threadIdx.x & 31;
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    const long long per_warp = (n + warps - 1) / warps;
    const long long begin = warp * per_warp;
    const long long end = begin + per_warp < n ? begin + per_warp : n;

    double run[SUM_COLS];
    for (int p = 0; p < SUM_COLS; ++p) run[p] = 0.0;
    int current = -1;
    for (long long base = begin; base < end; base += 32) {
        // 32 labels at once, then handed out by shuffles: one load per 32 rows.
        long long my_row = base + lane;
        if (order != nullptr && my_row < end) my_row = order[my_row];
        const int mine = base + lane < end ? labels[my_row] : -1;
        const int count = end - base < 32 ? (int)(end - base) : 32;
        for (int i = 0; i < count; ++i) {
            const int label = __shfl_sync(FULL_MASK, mine, i);
            const long long row = __shfl_sync(FULL_MASK, my_row, i);
            const float* x = X + row * d;
            if (label != current) {  // the same for every lane of the warp
                if (current >= 0) {
                    for (int p = 0; p < SUM_COLS; ++p) {
                        const int col = col0 + lane + 32 * p;
                        if (col < width) atomicAdd(acc + (long long)current * width + col, run[p]);
                        run[p] = 0.0;
                    }
                }
                current = label;
            }
            for (int p = 0; p < SUM_COLS; ++p) {
                const int col = col0 + lane + 32 * p;
                if (col < d) run[p] += (double)x[col];
                else if (col == d) run[p] += 1.0;
            }
        }
    }
    if (current >= 0) {
        for (int p = 0; p < SUM_COLS; ++p) {
            const int col = col0 + lane + 32 * p;
            if (col < width) atomicAdd(acc + (long long)current * width + col, run[p]);
        }
    }
    if (use_shared) {
        __syncthreads();
        for (int i = threadIdx.x; i < k * width; i += blockDim.x) {
            if (part[i] != 0.0) atomicAdd(sums + i, part[i]);
        }
    }
}

// Sum over rows of ||x_i - c_{label i}||^2, formed in float64 (the inertia): each
// thread one element at a time, a block's partial sums merged by shuffles and shared
// memory, one atomic per block. Launch: 2-D grid, blockDim a multiple of 32 (<= 1024);
// grid row y forms the inertia of restart y: centres + y * center_stride, labels
// + y * n, into total[y] (one restart: a 1-row grid).
extern "C" __global__ void squared_error(const float* __restrict__ X,        // n x d
                                         const double* __restrict__ centers, // k x d
                                         const int* __restrict__ labels,     // n
                                         long long n, int d,
                                         double* __restrict__ total,         // 1
                                         long long center_stride) {
    __shared__ double warp_sums[32];
    centers += blockIdx.y * center_stride;
    labels += blockIdx.y * n;
    total += blockIdx.y;
    const long long size = n * d;
    double acc = 0.0;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < size;
         e += (long long)gridDim.x * blockDim.x) {
        const long long row = e / d;
        const int col = (int)(e - row * d);
        const double diff = (double)X[e] - centers[(long long)labels[row] * d + col];
        acc = fma(diff, diff, acc);
    }
    for (int offset = 16; offset > 0; offset >>= 1)
        acc += __shfl_down_sync(FULL_MASK, acc, offset);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = lane < (blockDim.x >> 5) ? warp_sums[lane] : 0.0;
        for (int offset = 16; offset > 0; offset >>= 1)
            acc += __shfl_down_sync(FULL_MASK, acc, offset);
        if (lane == 0) atomicAdd(total, acc);
    }
}


// The update step of Lloyd's algorithm for the restarts that ran a step
// (explorer.kernels.kmeans.DeviceStarts): block b serves restart s = slots[b].
// From its float64 sums and counts (S x k x (d+1)) the new centres (the means; an
// empty cluster keeps its centre, for the host to re-seed), written over `centers`
// (S x k x d, float64) with the float32 terms the next step compares (neg2c = -2 c,
// c_sq = ||c||^2, as explorer.kernels.kmeans._float32_centres forms them) and the
// counts (S x k). status[3 b .. 3 b + 2] = (labels changed, empty clusters, squared
// centre shift summed over the centres). The sums and changed[s] are zeroed for the
// next step. Launch: one block per restart, blockDim a multiple of 32 (<= 1024).
//
// With `state` (S, 0 running, 1 stopped, 2 paused), the stopping rule runs here too,
// so the host need not look after every step: a restart not running is skipped (its
// kmeans_step blocks returned at once); else n_iter[s] counts the step, consistent[s]
// records whether no label changed and no cluster is empty, status goes to
// status[3 s ..], and the restart stops (1) when no label changed or, without an
// empty cluster, the shift is at most tol_abs, or at max_iter steps; with an empty
// cluster it pauses (2) for the host to re-seed it (explorer.kmeans._lloyd_starts's
// rule, one decision per step).
extern "C" __global__ void lloyd_update(const int* __restrict__ slots, int k, int d,
                                        double* __restrict__ sums,     // S x k x (d+1)
                                        int* __restrict__ changed,     // S
                                        double* __restrict__ centers,  // S x k x d
                                        float* __restrict__ neg2c,     // S x k x d
                                        float* __restrict__ c_sq,      // S x k
                                        double* __restrict__ counts,   // S x k
                                        double* __restrict__ status,   // 3 per block
                                        int* __restrict__ state,       // S, or null
                                        int* __restrict__ n_iter,      // S (with state)
                                        int* __restrict__ consistent,  // S (with state)
                                        double tol_abs, int max_iter) {
    __shared__ double warp_shift[32];
    __shared__ int warp_empty[32];
    const long long slot = slots[blockIdx.x];
    if (state != nullptr && state[slot] != 0) return;
    const int width = d + 1;
    double* s = sums + slot * k * width;
    double* c = centers + slot * k * d;
    float* m = neg2c + slot * k * d;
    double shift = 0.0;
    for (int e = threadIdx.x; e < k * d; e += blockDim.x) {
        const int j = e / d, t = e - j * d;
        const double count = s[(long long)j * width + d];
        const double old = c[e];
        const double mean = count > 0.0 ? s[(long long)j * width + t] / count : old;
        const double diff = mean - old;
        shift = fma(diff, diff, shift);
        c[e] = mean;
        m[e] = -2.0f * (float)mean;
    }
    int empty = 0;
    for (int j = threadIdx.x; j < k; j += blockDim.x) {
        const double count = s[(long long)j * width + d];
        counts[slot * k + j] = count;
        empty += count == 0.0;
    }
    __syncthreads();  // every centre written and every sum read
    for (int j = threadIdx.x; j < k; j += blockDim.x) {
        float acc = 0.0f;
        for (int t = 0; t < d; ++t) {
            const float v = (float)c[(long long)j * d + t];
            acc += v * v;
        }
        c_sq[slot * k + j] = acc;
    }
    for (int e = threadIdx.x; e < k * width; e += blockDim.x) s[e] = 0.0;
    for (int offset = 16; offset > 0; offset >>= 1) {
        shift += __shfl_down_sync(FULL_MASK, shift, offset);
        empty += __shfl_down_sync(FULL_MASK, empty, offset);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        warp_shift[warp] = shift;
        warp_empty[warp] = empty;
    }
    __syncthreads();
    if (warp == 0) {
        const bool held = lane < (blockDim.x >> 5);
        shift = held ? warp_shift[lane] : 0.0;
        empty = held ? warp_empty[lane] : 0;
        for (int offset = 16; offset > 0; offset >>= 1) {
            shift += __shfl_down_sync(FULL_MASK, shift, offset);
            empty += __shfl_down_sync(FULL_MASK, empty, offset);
        }
        if (lane == 0) {
            const long long at = state != nullptr ? slot : blockIdx.x;
            const int moved = changed[slot];
            status[3 * at] = (double)moved;
            status[3 * at + 1] = (double)empty;
            status[3 * at + 2] = shift;
            changed[slot] = 0;
            if (state != nullptr) {
                const int steps = ++n_iter[slot];
                consistent[slot] = moved == 0 && empty == 0;
                if (empty > 0) state[slot] = 2;
                else if (moved == 0 || shift <= tol_abs || steps >= max_iter) state[slot] = 1;
            }
        }
    }
}

// nearest_centre for cross terms D formed in TF32 (explorer.kernels.kmeans: the checked
// assignment): the nearest and second-nearest by D[r, j] + ||c_j||^2, and the row is
// settled only when their gap exceeds twice the bound on the error of either,
// E = a ||x_r|| max_j ||c_j|| + b max_j ||c_j||^2 (a, b from the TF32 rounding of both
// operands, the float32 accumulation and the float32 ||c||^2; a smaller `a` when D
// comes from the split product, see split_tf32). Then no other centre can be nearer
// in exact arithmetic, and the label, its distance and the label-change count are
// written as nearest_centre writes them. Otherwise the row is left as it was and its
// index (row0 + r) appended to `flagged` for an exact re-check.
//
// With `n_alt`, the rows whose gap is at most twice a_alt ||x_r|| max||c|| +
// b max||c||^2 (settled or not) are counted into *n_alt (one atomic per block): with
// D from the split product and a_alt the plain TF32 product's `a`, about the rows a
// plain TF32 product would have re-checked (the host's choice between the two).
extern "C" __global__ void nearest_centre_checked(
        const float* __restrict__ D, const float* __restrict__ c_sq,
        const float* __restrict__ x_sq, long long rows, int k,
        int* __restrict__ labels, float* __restrict__ mind, int* __restrict__ changed,
        const float* __restrict__ cmax_sq,  // 1: max_j ||c_j||^2
        float a, float b, long long row0,
        long long* __restrict__ flagged, unsigned long long* __restrict__ n_flagged,
        float a_alt, unsigned long long* __restrict__ n_alt) {  // n_alt: 1, or null
    __shared__ int block_changed;
    __shared__ unsigned block_alt;
    if (threadIdx.x == 0) {
        block_changed = 0;
        block_alt = 0u;
    }
    __syncthreads();
    const float inf = __int_as_float(0x7f800000);
    const float cm_sq = *cmax_sq;
    const float cm = sqrtf(cm_sq);
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long r = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < rows;
         r += warps) {
        const float* d = D + r * k;
        float best = inf, second = inf;
        int index = k;
        for (int j = lane; j < k; j += 32) {
            const float v = d[j] + __ldg(c_sq + j);
            if (v < best) {
                second = best;
                best = v;
                index = j;
            } else if (v < second) {
                second = v;
            }
        }
        for (int offset = 16; offset > 0; offset >>= 1) {
            const float other = __shfl_xor_sync(FULL_MASK, best, offset);
            const float other_second = __shfl_xor_sync(FULL_MASK, second, offset);
            const int other_index = __shfl_xor_sync(FULL_MASK, index, offset);
            if (other < best || (other == best && other_index < index)) {
                second = fminf(best, other_second);
                best = other;
                index = other_index;
            } else {
                second = fminf(second, other);
            }
        }
        if (lane == 0) {
            const float norm = sqrtf(x_sq[r]);
            const float bound = a * norm * cm + b * cm_sq;
            // A NaN or an overflow never settles a row: the exact pass decides.
            const bool settled = index < k && (second - best > 2.0f * bound);
            if (settled) {
                if (changed != nullptr && labels[r] != index) atomicAdd(&block_changed, 1);
                labels[r] = index;
                mind[r] = fmaxf(best + x_sq[r], 0.0f);
            } else {
                flagged[atomicAdd(n_flagged, 1ull)] = row0 + r;
            }
            if (n_alt != nullptr &&
                !(index < k && (second - best > 2.0f * (a_alt * norm * cm + b * cm_sq))))
                atomicAdd(&block_alt, 1u);
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        if (changed != nullptr && block_changed != 0) atomicAdd(changed, block_changed);
        if (n_alt != nullptr && block_alt != 0u)
            atomicAdd(n_alt, (unsigned long long)block_alt);
    }
}

// The operands of the split ("3xTF32") product of the checked assignment
// (explorer.kernels.kmeans.split_rows / split_centres): each float32 value v becomes
// hi = v rounded to TF32 (10 stored mantissa bits, to nearest, ties to even; done here
// on the bits, so no tensor-core conversion can change it) and lo = v - hi (exact in
// float32: hi and v are within a factor 2 of each other, Sterbenz; |lo| <= 2^-11 |v|).
// Row r of src (rows x d, row-major) becomes row r of dst (rows x 3d) as
//   lo_at == 1: [hi, lo, hi]   (the data),
//   lo_at == 2: [hi, hi, lo]   (the centres),
// so one TF32 GEMM over the 3d columns forms x_hi.c_hi + x_lo.c_hi + x_hi.c_lo, which
// misses only x_lo.c_lo (<= 2^-22 |x_t c_t| a term). An infinity or a NaN is copied as
// hi with lo = 0 (the checked rule never settles such a row); a value that would round
// past the largest float is truncated instead (lo then keeps its sign, still exact).
// Launch: 1-D grid of whole warps, grid-stride over rows, a warp per row.
__device__ __forceinline__ float tf32_round(float v) {
    const unsigned bits = __float_as_uint(v);
    if ((bits & 0x7f800000u) == 0x7f800000u) return v;  // inf, NaN
    unsigned hi = (bits + 0x0fffu + ((bits >> 13) & 1u)) & ~0x1fffu;
    if ((hi & 0x7f800000u) == 0x7f800000u) hi = bits & ~0x1fffu;  // past FLT_MAX
    return __uint_as_float(hi);
}

extern "C" __global__ void split_tf32(const float* __restrict__ src,  // rows x d
                                      long long rows, int d, int lo_at,
                                      float* __restrict__ dst) {       // rows x 3d
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long r = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < rows;
         r += warps) {
        const float* x = src + r * d;
        float* out = dst + r * 3 * (long long)d;
        for (int t = lane; t < d; t += 32) {
            const float v = x[t];
            const float hi = tf32_round(v);
            const bool finite = (__float_as_uint(v) & 0x7f800000u) != 0x7f800000u;
            const float lo = finite ? __fsub_rn(v, hi) : 0.0f;
            out[t] = hi;
            out[d + t] = lo_at == 1 ? lo : hi;
            out[2 * d + t] = lo_at == 2 ? lo : hi;
        }
    }
}


// ---------------------------------------------------------------- greedy k-means++
//
// One step of greedy k-means++ for S restarts at once (explorer.kmeans
// .kmeans_plusplus_starts on the GPU): restart s draws `trials` rows by the running
// sum `cumulative` (S x n, float64) of its squared distances to the nearest chosen
// centre, each the first row whose running sum reaches u * total (numpy.searchsorted,
// side "left", as the CPU draws), and keeps the one leaving the least potential.
//
// kpp_trials: grid (x, S), blockDim 256. Every block finds its restart's draws (one
// binary search per trial), holds the drawn rows in shared memory, and adds
// sum_i min(closest[s, i], ||x_i - x_t||^2) over its rows to potential[s, t] (float64,
// zeroed by the caller). The squared distance is x_sq[i] - 2 x_i·x_t + x_sq[t] in
// float32, clipped at 0 (the form of explorer.kmeans.sqdist). Block (0, s) writes the
// draws to cand[s, t].
// kpp_choose: grid (x, S). The trial of least potential (the first of equals) becomes
// centre c of restart s (block (0, s) writes centers[s, c] in float64) and closest[s]
// is lowered to the distances to it.
#define KPP_MAX_TRIALS 16
#define KPP_MAX_D 64

__device__ long long kpp_draw(const double* cum, long long n, double target) {
    long long lo = 0, hi = n;  // first index with cum[index] >= target, n if none
    while (lo < hi) {
        const long long mid = (lo + hi) >> 1;
        if (cum[mid] < target) lo = mid + 1;
        else hi = mid;
    }
    return lo < n ? lo : n - 1;
}

__device__ float kpp_sqdist(const float* x, float xs, const float* c, float cs, int d) {
    float acc = 0.0f;
    for (int t = 0; t < d; ++t) acc = fmaf(x[t], -2.0f * c[t], acc);
    return fmaxf(acc + cs + xs, 0.0f);
}

extern "C" __global__ void kpp_trials(const float* __restrict__ X, const float* __restrict__ x_sq,
                                      long long n, int d,
                                      const float* __restrict__ closest,   // S x n
                                      const double* __restrict__ cum,      // S x n
                                      const double* __restrict__ uniforms, // S x trials
                                      int trials,
                                      double* __restrict__ potential,      // S x trials
                                      long long* __restrict__ cand) {      // S x trials
    __shared__ float rows[KPP_MAX_TRIALS * KPP_MAX_D];
    __shared__ float rows_sq[KPP_MAX_TRIALS];
    __shared__ double block_sum[KPP_MAX_TRIALS][8];
    const int s = blockIdx.y;
    const double* c = cum + (long long)s * n;
    if (threadIdx.x < trials) {
        const double target = uniforms[s * trials + threadIdx.x] * c[n - 1];
        const long long row = kpp_draw(c, n, target);
        rows_sq[threadIdx.x] = x_sq[row];
        for (int t = 0; t < d; ++t) rows[threadIdx.x * KPP_MAX_D + t] = X[row * d + t];
        if (blockIdx.x == 0) cand[s * trials + threadIdx.x] = row;
    }
    __syncthreads();
    double acc[KPP_MAX_TRIALS];
    for (int t = 0; t < KPP_MAX_TRIALS; ++t) acc[t] = 0.0;
    const float* near = closest + (long long)s * n;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const float* x = X + i * d;
        const float xs = x_sq[i], now = near[i];
        for (int t = 0; t < trials; ++t)
            acc[t] += fminf(now, kpp_sqdist(x, xs, rows + t * KPP_MAX_D, rows_sq[t], d));
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int t = 0; t < trials; ++t) {
        double v = acc[t];
        for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(FULL_MASK, v, offset);
        if (lane == 0) block_sum[t][warp] = v;
    }
    __syncthreads();
    if (threadIdx.x < trials) {
        double v = 0.0;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) v += block_sum[threadIdx.x][w];
        atomicAdd(potential + s * trials + threadIdx.x, v);
    }
}

extern "C" __global__ void kpp_choose(const float* __restrict__ X, const float* __restrict__ x_sq,
                                      long long n, int d, int k, int c, int trials,
                                      const double* __restrict__ potential,  // S x trials
                                      const long long* __restrict__ cand,    // S x trials
                                      float* __restrict__ closest,           // S x n
                                      double* __restrict__ centers) {        // S x k x d
    __shared__ float row_x[KPP_MAX_D];
    const int s = blockIdx.y;
    int best = 0;
    for (int t = 1; t < trials; ++t)
        if (potential[s * trials + t] < potential[s * trials + best]) best = t;
    const long long row = cand[s * trials + best];
    for (int t = threadIdx.x; t < d; t += blockDim.x) {
        row_x[t] = X[row * d + t];
        if (blockIdx.x == 0) centers[((long long)s * k + c) * d + t] = (double)X[row * d + t];
    }
    __syncthreads();
    const float rs = x_sq[row];
    float* near = closest + (long long)s * n;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        near[i] = fminf(near[i], kpp_sqdist(X + i * d, x_sq[i], row_x, rs, d));
}
