// Register-blocked GEMM core, shared by sgemm and conv2d (as an implicit GEMM):
//   R[GM x GN] = P[GM x GK] · Q[GK x GN]
// sgemm: P = A (M x K), Q = B (K x N), R = C, all row-major.
// conv2d (CONV = 1): a KSIZE x KSIZE window (1 or 3; default 3) at stride STRIDE (default 1),
// zero padding KSIZE / 2. P = the weights as K x (C·KSIZE²) row-major, Q = the input gathered on
// the fly (row c·KSIZE² + dy·KSIZE + dx, column n·OH·OW + oy·OW + ox: the input pixel that output
// pixel meets through that tap, zero in the padding), R[k][pixel] + bias[k] stored into the NCHW
// output of OH x OW = ((H + 2·pad − KSIZE) / STRIDE + 1) x (the same for W) pixels.
//
// Each workgroup of THREADS = (BN/TN)·(BM/TM) invocations computes one BM x BN tile of R; each
// invocation TM x TN outputs held in registers, as TM/4 x TN/4 blocks of 4x4 spread across the
// tile so that shared-memory reads and global stores are contiguous across the invocations.
// BK-deep slices of P (transposed) and Q go through two shared-memory buffers: the next slice is
// loaded from global memory into registers while the current one is multiplied, then stored
// into the other buffer, with one barrier per slice. The row of P's transposed slice is padded
// by one vec4 against bank conflicts of the transposing stores. Each invocation loads chunks of
// 4 values: of P either 4 rows at one k (VA = 1: scalar loads, stored as one vec4) or 4 k of
// one row (VA = 4: one vec4 load, stored as 4 floats); of Q 4 columns at one k (VB = 4: one vec4
// load; VB = 1: 4 scalar loads; conv2d: 4 gathered pixels). Loads read index 0 where they fall
// outside the matrices (and the value is replaced by zero), so that no branch surrounds them.
//
// Defines: BM BN BK TM TN (TM, TN multiples of 4), VA (1 or 4; 4 needs GK to be a multiple of
// 4), VB (1 or 4: width of Q loads and R stores; 4 needs GN a multiple of 4, and for conv2d OH·OW
// a multiple of 4), CONV (0 or 1), WARP (0: invocations laid out row by row over the tile; 1:
// each 32-wide subgroup covers an 8 x 4 patch of invocation positions, so fewer distinct
// shared-memory vectors are read per instruction), FRAG (1: the next step's fragments are read
// from shared memory into a second set of registers while this step multiplies), UNROLL, SPLIT,
// STORE_ALWAYS (1: the next slice is stored to shared memory without a branch, also after the
// last slice), KSLICE (1, 2 or 4: sliced-K — the workgroup holds KSLICE groups of THREADS
// invocations; slices are KSLICE·BK deep, group g multiplies their rows g·BK to (g + 1)·BK − 1,
// and the groups' sums are added into group 0's through shared memory at the end, so that a
// problem with few tiles keeps more invocations per multiprocessor without a second dispatch),
// TEXELS (1: sgemm reads A and B as texels, rgba32f where loaded 4 wide, r32f otherwise).
// WINOGRAD (defined or not): the core becomes `gemm_main`, batched over workgroup z, for
// shaders/winograd.comp. Every load outside the matrices reads zero and every store outside is
// skipped, so any size works — except with FIX_M, FIX_N, FIX_K (an unsplit sgemm only): the
// program is built for exactly that M x N x K, multiples of BM, BN and the slice depth (the host
// refuses any other problem), so strides are constants and loads need no bounds.

// UNROLL = 1: ask NVIDIA's compiler to unroll every constant loop (other compilers ignore it).
#if UNROLL
#pragma optionNV(unroll all)
#endif
// SPLIT > 1 (split-K): workgroup z takes one of SPLIT parts of the shared dimension and adds its
// partial sums into the output with float atomics; a first dispatch with phase = 0 fills the
// output with zero (sgemm) or the bias (conv2d). Needs GL_NV_shader_atomic_float.
#extension GL_NV_shader_atomic_float : enable

#ifndef STORE_ALWAYS
#define STORE_ALWAYS 0
#endif
#ifndef KSLICE
#define KSLICE 1
#endif
// TEXELS 1: sgemm reads its operands as texels.
#ifndef TEXELS
#define TEXELS 0
#endif
#if TEXELS && (CONV || defined(WINOGRAD))
#error "TEXELS is for sgemm"
#endif
#ifdef FIX_K
#if CONV || defined(WINOGRAD) || SPLIT > 1
#error "FIX_M, FIX_N and FIX_K are for an unsplit sgemm"
#endif
// Whether a load falls inside the matrices: always, for a problem that is whole tiles.
#define INSIDE(c) true
#else
#define INSIDE(c) (c)
#endif
#define TX (BN / TN)
#define TY (BM / TM)
// Invocations of one group, which together hold the BM x BN tile.
#define THREADS (TX * TY)
// Invocations of the workgroup, which all load, and the depth of a slice in shared memory.
#define LOADERS (THREADS * KSLICE)
#define SLICE (BK * KSLICE)
#define A_CHUNKS (BM * SLICE / (LOADERS * 4))
#define B_CHUNKS (SLICE * BN / (LOADERS * 4))
#define A_PITCH (BM / 4 + 1)

#if VA == 4
#define A_ELEM vec4
#else
#define A_ELEM float
#endif
#if VB == 4
#define B_ELEM vec4
#else
#define B_ELEM float
#endif
// Split-K adds scalars atomically, so its output is declared as floats.
#if VB == 4 && SPLIT == 1
#define VC 4
#define C_ELEM vec4
#else
#define VC 1
#define C_ELEM float
#endif

#if CONV
#ifndef KSIZE
#define KSIZE 3
#endif
#ifndef STRIDE
#define STRIDE 1
#endif
#define TAPS (KSIZE * KSIZE)
#define PAD (KSIZE / 2)
layout(std430, binding = 0) restrict readonly buffer In { float inp[]; };
layout(std430, binding = 1) restrict readonly buffer W { A_ELEM w[]; };
layout(std430, binding = 2) restrict readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) restrict buffer Out { C_ELEM outp[]; };
uniform uint N;
uniform uint C;
uniform uint H;
uniform uint W_;
uniform uint K;
#define P_DATA w
#elif defined(WINOGRAD)
// The batched product of a Winograd conv2d (shaders/winograd.comp, appended to this file): batch
// gl_WorkGroupID.z of 16 multiplies its slices of the transformed weights (M x K, here output
// channels x input channels) and the transformed input (K x N: input channels x tiles). The
// transforms write both, hence other block names than the read-only ones below.
layout(std430, binding = 0) restrict buffer WinoU { A_ELEM a[]; };
layout(std430, binding = 1) restrict buffer WinoV { B_ELEM b[]; };
layout(std430, binding = 2) restrict buffer WinoM { C_ELEM c[]; };
uniform uint M;
uniform uint N;
uniform uint K;
#define P_DATA a
#if SPLIT > 1
#error "the Winograd product takes workgroup z as its batch, so it cannot be split"
#endif
#elif TEXELS
// The operands as texels (rgba32f where loaded 4 wide, r32f otherwise): no bounds test around
// the loads, which NVIDIA's driver puts around every storage-buffer load.
layout(binding = 0) uniform samplerBuffer a;
layout(binding = 1) uniform samplerBuffer b;
layout(std430, binding = 2) restrict buffer C { C_ELEM c[]; };
uniform uint M;
uniform uint N;
uniform uint K;
#else
layout(std430, binding = 0) restrict readonly buffer A { A_ELEM a[]; };
layout(std430, binding = 1) restrict readonly buffer B { B_ELEM b[]; };
layout(std430, binding = 2) restrict buffer C { C_ELEM c[]; };
uniform uint M;
uniform uint N;
uniform uint K;
#define P_DATA a
#endif
#if SPLIT > 1
uniform uint phase;
#endif
// Element i of the left operand (a vec4 where VA is 4) and of the right one (VB).
#if TEXELS
#if VA == 4
#define LOAD_P(i) texelFetch(a, int(i))
#else
#define LOAD_P(i) texelFetch(a, int(i)).x
#endif
#if VB == 4
#define LOAD_Q(i) texelFetch(b, int(i))
#else
#define LOAD_Q(i) texelFetch(b, int(i)).x
#endif
#else
#define LOAD_P(i) P_DATA[i]
#define LOAD_Q(i) b[i]
#endif

#if VA == 4
shared float tile_pf[2][SLICE][A_PITCH * 4];
#define READ_P(b, k, v) vec4(tile_pf[b][k][(v) * 4u], tile_pf[b][k][(v) * 4u + 1u], \
                             tile_pf[b][k][(v) * 4u + 2u], tile_pf[b][k][(v) * 4u + 3u])
#else
shared vec4 tile_p[2][SLICE][A_PITCH];
#define READ_P(b, k, v) tile_p[b][k][v]
#endif
shared vec4 tile_q[2][SLICE][BN / 4];

#ifdef FIX_K
// Constants, so that the compiler folds the strides into the addresses (H100, sgemm 4096³:
// 3.16 ms with uniforms and bounds, 3.08 without bounds, 2.98 with constants too).
#define GM uint(FIX_M)
#define GN uint(FIX_N)
#define GK uint(FIX_K)
#else
uint GM;
uint GN;
uint GK;
#endif
// Where this workgroup's part of the shared dimension ends (GK unless split).
uint K_END;
#ifdef WINOGRAD
// Where this workgroup's batch starts in the left, right and result matrices.
uint P_BASE;
uint Q_BASE;
uint R_BASE;
#else
#define P_BASE 0u
#define Q_BASE 0u
#define R_BASE 0u
#endif

// What one invocation loads of one slice, kept in registers until it is stored.
vec4 reg_p[A_CHUNKS];
vec4 reg_q[B_CHUNKS];

#if CONV
uint HW;
// Output pixels per image, and the output's width.
uint OHW;
uint OW;
// Per Q chunk and output pixel: the offset in the input of channel 0 at the window's centre
// when its tap is (0, 0) — (oy·STRIDE, ox·STRIDE) — and that y and x (-1 marks a pixel past the
// end, whose loads are all zero).
int pix_base[B_CHUNKS * 4];
int pix_y[B_CHUNKS * 4];
int pix_x[B_CHUNKS * 4];
#endif

void load_slice(uint row0, uint col0, uint k0) {
    // Loads read index 0 where they fall outside and the value is replaced by zero, so that
    // they need no branch around them.
    for (int i = 0; i < A_CHUNKS; ++i) {
        uint q = gl_LocalInvocationIndex + uint(i * LOADERS);
#if VA == 4
        uint row = row0 + q / uint(SLICE / 4);
        uint k = k0 + (q % uint(SLICE / 4)) * 4u;
        bool inside = INSIDE(row < GM && k < K_END);
        vec4 v = LOAD_P(inside ? (P_BASE + row * GK + k) / 4u : 0u);
        reg_p[i] = inside ? v : vec4(0.0);
#else
        // Four rows at one k: the registers hold the slice already transposed.
        uint k = k0 + q % uint(SLICE);
        uint row = row0 + (q / uint(SLICE)) * 4u;
        for (int r = 0; r < 4; ++r) {
            bool inside = INSIDE(row + uint(r) < GM && k < K_END);
            float v = LOAD_P(inside ? P_BASE + (row + uint(r)) * GK + k : 0u);
            reg_p[i][r] = inside ? v : 0.0;
        }
#endif
    }
    for (int i = 0; i < B_CHUNKS; ++i) {
        uint q = gl_LocalInvocationIndex + uint(i * LOADERS);
        uint k = k0 + q / uint(BN / 4);
#if CONV
        uint c = k / uint(TAPS);
        uint tap = k - c * uint(TAPS);
        int dy = int(tap / uint(KSIZE)) - PAD;
        int dx = int(tap % uint(KSIZE)) - PAD;
        int offset = int(c * HW) + dy * int(W_) + dx;
        vec4 v;
        for (int j = 0; j < 4; ++j) {
            int p = i * 4 + j;
            int y = pix_y[p] + dy;
            int x = pix_x[p] + dx;
            bool inside = k < K_END && pix_y[p] >= 0 && y >= 0 && y < int(H) && x >= 0 && x < int(W_);
            float value = inp[inside ? pix_base[p] + offset : 0];
            v[j] = inside ? value : 0.0;
        }
        reg_q[i] = v;
#else
        uint col = col0 + (q % uint(BN / 4)) * 4u;
#if VB == 4
        bool inside = INSIDE(k < K_END && col < GN);
        vec4 v = LOAD_Q(inside ? (Q_BASE + k * GN + col) / 4u : 0u);
        reg_q[i] = inside ? v : vec4(0.0);
#else
        for (int j = 0; j < 4; ++j) {
            bool inside = INSIDE(k < K_END && col + uint(j) < GN);
            float v = LOAD_Q(inside ? Q_BASE + k * GN + col + uint(j) : 0u);
            reg_q[i][j] = inside ? v : 0.0;
        }
#endif
#endif
    }
}

void store_slice(int buf) {
    for (int i = 0; i < A_CHUNKS; ++i) {
        uint q = gl_LocalInvocationIndex + uint(i * LOADERS);
#if VA == 4
        // Stored as floats: the component a row lands in differs between invocations, and a
        // variable component of a vector compiles to a branch per component on NVIDIA.
        uint row = q / uint(SLICE / 4);
        uint k = (q % uint(SLICE / 4)) * 4u;
        for (int j = 0; j < 4; ++j) {
            tile_pf[buf][k + uint(j)][row] = reg_p[i][j];
        }
#else
        tile_p[buf][q % uint(SLICE)][q / uint(SLICE)] = reg_p[i];
#endif
    }
    for (int i = 0; i < B_CHUNKS; ++i) {
        uint q = gl_LocalInvocationIndex + uint(i * LOADERS);
        tile_q[buf][q / uint(BN / 4)][q % uint(BN / 4)] = reg_q[i];
    }
}

#if KSLICE > 1
// Vector e of the sliced-K reduction's scratch, laid over the right slices' buffer (4·THREADS
// vectors must fit in its 2·SLICE·BN/4; the host checks).
void scratch_put(uint e, vec4 v) {
    tile_q[e / uint(SLICE * (BN / 4))][(e / uint(BN / 4)) % uint(SLICE)][e % uint(BN / 4)] = v;
}
vec4 scratch_get(uint e) {
    return tile_q[e / uint(SLICE * (BN / 4))][(e / uint(BN / 4)) % uint(SLICE)][e % uint(BN / 4)];
}
#endif

// One opening brace whatever the name (the host reads the declarations without preprocessing).
#ifdef WINOGRAD
#define GEMM_MAIN gemm_main
#else
#define GEMM_MAIN main
#endif
void GEMM_MAIN() {
#if CONV
    GM = K;
    HW = H * W_;
    // An odd window with padding KSIZE / 2: W + 2·pad − KSIZE = W − 1.
    OW = (W_ - 1u) / uint(STRIDE) + 1u;
    OHW = ((H - 1u) / uint(STRIDE) + 1u) * OW;
    GN = N * OHW;
    GK = C * uint(TAPS);
#elif defined(FIX_K)
    // The host runs this program on its own problem only; the test also keeps the uniforms.
    if (M != GM || N != GN || K != GK) {
        return;
    }
#else
    GM = M;
    GN = N;
    GK = K;
#endif
#ifdef WINOGRAD
    P_BASE = gl_WorkGroupID.z * GM * GK;
    Q_BASE = gl_WorkGroupID.z * GK * GN;
    R_BASE = gl_WorkGroupID.z * GM * GN;
#endif
    uint row0 = gl_WorkGroupID.y * uint(BM);
    uint col0 = gl_WorkGroupID.x * uint(BN);
#if KSLICE > 1
    // This invocation's group (which rows of each slice it multiplies) and place in it.
    uint group = gl_LocalInvocationIndex / uint(THREADS);
    uint local = gl_LocalInvocationIndex % uint(THREADS);
    int kb = int(group) * BK;
#else
    uint local = gl_LocalInvocationIndex;
    const int kb = 0;
#endif
#if WARP
    uint lane = local % 32u;
    uint warp = local / 32u;
    uint tx = (warp % uint(TX / 8)) * 8u + lane % 8u;
    uint ty = (warp / uint(TX / 8)) * 4u + lane / 8u;
#else
    uint tx = local % uint(TX);
    uint ty = local / uint(TX);
#endif

#if CONV
    for (int i = 0; i < B_CHUNKS; ++i) {
        uint q = gl_LocalInvocationIndex + uint(i * LOADERS);
        uint col = col0 + (q % uint(BN / 4)) * 4u;
        for (int j = 0; j < 4; ++j) {
            uint pixel = col + uint(j);
            int p = i * 4 + j;
            if (pixel < GN) {
                uint n = pixel / OHW;
                uint rest = pixel - n * OHW;
                uint y = (rest / OW) * uint(STRIDE);
                uint x = (rest % OW) * uint(STRIDE);
                pix_base[p] = int(n * C * HW + y * W_ + x);
                pix_y[p] = int(y);
                pix_x[p] = int(x);
            } else {
                pix_base[p] = 0;
                pix_y[p] = -1;
                pix_x[p] = 0;
            }
        }
    }
#endif

    vec4 acc[TM][TN / 4];
    for (int i = 0; i < TM; ++i) {
        for (int j = 0; j < TN / 4; ++j) {
            acc[i][j] = vec4(0.0);
        }
    }

#ifdef FIX_K
    // From the uniform: with a constant trip count NVIDIA's compiler unrolls the whole loop.
    uint slices = (K + uint(SLICE) - 1u) / uint(SLICE);
#else
    uint slices = (GK + uint(SLICE) - 1u) / uint(SLICE);
#endif
    uint k_start = 0u;
#if SPLIT > 1
    if (phase == 0u) {
        slices = 0u;
    } else {
        uint per_part = (slices + uint(SPLIT) - 1u) / uint(SPLIT);
        uint first = min(gl_WorkGroupID.z * per_part, slices);
        slices = min(first + per_part, slices) - first;
        k_start = first * uint(SLICE);
    }
#endif
    // Past the part's end, loads read zero as past GK.
    K_END = min(GK, k_start + slices * uint(SLICE));
    if (slices > 0u) {
        load_slice(row0, col0, k_start);
        store_slice(0);
    }
    barrier();
    for (uint s = 0u; s < slices; ++s) {
        int buf = int(s & 1u);
        bool more = s + 1u < slices;
        // Unconditional, so that NVIDIA's compiler leaves the loads in flight during the products:
        // inside `if (more)` it merged them with the store below, after the last FMA, and the
        // sgemm waited for its global loads once per slice (4096³: 3.50 → 3.19 ms on an H100).
        // Past the part's end every load reads index 0 and yields zero.
#ifdef FIX_K
        // Without bounds, the load after the last slice reads the last slice again.
        load_slice(row0, col0, min((s + 1u) * uint(SLICE), GK - uint(SLICE)));
#else
        load_slice(row0, col0, k_start + (s + 1u) * uint(SLICE));
#endif
#if FRAG
        // The fragments of step k + 1 are read from shared memory while step k multiplies.
        vec4 p[2][TM / 4];
        vec4 q[2][TN / 4];
        for (int i = 0; i < TM / 4; ++i) {
            p[0][i] = READ_P(buf, kb, uint(i * TY) + ty);
        }
        for (int j = 0; j < TN / 4; ++j) {
            q[0][j] = tile_q[buf][kb][uint(j * TX) + tx];
        }
        for (int k = 0; k < BK; ++k) {
            int cur = k & 1;
            if (k + 1 < BK) {
                for (int i = 0; i < TM / 4; ++i) {
                    p[cur ^ 1][i] = READ_P(buf, kb + k + 1, uint(i * TY) + ty);
                }
                for (int j = 0; j < TN / 4; ++j) {
                    q[cur ^ 1][j] = tile_q[buf][kb + k + 1][uint(j * TX) + tx];
                }
            }
            for (int i = 0; i < TM / 4; ++i) {
                for (int r = 0; r < 4; ++r) {
                    for (int j = 0; j < TN / 4; ++j) {
                        acc[i * 4 + r][j] = fma(vec4(p[cur][i][r]), q[cur][j], acc[i * 4 + r][j]);
                    }
                }
            }
        }
#else
        for (int k = 0; k < BK; ++k) {
            vec4 p[TM / 4];
            vec4 q[TN / 4];
            for (int i = 0; i < TM / 4; ++i) {
                p[i] = READ_P(buf, kb + k, uint(i * TY) + ty);
            }
            for (int j = 0; j < TN / 4; ++j) {
                q[j] = tile_q[buf][kb + k][uint(j * TX) + tx];
            }
            for (int i = 0; i < TM / 4; ++i) {
                for (int r = 0; r < 4; ++r) {
                    for (int j = 0; j < TN / 4; ++j) {
                        acc[i * 4 + r][j] = fma(vec4(p[i][r]), q[j], acc[i * 4 + r][j]);
                    }
                }
            }
        }
#endif
#if STORE_ALWAYS
        // The last slice's store is wasted (nothing reads that buffer again), but without the
        // branch NVIDIA's compiler schedules the stores with the products (H100 sgemm 4096³: 3%
        // faster on the median variant; it costs small 4×4 tiles about as much, hence a define).
        store_slice(buf ^ 1);
#else
        if (more) {
            store_slice(buf ^ 1);
        }
#endif
        barrier();
    }

#if KSLICE > 1
    // The groups' sums, added into group 0's one 4x4 block at a time through the slices' shared
    // memory (free after the loop's last barrier), group by group; then group 0 stores.
    for (int i = 0; i < TM / 4; ++i) {
        for (int j = 0; j < TN / 4; ++j) {
            for (uint g = 1u; g < uint(KSLICE); ++g) {
                if (group == g) {
                    for (int r = 0; r < 4; ++r) {
                        scratch_put(uint(r * THREADS) + local, acc[i * 4 + r][j]);
                    }
                }
                barrier();
                if (group == 0u) {
                    for (int r = 0; r < 4; ++r) {
                        acc[i * 4 + r][j] += scratch_get(uint(r * THREADS) + local);
                    }
                }
                barrier();
            }
        }
    }
    if (group != 0u) {
        return;
    }
#endif

#if SPLIT > 1
    // The bias (or zero) is written once, by phase 0; the parts only add.
    bool adding = phase != 0u;
#endif
    for (int i = 0; i < TM / 4; ++i) {
        for (int r = 0; r < 4; ++r) {
            uint row = row0 + (uint(i * TY) + ty) * 4u + uint(r);
            if (row >= GM) {
                continue;
            }
#if CONV
            float offset = bias[row];
#else
            float offset = 0.0;
#endif
#if SPLIT > 1
            if (adding) {
                offset = 0.0;
            }
#endif
            for (int j = 0; j < TN / 4; ++j) {
                uint col = col0 + (uint(j * TX) + tx) * 4u;
                vec4 value = acc[i * 4 + r][j] + vec4(offset);
#if VC == 4
                if (col < GN) {
#if CONV
                    uint n = col / OHW;
                    outp[((n * K + row) * OHW + (col - n * OHW)) / 4u] = value;
#else
                    c[(R_BASE + row * GN + col) / 4u] = value;
#endif
                }
#else
                for (int e = 0; e < 4; ++e) {
                    uint cc = col + uint(e);
                    if (cc < GN) {
#if CONV
                        uint n = cc / OHW;
                        uint at = (n * K + row) * OHW + (cc - n * OHW);
#if SPLIT > 1
                        if (adding) { atomicAdd(outp[at], value[e]); } else { outp[at] = value[e]; }
#else
                        outp[at] = value[e];
#endif
#else
                        uint at = R_BASE + row * GN + cc;
#if SPLIT > 1
                        if (adding) { atomicAdd(c[at], value[e]); } else { c[at] = value[e]; }
#else
                        c[at] = value[e];
#endif
#endif
                    }
                }
#endif
            }
        }
    }
}
