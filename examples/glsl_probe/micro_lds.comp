// Shared-memory-read + FMA ceiling: the GEMM core's inner product alone (no global loads, no
// barriers in the loop unless BAR = 1). TM x TN outputs per invocation, BK steps per slice,
// ITER slices; A_PAD pads the left tile's row by one vec4.
#pragma optionNV(unroll all)
layout(std430, binding = 0) restrict buffer Out { float outp[]; };
#define TX (BN / TN)
#define TY (BM / TM)
#define THREADS (TX * TY)
shared vec4 tile_p[BK][BM / 4 + A_PAD];
shared vec4 tile_q[BK][BN / 4];
void main() {
    uint id = gl_LocalInvocationIndex;
#if WARP
    uint lane = id % 32u;
    uint warp = id / 32u;
    uint tx = (warp % uint(TX / 8)) * 8u + lane % 8u;
    uint ty = (warp / uint(TX / 8)) * 4u + lane / 8u;
#else
    uint tx = id % uint(TX);
    uint ty = id / uint(TX);
#endif
    for (uint i = id; i < uint(BK * (BM / 4 + A_PAD)); i += uint(THREADS))
        tile_p[i / uint(BM / 4 + A_PAD)][i % uint(BM / 4 + A_PAD)] = vec4(float(i) * 1e-6);
    for (uint i = id; i < uint(BK * BN / 4); i += uint(THREADS))
        tile_q[i / uint(BN / 4)][i % uint(BN / 4)] = vec4(float(i) * 1e-6);
    barrier();
    vec4 acc[TM][TN / 4];
    for (int i = 0; i < TM; ++i) for (int j = 0; j < TN / 4; ++j) acc[i][j] = vec4(0.0);
    uint iters = uint(ITER) + (gl_NumWorkGroups.y - 1u);
    for (uint it = 0u; it < iters; ++it) {
        for (int k = 0; k < BK; ++k) {
            vec4 p[TM / 4];
            vec4 q[TN / 4];
            for (int i = 0; i < TM / 4; ++i) p[i] = tile_p[k][uint(i * TY) + ty];
            for (int j = 0; j < TN / 4; ++j) q[j] = tile_q[k][uint(j * TX) + tx];
            for (int i = 0; i < TM / 4; ++i)
                for (int r = 0; r < 4; ++r)
                    for (int j = 0; j < TN / 4; ++j)
                        acc[i * 4 + r][j] = fma(vec4(p[i][r]), q[j], acc[i * 4 + r][j]);
        }
#if BAR
        barrier();
#endif
    }
    vec4 s = vec4(0.0);
    for (int i = 0; i < TM; ++i) for (int j = 0; j < TN / 4; ++j) s += acc[i][j];
    outp[gl_GlobalInvocationID.x] = s.x + s.y + s.z + s.w;
}
