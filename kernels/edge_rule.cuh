// The edge rule on the device, defined once for every similarity kernel: CSR-1/2/3 and
// the counting pass (through common.cuh), grid.cu and gemm.cu.
//
// Compile-time configuration (kernels/_launch.py, Rule.defines, passes both as -D options;
// each combination is its own cached module, so no inner loop branches on the rule):
//   METRIC    0 gaussian, 1 uniform (both compare squared distances: edge iff value < thr),
//             2 cosine (compares a cosine: edge iff value > thr)
//   FAST_EXP  1: gaussian weights through __expf, 0: through expf. The launcher takes
//             __expf while the exponent stays in [-8, 0] (at most 11 ulp there, 1.3e-6
//             relative, see FAST_EXP_MAX_ARG in kernels/_launch.py) and expf (2 ulp) beyond,
//             so every builder's weights agree with the float64 reference to 1e-5.
//
// Arithmetic (the exactness contract of docs/architecture.md "Semantics"):
//   pair_step  one term of a pair's value, in float32 with the round-to-nearest intrinsics,
//              accumulated over the features k = 0..d-1 in order: a squared distance
//              ((a - b)² + acc, the same whichever point comes first) or a dot product of
//              row-normalised vectors (a·b + acc). The intrinsics keep the compiler from
//              contracting or reordering it, so every pass and every builder that
//              accumulates in this order decides a pair identically.
//   is_edge    the strict threshold test; a NaN value (padding, zero vectors under the
//              cosine metric) compares false, so it never makes an edge.
//   edge_weight  the stored value from the compared one; `scale` is -1/(2 sigma^2) as
//              float32 for gaussian (ignored otherwise).
#ifndef SE_EDGE_RULE_CUH
#define SE_EDGE_RULE_CUH

#define METRIC_GAUSSIAN 0
#define METRIC_UNIFORM 1
#define METRIC_COSINE 2

#ifndef METRIC
#error "METRIC must be defined by the launcher (kernels/_launch.py, Rule.defines)"
#endif
#if METRIC != METRIC_GAUSSIAN && METRIC != METRIC_UNIFORM && METRIC != METRIC_COSINE
#error "METRIC must be 0 (gaussian), 1 (uniform) or 2 (cosine)"
#endif
#ifndef FAST_EXP
#define FAST_EXP 0
#endif

// True for the metrics that compare squared distances.
#define METRIC_SQDIST (METRIC != METRIC_COSINE)

__device__ __forceinline__ float pair_step(float acc, float a, float b) {
#if METRIC == METRIC_COSINE
    return __fmaf_rn(a, b, acc);
#else
    const float diff = __fsub_rn(a, b);
    return __fmaf_rn(diff, diff, acc);
#endif
}

__device__ __forceinline__ bool is_edge(float value, float thr) {
#if METRIC == METRIC_COSINE
    return value > thr;
#else
    return value < thr;
#endif
}

__device__ __forceinline__ float edge_weight(float value, float scale) {
#if METRIC == METRIC_COSINE
    return value;
#elif METRIC == METRIC_UNIFORM
    return 1.0f;
#elif FAST_EXP
    return __expf(value * scale);
#else
    return expf(value * scale);
#endif
}

#endif  // SE_EDGE_RULE_CUH
