// The GEMM core of sgemm and conv2d in OpenCL C, with the geometry of gemm.comp's portable
// variant (the one every device runs untuned), so both backends dispatch the same grid:
//   R[GM x GN] = P[GM x GK] · Q[GK x GN]
// sgemm (CONV = 0): P = A (M x K), Q = B (K x N), R = C, all row-major.
// conv2d (CONV = 1): P = the weights as K x (C·9) row-major, Q = the input gathered on the fly
// (row c·9 + dy·3 + dx, column n·H·W + y·W + x: the input pixel that output pixel meets through
// that tap, zero in the padding), R[k][pixel] + bias[k] stored into the NCHW output.
// Each work-group of (BN/TN)·(BM/TM) work-items computes one BM x BN tile of R, each work-item a
// TM x TN block of it held in registers; BK-deep slices of P and Q are staged in local memory.
// Loads outside the matrices read zero and stores outside are skipped, so any size works.
// The work-group is x = BN/BM tiles of R's columns, y = tiles of its rows.

#ifndef BM
#define BM 32
#endif
#ifndef BN
#define BN 32
#endif
#ifndef BK
#define BK 16
#endif
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif
#ifndef CONV
#define CONV 0
#endif

#define TX (BN / TN)
#define THREADS (TX * (BM / TM))

// The tile product shared by both kernels: P and Q come from the two loader macros.
#define GEMM_TILE(P_AT, Q_AT)                                                                     \
    __local float p_tile[BK][BM];                                                                 \
    __local float q_tile[BK][BN];                                                                 \
    uint t = get_local_id(0);                                                                     \
    uint row0 = get_group_id(1) * BM;                                                             \
    uint col0 = get_group_id(0) * BN;                                                             \
    uint tr = t / TX, tc = t % TX;                                                                \
    float acc[TM][TN];                                                                            \
    for (uint i = 0; i < TM; ++i)                                                                 \
        for (uint j = 0; j < TN; ++j)                                                             \
            acc[i][j] = 0.0f;                                                                     \
    for (uint k0 = 0; k0 < GK; k0 += BK) {                                                        \
        for (uint e = t; e < BM * BK; e += THREADS) {                                             \
            uint r = e / BK, kk = e % BK;                                                         \
            p_tile[kk][r] = (row0 + r < GM && k0 + kk < GK) ? P_AT(row0 + r, k0 + kk) : 0.0f;      \
        }                                                                                         \
        for (uint e = t; e < BK * BN; e += THREADS) {                                             \
            uint kk = e / BN, cc = e % BN;                                                        \
            q_tile[kk][cc] = (k0 + kk < GK && col0 + cc < GN) ? Q_AT(k0 + kk, col0 + cc) : 0.0f;   \
        }                                                                                         \
        barrier(CLK_LOCAL_MEM_FENCE);                                                             \
        for (uint kk = 0; kk < BK; ++kk) {                                                        \
            float pv[TM], qv[TN];                                                                 \
            for (uint i = 0; i < TM; ++i) pv[i] = p_tile[kk][tr * TM + i];                         \
            for (uint j = 0; j < TN; ++j) qv[j] = q_tile[kk][tc * TN + j];                         \
            for (uint i = 0; i < TM; ++i)                                                         \
                for (uint j = 0; j < TN; ++j)                                                     \
                    acc[i][j] = fma(pv[i], qv[j], acc[i][j]);                                     \
        }                                                                                         \
        barrier(CLK_LOCAL_MEM_FENCE);                                                             \
    }

#if CONV

// The input value that output pixel `pixel` meets through tap row `ck` (zero in the padding).
float gathered(__global const float *restrict inp, uint ck, uint pixel, uint C, uint H, uint W_) {
    uint c = ck / 9, tap = ck % 9, hw = H * W_;
    uint n = pixel / hw, rest = pixel % hw;
    int y = (int)(rest / W_) + (int)(tap / 3) - 1;
    int x = (int)(rest % W_) + (int)(tap % 3) - 1;
    if (y < 0 || y >= (int)H || x < 0 || x >= (int)W_) {
        return 0.0f;
    }
    return inp[((n * C + c) * H + (uint)y) * W_ + (uint)x];
}

__kernel __attribute__((reqd_work_group_size(THREADS, 1, 1)))
void conv2d(__global const float *restrict inp, __global const float *restrict w,
            __global const float *restrict bias, __global float *restrict outp,
            uint N, uint C, uint H, uint W_, uint K) {
    const uint GM = K, GN = N * H * W_, GK = C * 9, HW = H * W_;
#define P_AT(row, col) w[(row) * GK + (col)]
#define Q_AT(row, col) gathered(inp, (row), (col), C, H, W_)
    GEMM_TILE(P_AT, Q_AT)
    for (uint i = 0; i < TM; ++i) {
        uint k = row0 + tr * TM + i;
        for (uint j = 0; j < TN; ++j) {
            uint pixel = col0 + tc * TN + j;
            if (k < GM && pixel < GN) {
                uint n = pixel / HW, rest = pixel % HW;
                outp[(n * K + k) * HW + rest] = acc[i][j] + bias[k];
            }
        }
    }
}

#else

__kernel __attribute__((reqd_work_group_size(THREADS, 1, 1)))
void sgemm(__global const float *restrict a, __global const float *restrict b,
           __global float *restrict c, uint M, uint N, uint K) {
    const uint GM = M, GN = N, GK = K;
#define P_AT(row, col) a[(row) * K + (col)]
#define Q_AT(row, col) b[(row) * N + (col)]
    GEMM_TILE(P_AT, Q_AT)
    for (uint i = 0; i < TM; ++i) {
        uint row = row0 + tr * TM + i;
        for (uint j = 0; j < TN; ++j) {
            uint col = col0 + tc * TN + j;
            if (row < GM && col < GN) {
                c[row * N + col] = acc[i][j];
            }
        }
    }
}

#endif
