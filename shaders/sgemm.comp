// C = A * B with A (M x K), B (K x N), C (M x N), all row-major.
// Each workgroup computes one TILE x TILE block of C, staging TILE x TILE tiles of A and B in
// shared memory. Loads outside the matrices read zero and stores outside C are skipped, so any
// M, N, K work, not only multiples of TILE. TILE must equal the workgroup's x and y size.
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer C { float c[]; };
uniform uint M;
uniform uint N;
uniform uint K;

shared float tile_a[TILE][TILE];
shared float tile_b[TILE][TILE];

void main() {
    uint col = gl_GlobalInvocationID.x;
    uint row = gl_GlobalInvocationID.y;
    uint tx = gl_LocalInvocationID.x;
    uint ty = gl_LocalInvocationID.y;
    float acc = 0.0;
    for (uint k0 = 0u; k0 < K; k0 += uint(TILE)) {
        uint ka = k0 + tx;
        uint kb = k0 + ty;
        tile_a[ty][tx] = (row < M && ka < K) ? a[row * K + ka] : 0.0;
        tile_b[ty][tx] = (kb < K && col < N) ? b[kb * N + col] : 0.0;
        barrier();
        for (uint k = 0u; k < uint(TILE); ++k) {
            acc += tile_a[ty][k] * tile_b[k][tx];
        }
        barrier();
    }
    if (row < M && col < N) {
        c[row * N + col] = acc;
    }
}
