// Per-column statistics of a row-major n × d matrix in one pass: minimum, maximum,
// and the float64 sums of (x - c) and (x - c)^2 for a given centre c per column.
//
// CuPy's reductions over axis 0 of a row-major array give each column to one thread
// block, whose threads read it with a stride of d values: a few columns take a few
// blocks far below bandwidth. Here a block covers a tile of w = min(d, 256) columns
// and a slab of rows; thread t works on column c0 + t % w of rows r0 + t / w, then every
// (256 / w)-th row, so the threads of a block read whole consecutive rows (w = d) or a
// contiguous tile of one row (w = 256) at each step. The block folds its threads'
// partials of one column in shared memory and writes one partial per (slab, column);
// the caller folds the slabs.
//
// NaN propagates into the minimum and the maximum (as NumPy's min and max), so a
// column holds a non-finite value iff its minimum or maximum is not finite.

#define THREADS 256

__device__ __forceinline__ double infinity() { return __longlong_as_double(0x7ff0000000000000LL); }

template <typename T>
__device__ __forceinline__ void column_stats_impl(
        const T* __restrict__ X, long long n, int d, long long ld, long long slab_rows,
        const double* __restrict__ centre, double* __restrict__ lo_out,
        double* __restrict__ hi_out, double* __restrict__ s1_out,
        double* __restrict__ s2_out) {
    __shared__ double s_lo[THREADS], s_hi[THREADS], s_s1[THREADS], s_s2[THREADS];
    const int t = threadIdx.x;
    const int c0 = blockIdx.x * THREADS;
    const int w = min(d - c0, THREADS);
    const int step = THREADS / w;          // rows per step
    const int col = t % w, sub = t / w;    // this thread's column and row offset
    const long long r0 = (long long)blockIdx.y * slab_rows;
    const long long r1 = min(n, r0 + slab_rows);
    double lo = infinity(), hi = -infinity(), s1 = 0.0, s2 = 0.0;
    if (sub < step) {
        const int c = c0 + col;
        const double cc = centre[c];
        for (long long r = r0 + sub; r < r1; r += step) {
            const double v = (double)X[r * ld + c];
            lo = (v < lo || v != v) ? v : lo;
            hi = (v > hi || v != v) ? v : hi;
            const double u = v - cc;
            s1 += u;
            s2 += u * u;
        }
    }
    s_lo[t] = lo; s_hi[t] = hi; s_s1[t] = s1; s_s2[t] = s2;
    __syncthreads();
    if (t < w) {  // fold the threads of column c0 + t
        for (int o = t + w; o < step * w; o += w) {
            const double a = s_lo[o], b = s_hi[o];
            lo = (a < lo || a != a) ? a : lo;
            hi = (b > hi || b != b) ? b : hi;
            s1 += s_s1[o];
            s2 += s_s2[o];
        }
        const long long k = (long long)blockIdx.y * d + c0 + t;
        lo_out[k] = lo; hi_out[k] = hi; s1_out[k] = s1; s2_out[k] = s2;
    }
}

extern "C" __global__ void column_stats_f32(
        const float* __restrict__ X, long long n, int d, long long ld, long long slab_rows,
        const double* __restrict__ centre, double* lo, double* hi, double* s1, double* s2) {
    column_stats_impl<float>(X, n, d, ld, slab_rows, centre, lo, hi, s1, s2);
}

extern "C" __global__ void column_stats_f64(
        const double* __restrict__ X, long long n, int d, long long ld, long long slab_rows,
        const double* __restrict__ centre, double* lo, double* hi, double* s1, double* s2) {
    column_stats_impl<double>(X, n, d, ld, slab_rows, centre, lo, hi, s1, s2);
}
