// Connected components of a CSR graph on the device (cupyx's csgraph needs pylibcugraph).
//
// Lock-free union-find: every vertex starts as its own root; for each stored edge (u, v)
// the two roots are found and the larger is hooked under the smaller with atomicCAS,
// retrying from the new roots when another thread hooked first. parent[x] <= x always holds
// and a root only ever gains a parent, so finds terminate; find shortens paths as it goes
// (path halving; a racing shortcut still points at an ancestor, which is harmless). Parent
// reads are volatile so a retry never loops on a stale cached value. Edges are treated as
// undirected (weak components), like scipy's connected_components(directed=False).

#define FULL_MASK 0xffffffffu

__device__ __forceinline__ int find_root(volatile int* parent, int x) {
    while (true) {
        const int p = parent[x];
        if (p == x) return x;
        const int gp = parent[p];
        if (gp == p) return p;
        parent[x] = gp;
        x = gp;
    }
}

// One warp per row (blockDim.x == 32), lanes over the row's edges.
extern "C" __global__ void
cc_hook(int n, const int* __restrict__ indptr, const int* __restrict__ indices, int* parent) {
    const int u = blockIdx.x * blockDim.y + threadIdx.y;
    if (u >= n) return;
    volatile int* vp = parent;
    for (int e = indptr[u] + threadIdx.x; e < indptr[u + 1]; e += 32) {
        int a = find_root(vp, u);
        int b = find_root(vp, indices[e]);
        while (a != b) {
            if (a < b) {
                const int t = a;
                a = b;
                b = t;
            }
            if (atomicCAS(&parent[a], a, b) == a) break;
            a = find_root(vp, a);
            b = find_root(vp, b);
        }
    }
}

// parent[i] <- root of i; afterwards the roots are exactly the i with parent[i] == i.
extern "C" __global__ void cc_flatten(int n, int* parent) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) parent[i] = find_root(parent, i);
}
