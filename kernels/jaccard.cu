// One round of the parallel iterative Jaccard clustering of the rows of a sparse matrix
// (paper 003, Algorithm 2, with a set of leaders per round instead of one).
//
// The rows are those of a symmetric pattern without a diagonal (a similarity graph).
// Row i's set is N[i] = cols(i) ∪ {i}. A round has two launches:
//
//   jc_leaders: an ungrouped row becomes a leader of this round (leader[i] = stamp) when
//     its priority key is the largest among its ungrouped neighbours'. The key of i is
//     (hash(i, seed) << 32) | i, so keys are distinct and the choice is deterministic.
//   jc_join: every new leader opens its group (group[i] = i); every other ungrouped row
//     joins the new leader among its neighbours whose Jaccard similarity
//     |N[i] ∩ N[j]| / |N[i] ∪ N[j]| is largest, when it is at least min_sim (distance
//     1 - sim <= tau); ties go to the smallest j. Rows with no such leader stay
//     ungrouped for the next round.
//
// For a neighbour j of i (so i is a neighbour of j): |N[i] ∩ N[j]| = |cols(i) ∩ cols(j)| + 2
// and |N[i] ∪ N[j]| = deg(i) + deg(j) - |cols(i) ∩ cols(j)|. Both are integers; the test
// a >= min_sim * b is one float64 product (the NumPy reference computes the same), and
// the best leader is found by exact integer cross-multiplication.
//
// One warp per row, ROWS_PER_BLOCK rows per block. The column lists are sorted (canonical
// CSR): each lane takes entries of cols(j) and binary-searches them in cols(i).
// PTR64 / IDX64 (0 or 1): indptr / indices are long long instead of int.

#if defined(PTR64) && PTR64
typedef long long PTR_T;
#else
typedef int PTR_T;
#endif
#if defined(IDX64) && IDX64
typedef long long IDX_T;
#else
typedef int IDX_T;
#endif

#define FULL_MASK 0xffffffffu

__device__ __forceinline__ unsigned long long jc_key(long long i, unsigned int seed) {
    // murmur3's 32-bit finaliser of the row id mixed with the seed.
    unsigned int h = (unsigned int)i ^ (seed * 0x9E3779B9u);
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    return ((unsigned long long)h << 32) | (unsigned long long)(unsigned int)i;
}

extern "C" __global__ void jc_leaders(long long n, const PTR_T* __restrict__ indptr,
                                      const IDX_T* __restrict__ indices,
                                      const int* __restrict__ group, int* __restrict__ leader,
                                      unsigned int seed, int stamp) {
    const long long i = (long long)blockIdx.x * blockDim.y + threadIdx.y;
    if (i >= n || group[i] >= 0) return;
    const unsigned long long mine = jc_key(i, seed);
    bool beaten = false;
    for (PTR_T e = indptr[i] + threadIdx.x; e < indptr[i + 1]; e += 32) {
        const long long j = (long long)indices[e];
        if (group[j] < 0 && jc_key(j, seed) > mine) beaten = true;
    }
    if (!__any_sync(FULL_MASK, beaten) && threadIdx.x == 0) leader[i] = stamp;
}

// |cols(i) ∩ cols(j)| by the whole warp: lanes over cols(j), binary search in cols(i).
__device__ __forceinline__ long long jc_intersection(const IDX_T* __restrict__ ci, long long ni,
                                                     const IDX_T* __restrict__ cj, long long nj) {
    long long count = 0;
    for (long long t = threadIdx.x; t < nj; t += 32) {
        const IDX_T x = cj[t];
        long long lo = 0, hi = ni;
        while (lo < hi) {
            const long long mid = (lo + hi) >> 1;
            if (ci[mid] < x) lo = mid + 1; else hi = mid;
        }
        if (lo < ni && ci[lo] == x) ++count;
    }
    for (int off = 16; off > 0; off >>= 1) count += __shfl_down_sync(FULL_MASK, count, off);
    return __shfl_sync(FULL_MASK, count, 0);
}

extern "C" __global__ void jc_join(long long n, const PTR_T* __restrict__ indptr,
                                   const IDX_T* __restrict__ indices, int* __restrict__ group,
                                   const int* __restrict__ leader, int stamp, double min_sim) {
    const long long i = (long long)blockIdx.x * blockDim.y + threadIdx.y;
    if (i >= n || group[i] >= 0) return;
    if (leader[i] == stamp) {
        if (threadIdx.x == 0) group[i] = (int)i;
        return;
    }
    const PTR_T b0 = indptr[i], b1 = indptr[i + 1];
    const long long deg_i = (long long)(b1 - b0);
    long long best_a = -1, best_b = 1;
    long long best_j = -1;
    for (PTR_T base = b0; base < b1; base += 32) {
        const PTR_T e = base + threadIdx.x;
        const long long j = e < b1 ? (long long)indices[e] : -1;
        unsigned int cand = __ballot_sync(FULL_MASK, j >= 0 && leader[j] == stamp);
        while (cand) {
            const int lane = __ffs(cand) - 1;
            cand &= cand - 1;
            const long long jj = __shfl_sync(FULL_MASK, j, lane);
            const PTR_T c0 = indptr[jj], c1 = indptr[jj + 1];
            const long long deg_j = (long long)(c1 - c0);
            const long long inter = jc_intersection(indices + b0, deg_i, indices + c0, deg_j);
            const long long a = inter + 2, b = deg_i + deg_j - inter;
            if ((double)a >= min_sim * (double)b && a * best_b > best_a * b) {
                best_a = a;
                best_b = b;
                best_j = jj;
            }
        }
    }
    if (threadIdx.x == 0 && best_j >= 0) group[i] = (int)best_j;
}
