// Winograd F(m×m, 3×3) conv2d, m = WINO_M (2 or 4; 2 when undefined): 3x3 kernel, stride 1,
// zero padding 1, NCHW input, KCRS weights, bias. With a = m + 2, each a×a input tile (stride m)
// gives an m×m block of outputs. Compiled appended to shaders/gemm.comp with WINOGRAD defined
// (the core's `main` becomes `gemm_main`, batched over workgroup z); one program, three
// dispatches told apart by `stage`:
//   0  U[xi][k][c] = (G g Gᵀ)[xi]    per output channel k and input channel c (the weights),
//      V[xi][c][t] = (Bᵀ d B)[xi]    then per input channel c and a×a input tile t (the
//                                    input's ragged right and bottom edges read as zero):
//                                    the first workgroups take the weights, the others the input
//   1  M[xi] = U[xi] · V[xi]         a² products (K x C)·(C x tiles) on the GEMM core
//   2  Y = Aᵀ M A + bias             per k and tile: its m×m outputs, clipped at the edges
// xi = a·row + column of an element of the a×a transformed tile. The tiles of all images are
// numbered t = (n·TH + ty)·TW + tx with TH = ceil(height / m), TW = ceil(width / m); the core's
// M, N, K are the output channels, the tiles and the input channels.
//
// Stage 0: each invocation of the weights' part takes VA neighbouring input channels of one
// output channel; each workgroup of the input's part THREADS consecutive tiles of one input
// channel, one per invocation, stored through shared memory as V's VB-wide vectors (VB = 4 needs
// the tile count to be a multiple of 4, VA = 4 the input channels). Stage 2: one output channel
// and tile per invocation. Every stage runs with the core's workgroup size, over a grid of (x,
// y) workgroups numbered row by row.

#ifndef WINO_M
#define WINO_M 2
#endif

layout(std430, binding = 3) restrict readonly buffer WinoIn { float inp[]; };
layout(std430, binding = 4) restrict readonly buffer WinoW { float w[]; };
layout(std430, binding = 5) restrict readonly buffer WinoBias { float bias[]; };
layout(std430, binding = 6) restrict buffer WinoOut { float outp[]; };
uniform uint height;
uniform uint width;
uniform uint stage;

#define OUT_CHANNELS M
#define IN_CHANNELS K
#define TILES N

// Lane l of a VA- or VB-wide value (l is a constant loop index after unrolling).
#if VA == 4
#define LANE_A(v, l) v[l]
#else
#define LANE_A(v, l) v
#endif
#if VB == 4
#define LANE_B(v, l) v[l]
#else
#define LANE_B(v, l) v
#endif

// Tiles down and across an image.
uint tiles_down() {
    return (height + uint(WINO_M) - 1u) / uint(WINO_M);
}
uint tiles_across() {
    return (width + uint(WINO_M) - 1u) / uint(WINO_M);
}

// Invocations of stage 0 that transform the weights (whole workgroups).
uint weight_items() {
    uint items = OUT_CHANNELS * (IN_CHANNELS / uint(VA));
    return (items + uint(THREADS) - 1u) / uint(THREADS) * uint(THREADS);
}

uint item_index() {
    return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * uint(THREADS) + gl_LocalInvocationIndex;
}

#if WINO_M == 4
#define WINO_A 6
// F(4×4, 3×3) (Lavin and Gray). Each 1-D transform is written out, so that every value stays
// in a register whatever the compiler unrolls:
//   G (6×3):  1/4 0 0 | -1/6 -1/6 -1/6 | -1/6 1/6 -1/6 | 1/24 1/12 1/6 | 1/24 -1/12 1/6 | 0 0 1
//   Bᵀ (6×6): 4 0 -5 0 1 0 | 0 -4 -4 1 1 0 | 0 4 -4 -1 1 0 | 0 -2 -1 2 1 0 | 0 2 -1 -2 1 0 |
//             0 4 0 -5 0 1
//   Aᵀ (4×6): 1 1 1 1 1 0 | 0 1 -1 2 -2 0 | 0 1 1 4 4 0 | 0 1 -1 8 -8 1

// y = G x for a 3-vector x.
void g_of(float x0, float x1, float x2, out float y[6]) {
    y[0] = 0.25 * x0;
    y[1] = (x0 + x1 + x2) * (-1.0 / 6.0);
    y[2] = (x0 - x1 + x2) * (-1.0 / 6.0);
    y[3] = x0 * (1.0 / 24.0) + x1 * (1.0 / 12.0) + x2 * (1.0 / 6.0);
    y[4] = x0 * (1.0 / 24.0) - x1 * (1.0 / 12.0) + x2 * (1.0 / 6.0);
    y[5] = x2;
}

// y = Bᵀ x for an a-vector x.
void bt_of(float x[WINO_A], out float y[WINO_A]) {
    y[0] = 4.0 * x[0] - 5.0 * x[2] + x[4];
    y[1] = x[3] + x[4] - 4.0 * (x[1] + x[2]);
    y[2] = 4.0 * (x[1] - x[2]) + x[4] - x[3];
    y[3] = 2.0 * (x[3] - x[1]) + x[4] - x[2];
    y[4] = 2.0 * (x[1] - x[3]) + x[4] - x[2];
    y[5] = 4.0 * x[1] - 5.0 * x[3] + x[5];
}

// The columns of Aᵀ.
#define AT_COLUMN vec4
const vec4 AT_COLUMNS[6] = vec4[6](vec4(1.0, 0.0, 0.0, 0.0), vec4(1.0, 1.0, 1.0, 1.0), vec4(1.0, -1.0, 1.0, -1.0),
                                   vec4(1.0, 2.0, 4.0, 8.0), vec4(1.0, -2.0, 4.0, -8.0), vec4(0.0, 0.0, 0.0, 1.0));

// y = Aᵀ x for an a-vector x.
#define AT_OF(x, y) \
    y[0] = x[0] + x[1] + x[2] + x[3] + x[4]; \
    y[1] = (x[1] - x[2]) + 2.0 * (x[3] - x[4]); \
    y[2] = (x[1] + x[2]) + 4.0 * (x[3] + x[4]); \
    y[3] = (x[1] - x[2]) + 8.0 * (x[3] - x[4]) + x[5]

void weight_transform(uint item) {
    uint groups = IN_CHANNELS / uint(VA);
    if (item >= OUT_CHANNELS * groups) {
        return;
    }
    uint k = item / groups;
    uint c0 = (item - k * groups) * uint(VA);
    uint first = (k * IN_CHANNELS + c0) * 9u;
    // One lane (input channel) at a time: G g column by column (6×3), then each of its rows
    // times Gᵀ, stored as that lane of U's vectors (a constant component: a 4-byte store).
    for (int lane = 0; lane < VA; ++lane) {
        uint base = first + uint(lane) * 9u;
        float gg[3][6];
        for (int j = 0; j < 3; ++j) {
            g_of(w[base + uint(j)], w[base + 3u + uint(j)], w[base + 6u + uint(j)], gg[j]);
        }
        for (int p = 0; p < 6; ++p) {
            float u[6];
            g_of(gg[0][p], gg[1][p], gg[2][p], u);
            for (int q = 0; q < 6; ++q) {
                uint xi = uint(p * 6 + q);
                LANE_A(a[(xi * OUT_CHANNELS * IN_CHANNELS + k * IN_CHANNELS + c0) / uint(VA)], lane) = u[q];
            }
        }
    }
}

#else
#define WINO_A 4
// F(2×2, 3×3): G (4×3): 1 0 0 | 1/2 1/2 1/2 | 1/2 -1/2 1/2 | 0 0 1; Bᵀ (4×4): 1 0 -1 0 |
// 0 1 1 0 | 0 -1 1 0 | 0 1 0 -1; Aᵀ (2×4): 1 1 1 0 | 0 1 -1 -1.

// Each row of the weights' 4x4 result is made at a time, so that an invocation holds one row
// of its VA lanes rather than all 16 elements.
void weight_transform(uint item) {
    uint groups = IN_CHANNELS / uint(VA);
    if (item >= OUT_CHANNELS * groups) {
        return;
    }
    uint k = item / groups;
    uint c0 = (item - k * groups) * uint(VA);
    uint first = (k * IN_CHANNELS + c0) * 9u;
    for (int p = 0; p < 4; ++p) {
        A_ELEM row[4];
        for (int lane = 0; lane < VA; ++lane) {
            uint base = first + uint(lane) * 9u;
            // Row p of G g: g0, (g0 + g1 + g2) / 2, (g0 - g1 + g2) / 2, g2.
            float t[3];
            for (int j = 0; j < 3; ++j) {
                float g0 = w[base + uint(j)];
                float g1 = w[base + 3u + uint(j)];
                float g2 = w[base + 6u + uint(j)];
                if (p == 0) {
                    t[j] = g0;
                } else if (p == 1) {
                    t[j] = 0.5 * (g0 + g1 + g2);
                } else if (p == 2) {
                    t[j] = 0.5 * (g0 - g1 + g2);
                } else {
                    t[j] = g2;
                }
            }
            // The same combination along the row: (G g Gᵀ)[p].
            LANE_A(row[0], lane) = t[0];
            LANE_A(row[1], lane) = 0.5 * (t[0] + t[1] + t[2]);
            LANE_A(row[2], lane) = 0.5 * (t[0] - t[1] + t[2]);
            LANE_A(row[3], lane) = t[2];
        }
        for (int q = 0; q < 4; ++q) {
            uint xi = uint(p * 4 + q);
            a[(xi * OUT_CHANNELS * IN_CHANNELS + k * IN_CHANNELS + c0) / uint(VA)] = row[q];
        }
    }
}

// y = Bᵀ x for an a-vector x.
void bt_of(float x[WINO_A], out float y[WINO_A]) {
    y[0] = x[0] - x[2];
    y[1] = x[1] + x[2];
    y[2] = x[2] - x[1];
    y[3] = x[1] - x[3];
}

// y = Aᵀ x for an a-vector x.
#define AT_OF(x, y) \
    y[0] = x[0] + x[1] + x[2]; \
    y[1] = x[1] - x[2] - x[3]

// The columns of Aᵀ.
#define AT_COLUMN vec2
const vec2 AT_COLUMNS[4] = vec2[4](vec2(1.0, 0.0), vec2(1.0, 1.0), vec2(1.0, -1.0), vec2(0.0, -1.0));
#endif

// Stage 0's transformed input of one workgroup, before it is stored as V's vectors: XI_CHUNK
// elements of each of its THREADS tiles at a time (whole rows of the a×a tile: a half of
// F(2×2)'s, a third of F(4×4)'s), so that 256 invocations stay within 32 KiB with the core's
// slices.
#if WINO_M == 4
#define XI_CHUNK 12
#else
#define XI_CHUNK 8
#endif
shared float staged_v[XI_CHUNK][THREADS];

// The input transform of workgroup `block` of stage 0's input part: THREADS consecutive tiles
// of one input channel, one tile per invocation, so that neighbouring invocations read
// neighbouring pixels; the transformed values go through shared memory and out as V's vectors
// (VB tiles each), so that the stores are contiguous too.
void input_transform(uint block) {
    uint th = tiles_down();
    uint tw = tiles_across();
    uint blocks = (TILES + uint(THREADS) - 1u) / uint(THREADS);
    uint ch = block / blocks;
    if (ch >= IN_CHANNELS) {
        return;
    }
    uint first = (block - ch * blocks) * uint(THREADS);
    uint t = first + gl_LocalInvocationIndex;
    // The tile's a×a patch of input, zero outside the image (and for a tile past the last).
    float d[WINO_A][WINO_A];
    uint n = t / (th * tw);
    uint rest = t - n * th * tw;
    uint ty = rest / tw;
    // The patch's top-left input pixel, one up and left of its outputs.
    int y0 = int(ty * uint(WINO_M)) - 1;
    int x0 = int((rest - ty * tw) * uint(WINO_M)) - 1;
    uint plane = (n * IN_CHANNELS + ch) * height * width;
    bool tile = t < TILES;
    for (int i = 0; i < WINO_A; ++i) {
        int y = y0 + i;
        bool row = tile && y >= 0 && y < int(height);
        for (int j = 0; j < WINO_A; ++j) {
            int x = x0 + j;
            bool inside = row && x >= 0 && x < int(width);
            float v = inp[inside ? plane + uint(y) * width + uint(x) : 0u];
            d[i][j] = inside ? v : 0.0;
        }
    }
    // Bᵀ d, column by column.
    float bd[WINO_A][WINO_A];
    for (int j = 0; j < WINO_A; ++j) {
        float column[WINO_A];
        for (int i = 0; i < WINO_A; ++i) {
            column[i] = d[i][j];
        }
        float out_column[WINO_A];
        bt_of(column, out_column);
        for (int p = 0; p < WINO_A; ++p) {
            bd[p][j] = out_column[p];
        }
    }
    const int chunks = WINO_A * WINO_A / XI_CHUNK;
    const int rows_per_chunk = WINO_A / chunks;
    for (int chunk = 0; chunk < chunks; ++chunk) {
        // Rows of (Bᵀ d) B into shared memory.
        for (int r = 0; r < rows_per_chunk; ++r) {
            int p = chunk * rows_per_chunk + r;
            float v[WINO_A];
            bt_of(bd[p], v);
            for (int q = 0; q < WINO_A; ++q) {
                staged_v[r * WINO_A + q][gl_LocalInvocationIndex] = v[q];
            }
        }
        barrier();
        // Out as vectors: XI_CHUNK rows of THREADS / VB vectors each.
        for (uint e = gl_LocalInvocationIndex; e < uint(XI_CHUNK * THREADS / VB); e += uint(THREADS)) {
            uint element = e / uint(THREADS / VB);
            uint lane0 = (e - element * uint(THREADS / VB)) * uint(VB);
            uint t0 = first + lane0;
            if (t0 < TILES) {
                uint xi = uint(chunk * XI_CHUNK) + element;
                B_ELEM value;
                for (int lane = 0; lane < VB; ++lane) {
                    LANE_B(value, lane) = staged_v[element][lane0 + uint(lane)];
                }
                b[(xi * IN_CHANNELS * TILES + ch * TILES + t0) / uint(VB)] = value;
            }
        }
        barrier();
    }
}

// Element xi of the products for output channel k and tile t (a lane of M's vectors).
float product_at(uint xi, uint k, uint t) {
    C_ELEM v = c[(xi * OUT_CHANNELS * TILES + k * TILES + t) / uint(VB)];
#if VB == 4
    return v[t & 3u];
#else
    return v;
#endif
}

// Y = Aᵀ M A + bias for one output channel and tile per invocation, so that neighbouring
// invocations read the same vectors of M and write neighbouring outputs: row p of M times A,
// added into Y with column p of Aᵀ.
void output_transform() {
    uint item = item_index();
    if (item >= OUT_CHANNELS * TILES) {
        return;
    }
    uint k = item / TILES;
    uint t = item - k * TILES;
    float y[WINO_M][WINO_M];
    for (int i = 0; i < WINO_M; ++i) {
        for (int col = 0; col < WINO_M; ++col) {
            y[i][col] = 0.0;
        }
    }
    for (int p = 0; p < WINO_A; ++p) {
        float m[WINO_A];
        for (int q = 0; q < WINO_A; ++q) {
            m[q] = product_at(uint(p * WINO_A + q), k, t);
        }
        float r[WINO_M];
        AT_OF(m, r);
        AT_COLUMN column = AT_COLUMNS[p];
        for (int i = 0; i < WINO_M; ++i) {
            for (int col = 0; col < WINO_M; ++col) {
                y[i][col] += column[i] * r[col];
            }
        }
    }
    uint th = tiles_down();
    uint tw = tiles_across();
    uint n = t / (th * tw);
    uint rest = t - n * th * tw;
    uint ty = rest / tw;
    uint x0 = (rest - ty * tw) * uint(WINO_M);
    uint plane = (n * OUT_CHANNELS + k) * height * width;
    float offset = bias[k];
    for (int i = 0; i < WINO_M; ++i) {
        uint yy = ty * uint(WINO_M) + uint(i);
        for (int col = 0; col < WINO_M; ++col) {
            uint x = x0 + uint(col);
            if (yy < height && x < width) {
                outp[plane + yy * width + x] = y[i][col] + offset;
            }
        }
    }
}

void main() {
    if (stage == 0u) {
        // The first workgroups transform the weights, one (output, input channel) pair of VA
        // lanes per invocation; the others the input, a block of tiles each.
        uint group = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
        uint weight_groups = weight_items() / uint(THREADS);
        if (group < weight_groups) {
            weight_transform(item_index());
        } else {
            input_transform(group - weight_groups);
        }
    } else if (stage == 1u) {
        gemm_main();
    } else {
        output_transform();
    }
}
