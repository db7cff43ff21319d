// method="grid": the ε-neighbourhood graph of low-dimensional data through a uniform
// grid of cell side >= sqrt(t), in O(n · neighbours) work instead of n².
//
// Pipeline (launched by kernels/grid.py): grid_bin counts points per cell, a scan
// gives cell starts, grid_scatter writes the points (and their original indices)
// sorted by cell; grid_count counts each row's neighbours over the 3^DC cells around
// its own, a scan gives the CSR row starts, grid_fill writes the entries, and
// sort_rows_rank (rowsort.cuh) puts each row's columns in ascending order.
//
// Cells live on a torus: along a chosen dimension k the cell coordinate is
// floor((x_k - lo_k) / h_k) taken modulo m_k (m_k = the number of cells when they fit
// the table, otherwise >= 3). Cells that alias onto one torus cell only add
// candidates, which the exact test rejects; the 3 neighbouring torus coordinates
// of a cell are distinct when m_k >= 3, so no candidate is ever visited twice.
// Why a cell side of sqrt(t)·(1 + 1e-4) and coordinates in double suffice: see
// docs/fast-builders.md, "grid: why no neighbour is missed".
//
// Compile-time: GRID_DIM = d (the launcher compiles one module per d <= 16 and edge
// rule), METRIC and FAST_EXP (edge_rule.cuh: the edge test and weight of every kernel).
// Template: DC = number of cell dimensions (1..4), chosen per data set by the launcher.
#ifndef GRID_DIM
#error "compile with -DGRID_DIM=<number of features>"
#endif

#include "edge_rule.cuh"
#include "rowsort.cuh"

static_assert(METRIC_SQDIST, "the grid serves distance rules only (METRIC 0 or 1)");

// Layout of the two small parameter arrays the launcher uploads (MAX_CELL_DIMS = 4):
//   gd (double): lo[4], inv_h[4]
//   gi (int64):  cells[4], m[4], stride[4], dim[4]
#define MAX_CELL_DIMS 4

template <int DC>
struct Grid {
    double lo[DC];
    double inv_h[DC];
    long long cells[DC];
    long long m[DC];
    long long stride[DC];
    int dim[DC];
};

template <int DC>
__device__ __forceinline__ Grid<DC> load_grid(const double* __restrict__ gd,
                                              const long long* __restrict__ gi)
{
    Grid<DC> g;
#pragma unroll
    for (int k = 0; k < DC; ++k) {
        g.lo[k] = gd[k];
        g.inv_h[k] = gd[MAX_CELL_DIMS + k];
        g.cells[k] = gi[k];
        g.m[k] = gi[MAX_CELL_DIMS + k];
        g.stride[k] = gi[2 * MAX_CELL_DIMS + k];
        g.dim[k] = (int)gi[3 * MAX_CELL_DIMS + k];
    }
    return g;
}

__device__ __forceinline__ void load_point(const float* __restrict__ base, long long p,
                                           float (&x)[GRID_DIM])
{
    const float* src = base + p * GRID_DIM;
    if constexpr (GRID_DIM % 4 == 0) {
#pragma unroll
        for (int k = 0; k < GRID_DIM; k += 4) {
            const float4 v = __ldg(reinterpret_cast<const float4*>(src + k));
            x[k] = v.x; x[k + 1] = v.y; x[k + 2] = v.z; x[k + 3] = v.w;
        }
    } else if constexpr (GRID_DIM % 2 == 0) {
#pragma unroll
        for (int k = 0; k < GRID_DIM; k += 2) {
            const float2 v = __ldg(reinterpret_cast<const float2*>(src + k));
            x[k] = v.x; x[k + 1] = v.y;
        }
    } else {
#pragma unroll
        for (int k = 0; k < GRID_DIM; ++k) x[k] = __ldg(src + k);
    }
}

// Feature `dim` of a point held in registers, without indexing the register array
// at run time (which would move it to local memory).
__device__ __forceinline__ float feature(const float (&x)[GRID_DIM], int dim)
{
    float v = x[0];
#pragma unroll
    for (int k = 1; k < GRID_DIM; ++k) v = (k == dim) ? x[k] : v;
    return v;
}

// Torus coordinate of a point along cell dimension k. The clamp keeps the
// coordinate of the bounding box's top face in the last cell; clamping and the
// modulo are monotone and merge cells, so neighbours stay within one cell.
template <int DC>
__device__ __forceinline__ long long torus_coord(const Grid<DC>& g, int k, float v)
{
    const double q = floor(((double)v - g.lo[k]) * g.inv_h[k]);
    long long c = q > 0.0 ? (long long)q : 0;
    if (c >= g.cells[k]) c = g.cells[k] - 1;
    return g.m[k] < g.cells[k] ? c % g.m[k] : c;
}

template <int DC>
__device__ __forceinline__ void torus_coords(const Grid<DC>& g, const float (&x)[GRID_DIM],
                                             long long (&w)[DC])
{
#pragma unroll
    for (int k = 0; k < DC; ++k) w[k] = torus_coord(g, k, feature(x, g.dim[k]));
}

// Squared distance, accumulated feature by feature with edge_rule.cuh's pair_step,
// k = 0..d-1 in order: the arithmetic of the CSR kernels, so both decide every pair
// identically and weigh it with the same bits; and the same whichever point comes
// first, (a - b)² == (b - a)² exactly.
__device__ __forceinline__ float sqdist(const float (&a)[GRID_DIM], const float (&b)[GRID_DIM])
{
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < GRID_DIM; ++k) acc = pair_step(acc, a[k], b[k]);
    return acc;
}

// Calls span(begin, end) for the sorted-point ranges of the 3^DC torus cells around
// w. The innermost cell dimension has stride 1, so its (up to) three cells are one
// contiguous range of the cell-sorted points, split in two only where the torus
// wraps: 3^(DC-1) or 2·3^(DC-1) ranges instead of 3^DC cells.
template <int DC, typename Span>
__device__ __forceinline__ void for_each_neighbour_range(
    const Grid<DC>& g, const long long (&w)[DC], const int* __restrict__ cell_start, Span&& span)
{
    int combos = 1;
#pragma unroll
    for (int k = 0; k < DC - 1; ++k) combos *= 3;
    const int in = DC - 1;
    const long long c = w[in], m = g.m[in];
    long long a0, b0, a1 = 1, b1 = 0;  // second range empty unless the torus wraps here
    if (m < g.cells[in]) {  // wrapped dimension, m >= 3
        if (c == 0) { a0 = 0; b0 = 1; a1 = m - 1; b1 = m - 1; }
        else if (c == m - 1) { a0 = m - 2; b0 = m - 1; a1 = 0; b1 = 0; }
        else { a0 = c - 1; b0 = c + 1; }
    } else {
        a0 = c > 0 ? c - 1 : 0;
        b0 = c + 1 < m ? c + 1 : m - 1;
    }
    for (int o = 0; o < combos; ++o) {
        long long base = 0;
        bool inside = true;
        int rest = o;
#pragma unroll
        for (int k = 0; k < DC - 1; ++k) {
            long long nb = w[k] + (rest % 3) - 1;
            rest /= 3;
            if (g.m[k] < g.cells[k]) {
                nb = nb < 0 ? nb + g.m[k] : (nb >= g.m[k] ? nb - g.m[k] : nb);
            } else if (nb < 0 || nb >= g.m[k]) {
                inside = false;
            }
            base += nb * g.stride[k];
        }
        if (!inside) continue;
        span(cell_start[base + a0], cell_start[base + b0 + 1]);
        if (a1 <= b1) span(cell_start[base + a1], cell_start[base + b1 + 1]);
    }
}

// Every neighbour of the query point x (original index id): hit(j, d2) for each
// point j != id that is_edge(d2, t) accepts (float32 squared distance < t).
template <int DC, typename Hit>
__device__ __forceinline__ void for_each_neighbour(
    const Grid<DC>& g, const float (&x)[GRID_DIM], int id, float t,
    const float* __restrict__ Xs, const int* __restrict__ perm,
    const int* __restrict__ cell_start, Hit&& hit)
{
    long long w[DC];
    torus_coords(g, x, w);
    for_each_neighbour_range(g, w, cell_start, [&](int begin, int end) {
        for (int q = begin; q < end; ++q) {
            float y[GRID_DIM];
            load_point(Xs, q, y);
            const float d2 = sqdist(x, y);
            if (is_edge(d2, t)) {
                const int j = __ldg(perm + q);
                if (j != id) hit(j, d2);
            }
        }
    });
}

// --- binning (counting sort by torus cell) ----------------------------------------

template <int DC>
__global__ void grid_bin(const float* __restrict__ X, int n,
                         const double* __restrict__ gd, const long long* __restrict__ gi,
                         int* __restrict__ cell_of, int* __restrict__ slot,
                         int* __restrict__ cell_count)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const Grid<DC> g = load_grid<DC>(gd, gi);
    float x[GRID_DIM];
    load_point(X, i, x);
    long long w[DC];
    torus_coords(g, x, w);
    long long cell = 0;
#pragma unroll
    for (int k = 0; k < DC; ++k) cell += w[k] * g.stride[k];
    cell_of[i] = (int)cell;
    slot[i] = atomicAdd(cell_count + cell, 1);
}

// --- bounding box --------------------------------------------------------------
// Per block: the min and max of every feature over the rows it strides across, written
// to lo/hi[blockIdx.x * GRID_DIM + k]; the launcher reduces the blocks' rows. One read
// of X at bandwidth, where CuPy's X.min(axis=0) (d outputs, few blocks) took most of
// a Syn1M build.
extern "C" __global__ void grid_bbox(const float* __restrict__ X, int n,
                                     float* __restrict__ lo, float* __restrict__ hi)
{
    __shared__ float block_lo[32][GRID_DIM];
    __shared__ float block_hi[32][GRID_DIM];
    float mn[GRID_DIM], mx[GRID_DIM];
#pragma unroll
    for (int k = 0; k < GRID_DIM; ++k) {
        mn[k] = __int_as_float(0x7f800000);   // +inf
        mx[k] = __int_as_float(0xff800000);   // -inf
    }
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float x[GRID_DIM];
        load_point(X, i, x);
#pragma unroll
        for (int k = 0; k < GRID_DIM; ++k) {
            mn[k] = fminf(mn[k], x[k]);
            mx[k] = fmaxf(mx[k], x[k]);
        }
    }
#pragma unroll
    for (int k = 0; k < GRID_DIM; ++k) {
        for (int offset = 16; offset > 0; offset >>= 1) {
            mn[k] = fminf(mn[k], __shfl_down_sync(0xffffffffu, mn[k], offset));
            mx[k] = fmaxf(mx[k], __shfl_down_sync(0xffffffffu, mx[k], offset));
        }
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) {
#pragma unroll
        for (int k = 0; k < GRID_DIM; ++k) {
            block_lo[warp][k] = mn[k];
            block_hi[warp][k] = mx[k];
        }
    }
    __syncthreads();
    if (threadIdx.x < GRID_DIM) {
        const int k = threadIdx.x;
        float a = block_lo[0][k], b = block_hi[0][k];
        for (int w = 1; w < (int)(blockDim.x >> 5); ++w) {
            a = fminf(a, block_lo[w][k]);
            b = fmaxf(b, block_hi[w][k]);
        }
        lo[blockIdx.x * GRID_DIM + k] = a;
        hi[blockIdx.x * GRID_DIM + k] = b;
    }
}

extern "C" __global__ void grid_scatter(const float* __restrict__ X, int n,
                                        const int* __restrict__ cell_of,
                                        const int* __restrict__ slot,
                                        const int* __restrict__ cell_start,
                                        float* __restrict__ Xs, int* __restrict__ perm)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long p = (long long)cell_start[cell_of[i]] + slot[i];
#pragma unroll
    for (int k = 0; k < GRID_DIM; ++k) Xs[p * GRID_DIM + k] = X[(long long)i * GRID_DIM + k];
    perm[p] = i;
}

// --- count and fill ------------------------------------------------------------
// Queries are the rows whose neighbours are wanted: Q[q] (coordinates) with original
// index qid[q]. A full build passes the cell-sorted points themselves (neighbouring
// threads then scan the same cells: coalesced, cached loads); live statistics pass
// a sample of rows.

// Counts (and, with want_degrees, weighted degrees summed in double) per query,
// stored at the query's original index (by_id) or its position. `scale` is the
// gaussian -1/(2σ²) (edge_rule.cuh, edge_weight).
template <int DC>
__global__ void grid_count(const float* __restrict__ Q, const int* __restrict__ qid, int nq,
                           const float* __restrict__ Xs, const int* __restrict__ perm,
                           const int* __restrict__ cell_start,
                           const double* __restrict__ gd, const long long* __restrict__ gi,
                           float t, int* __restrict__ counts, int by_id,
                           int want_degrees, float* __restrict__ degrees, float scale)
{
    const int q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= nq) return;
    const Grid<DC> g = load_grid<DC>(gd, gi);
    float x[GRID_DIM];
    load_point(Q, q, x);
    const int id = qid[q];
    int count = 0;
    double degree = 0.0;
    for_each_neighbour(g, x, id, t, Xs, perm, cell_start, [&](int, float d2) {
        ++count;
        if (want_degrees) degree += edge_weight(d2, scale);
    });
    const int at = by_id ? id : q;
    counts[at] = count;
    if (want_degrees) degrees[at] = (float)degree;
}

template <int DC>
__global__ void grid_fill(const float* __restrict__ Q, const int* __restrict__ qid, int nq,
                          const float* __restrict__ Xs, const int* __restrict__ perm,
                          const int* __restrict__ cell_start,
                          const double* __restrict__ gd, const long long* __restrict__ gi,
                          float t, const long long* __restrict__ row_start,
                          int* __restrict__ out_cols, float* __restrict__ out_vals,
                          float scale)
{
    const int q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= nq) return;
    const Grid<DC> g = load_grid<DC>(gd, gi);
    float x[GRID_DIM];
    load_point(Q, q, x);
    const int id = qid[q];
    long long pos = row_start[id];
    for_each_neighbour(g, x, id, t, Xs, perm, cell_start, [&](int j, float d2) {
        out_cols[pos] = j;
        out_vals[pos] = edge_weight(d2, scale);
        ++pos;
    });
}
