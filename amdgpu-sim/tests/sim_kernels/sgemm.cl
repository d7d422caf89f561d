// C = A * B, A (M x K), B (K x N), C (M x N), row-major. One 16 x 16 workgroup per 16 x 16 block
// of C, staging 16 x 16 tiles of A and B in local memory; loads outside the matrices read zero and
// stores outside C are skipped, so ragged M, N, K work.
#define TILE 16
#ifdef SIM_BUILTINS
#define LOCAL_X() __builtin_amdgcn_workitem_id_x()
#define LOCAL_Y() __builtin_amdgcn_workitem_id_y()
#define GROUP_X() __builtin_amdgcn_workgroup_id_x()
#define GROUP_Y() __builtin_amdgcn_workgroup_id_y()
#define BARRIER()                                                                        \
    do {                                                                                 \
        __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");                            \
        __builtin_amdgcn_s_barrier();                                                    \
        __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");                            \
    } while (0)
#else
#define LOCAL_X() ((uint)get_local_id(0))
#define LOCAL_Y() ((uint)get_local_id(1))
#define GROUP_X() ((uint)get_group_id(0))
#define GROUP_Y() ((uint)get_group_id(1))
#define BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
#endif

kernel void sgemm(global const float* a, global const float* b, global float* c, uint M, uint N,
                  uint K) {
    local float tile_a[TILE][TILE];
    local float tile_b[TILE][TILE];
    uint tx = LOCAL_X();
    uint ty = LOCAL_Y();
    uint col = GROUP_X() * TILE + tx;
    uint row = GROUP_Y() * TILE + ty;
    float acc = 0.0f;
    for (uint k0 = 0; k0 < K; k0 += TILE) {
        uint ka = k0 + tx;
        uint kb = k0 + ty;
        tile_a[ty][tx] = (row < M && ka < K) ? a[row * K + ka] : 0.0f;
        tile_b[ty][tx] = (kb < K && col < N) ? b[kb * N + col] : 0.0f;
        BARRIER();
        for (uint k = 0; k < TILE; ++k) {
            acc += tile_a[ty][k] * tile_b[k][tx];
        }
        BARRIER();
    }
    if (row < M && col < N) {
        c[row * N + col] = acc;
    }
}
