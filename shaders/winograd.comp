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
// Each invocation of the transforms takes VA (weights) or VB (input, output) neighbouring input
// channels or tiles, so that U, V and M are read and written with the core's vector widths; VB
// = 4 needs the tile count to be a multiple of 4 and VA = 4 the input channels. F(4×4)'s input
// transform instead takes THREADS consecutive tiles of one channel per workgroup, one per
// invocation, and stores V's vectors through shared memory. Every stage runs with the core's
// workgroup size, over a grid of (x, y) workgroups numbered row by row. The program's register
// count is the largest of its stages', so the transforms are written to need fewer than the
// product's tiles (on an H100, a one-tile-per-invocation output transform and F(2×2)'s input
// transform through shared memory measured slower, the product too).

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

// Invocations of stage 0 that transform the weights (whole workgroups).
// Tiles down and across an image.
uint tiles_down() {
    return (height + uint(WINO_M) - 1u) / uint(WINO_M);
}
uint tiles_across() {
    return (width + uint(WINO_M) - 1u) / uint(WINO_M);
}

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

// y = Bᵀ x for a 6-vector x.
void bt_of(float x[6], out float y[6]) {
    y[0] = 4.0 * x[0] - 5.0 * x[2] + x[4];
    y[1] = x[3] + x[4] - 4.0 * (x[1] + x[2]);
    y[2] = 4.0 * (x[1] - x[2]) + x[4] - x[3];
    y[3] = 2.0 * (x[3] - x[1]) + x[4] - x[2];
    y[4] = 2.0 * (x[1] - x[3]) + x[4] - x[2];
    y[5] = 4.0 * x[1] - 5.0 * x[3] + x[5];
}

// The columns of Aᵀ.
const vec4 AT_COLUMNS[6] = vec4[6](vec4(1.0, 0.0, 0.0, 0.0), vec4(1.0, 1.0, 1.0, 1.0), vec4(1.0, -1.0, 1.0, -1.0),
                                   vec4(1.0, 2.0, 4.0, 8.0), vec4(1.0, -2.0, 4.0, -8.0), vec4(0.0, 0.0, 0.0, 1.0));

// y = Aᵀ x for a 6-vector x of VB lanes (a macro: C_ELEM is float or vec4).
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

// Stage 0's transformed input of one workgroup, before it is stored as V's vectors: XI_CHUNK
// elements of each of its THREADS tiles at a time (two rows of the 6×6 tile, a third of it), so
// that 256 invocations stay within 32 KiB with the core's slices.
#define XI_CHUNK 12
// Tile l of the workgroup is kept at [element][l % 4][l / 4], so that invocation e reads lane
// j of its vector e at [element][j][e] (neighbours read neighbouring words); each lane's row is
// padded by 8 words, so that the writes of 32 neighbouring tiles fall in 32 different banks.
#define STAGED_PITCH (THREADS / 4 + 8)
shared float staged_v[XI_CHUNK][4 * STAGED_PITCH];

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
                staged_v[r * WINO_A + q][(gl_LocalInvocationIndex & 3u) * uint(STAGED_PITCH) + gl_LocalInvocationIndex / 4u] = v[q];
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
                    uint tile = lane0 + uint(lane);
                    LANE_B(value, lane) = staged_v[element][(tile & 3u) * uint(STAGED_PITCH) + tile / 4u];
                }
                b[(xi * IN_CHANNELS * TILES + ch * TILES + t0) / uint(VB)] = value;
            }
        }
        barrier();
    }
}

void output_transform() {
    uint th = tiles_down();
    uint tw = tiles_across();
    uint groups = TILES / uint(VB);
    uint item = item_index();
    if (item >= OUT_CHANNELS * groups) {
        return;
    }
    uint k = item / groups;
    uint t0 = (item - k * groups) * uint(VB);
    float offset = bias[k];
    // Two output rows at a time, reading M twice, so that the accumulators (8 values of VB
    // lanes) leave the program's register count to the product: row p of M times A (4 values),
    // added into those rows of Y = Aᵀ (M A) with column p of Aᵀ.
    for (int half_rows = 0; half_rows < 2; ++half_rows) {
        C_ELEM y[2][4];
        for (int i = 0; i < 2; ++i) {
            for (int col = 0; col < 4; ++col) {
                y[i][col] = C_ELEM(0.0);
            }
        }
        for (int p = 0; p < 6; ++p) {
            C_ELEM m[6];
            for (int q = 0; q < 6; ++q) {
                uint xi = uint(p * 6 + q);
                m[q] = c[(xi * OUT_CHANNELS * TILES + k * TILES + t0) / uint(VB)];
            }
            C_ELEM r[4];
            AT_OF(m, r);
            vec4 column = AT_COLUMNS[p];
            for (int i = 0; i < 2; ++i) {
                for (int col = 0; col < 4; ++col) {
                    y[i][col] += column[half_rows * 2 + i] * r[col];
                }
            }
        }
        for (int lane = 0; lane < VB; ++lane) {
            uint t = t0 + uint(lane);
            uint n = t / (th * tw);
            uint rest = t - n * th * tw;
            uint ty = rest / tw;
            uint x0 = (rest - ty * tw) * 4u;
            uint plane = (n * OUT_CHANNELS + k) * height * width;
            for (int i = 0; i < 2; ++i) {
                uint yy = ty * 4u + uint(half_rows * 2 + i);
                if (yy >= height) {
                    continue;
                }
                for (int col = 0; col < 4; ++col) {
                    uint x = x0 + uint(col);
                    if (x < width) {
                        outp[plane + yy * width + x] = LANE_B(y[i][col], lane) + offset;
                    }
                }
            }
        }
    }
}

#else
// Each transform goes one row of its 4x4 (or 2x2) result at a time, so that an invocation holds
// one row of its VA or VB lanes rather than all 16 elements: the program's register count is the
// largest of its stages', and the product's tiles need all of theirs.

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

// Row p of Bᵀ d is d[ROW_A] + ROW_SIGN · d[ROW_B]: d0 - d2, d1 + d2, d2 - d1, d1 - d3.
const int ROW_A[4] = int[4](0, 1, 2, 1);
const int ROW_B[4] = int[4](2, 2, 1, 3);
const float ROW_SIGN[4] = float[4](-1.0, 1.0, -1.0, -1.0);

void input_transform(uint item) {
    uint th = tiles_down();
    uint tw = tiles_across();
    uint groups = TILES / uint(VB);
    if (item >= IN_CHANNELS * groups) {
        return;
    }
    uint ch = item / groups;
    uint t0 = (item - ch * groups) * uint(VB);
    // Per lane: the tile's top-left input pixel (one up and left of its outputs) and plane.
    int y0[VB];
    int x0[VB];
    uint plane[VB];
    for (int lane = 0; lane < VB; ++lane) {
        uint t = t0 + uint(lane);
        uint n = t / (th * tw);
        uint rest = t - n * th * tw;
        uint ty = rest / tw;
        y0[lane] = int(ty * 2u) - 1;
        x0[lane] = int((rest - ty * tw) * 2u) - 1;
        plane[lane] = (n * IN_CHANNELS + ch) * height * width;
    }
    for (int p = 0; p < 4; ++p) {
        B_ELEM row[4];
        for (int lane = 0; lane < VB; ++lane) {
            int ya = y0[lane] + ROW_A[p];
            int yb = y0[lane] + ROW_B[p];
            bool row_a = ya >= 0 && ya < int(height);
            bool row_b = yb >= 0 && yb < int(height);
            float r[4];
            for (int j = 0; j < 4; ++j) {
                int x = x0[lane] + j;
                bool column = x >= 0 && x < int(width);
                bool inside_a = row_a && column;
                bool inside_b = row_b && column;
                float da = inp[inside_a ? plane[lane] + uint(ya) * width + uint(x) : 0u];
                float db = inp[inside_b ? plane[lane] + uint(yb) * width + uint(x) : 0u];
                r[j] = (inside_a ? da : 0.0) + ROW_SIGN[p] * (inside_b ? db : 0.0);
            }
            // The same combination along the row: (Bᵀ d B)[p].
            LANE_B(row[0], lane) = r[0] - r[2];
            LANE_B(row[1], lane) = r[1] + r[2];
            LANE_B(row[2], lane) = r[2] - r[1];
            LANE_B(row[3], lane) = r[1] - r[3];
        }
        for (int q = 0; q < 4; ++q) {
            uint xi = uint(p * 4 + q);
            b[(xi * IN_CHANNELS * TILES + ch * TILES + t0) / uint(VB)] = row[q];
        }
    }
}

void output_transform() {
    uint th = tiles_down();
    uint tw = tiles_across();
    uint groups = TILES / uint(VB);
    uint item = item_index();
    if (item >= OUT_CHANNELS * groups) {
        return;
    }
    uint k = item / groups;
    uint t0 = (item - k * groups) * uint(VB);
    // Aᵀ m, accumulated over the rows of m: s0 = m0 + m1 + m2, s1 = m1 - m2 - m3.
    C_ELEM s0[4];
    C_ELEM s1[4];
    for (int p = 0; p < 4; ++p) {
        for (int q = 0; q < 4; ++q) {
            uint xi = uint(p * 4 + q);
            C_ELEM m = c[(xi * OUT_CHANNELS * TILES + k * TILES + t0) / uint(VB)];
            if (p == 0) {
                s0[q] = m;
            } else if (p == 1) {
                s0[q] += m;
                s1[q] = m;
            } else if (p == 2) {
                s0[q] += m;
                s1[q] -= m;
            } else {
                s1[q] -= m;
            }
        }
    }
    float offset = bias[k];
    for (int lane = 0; lane < VB; ++lane) {
        uint t = t0 + uint(lane);
        uint n = t / (th * tw);
        uint rest = t - n * th * tw;
        uint ty = rest / tw;
        uint tx = rest - ty * tw;
        uint plane = (n * OUT_CHANNELS + k) * height * width;
        uint x = tx * 2u;
        for (int i = 0; i < 2; ++i) {
            float e0 = i == 0 ? LANE_B(s0[0], lane) : LANE_B(s1[0], lane);
            float e1 = i == 0 ? LANE_B(s0[1], lane) : LANE_B(s1[1], lane);
            float e2 = i == 0 ? LANE_B(s0[2], lane) : LANE_B(s1[2], lane);
            float e3 = i == 0 ? LANE_B(s0[3], lane) : LANE_B(s1[3], lane);
            uint y = ty * 2u + uint(i);
            if (y < height) {
                outp[plane + y * width + x] = e0 + e1 + e2 + offset;
                if (x + 1u < width) {
                    outp[plane + y * width + x + 1u] = e1 - e2 - e3 + offset;
                }
            }
        }
    }
}

#endif

void main() {
    if (stage == 0u) {
        // The first workgroups transform the weights; the others the input.
        uint group = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
        uint weight_groups = weight_items() / uint(THREADS);
        if (group < weight_groups) {
            weight_transform(item_index());
        } else {
#if WINO_M == 4
            input_transform(group - weight_groups);
#else
            input_transform(item_index() - weight_items());
#endif
        }
    } else if (stage == 1u) {
        gemm_main();
    } else {
        output_transform();
    }
}
