// C = A * B with A (M x K), B (K x N), C (M x N), all row-major.
// Same math and argument order as sgemm.comp: a, b, c, M, N, K. Each work-group computes one
// TILE x TILE block of C, staging TILE x TILE tiles of A and B in local memory. Loads outside the
// matrices read zero and stores outside C are skipped, so any M, N, K work, not only multiples of
// TILE. TILE is the work-group's x and y size.
#ifndef TILE
#define TILE 16
#endif

__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))
void sgemm(__global const float *restrict a, __global const float *restrict b,
           __global float *restrict c, uint M, uint N, uint K) {
    __local float tile_a[TILE][TILE];
    __local float tile_b[TILE][TILE];
    uint col = (uint)get_global_id(0);
    uint row = (uint)get_global_id(1);
    uint tx = (uint)get_local_id(0);
    uint ty = (uint)get_local_id(1);
    float acc = 0.0f;
    for (uint k0 = 0; k0 < K; k0 += TILE) {
        uint ka = k0 + tx;
        uint kb = k0 + ty;
        tile_a[ty][tx] = (row < M && ka < K) ? a[row * K + ka] : 0.0f;
        tile_b[ty][tx] = (kb < K && col < N) ? b[kb * N + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint k = 0; k < TILE; ++k) {
            acc += tile_a[ty][k] * tile_b[k][tx];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N) {
        c[row * N + col] = acc;
    }
}
