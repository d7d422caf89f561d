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
// The weight transform takes VA neighbouring input channels per invocation and stores U with
// the core's vector width (VA = 4 needs the input channels to be a multiple of 4). The input
// and output transforms take one tile at a time, neighbouring invocations neighbouring tiles,
// and reach V, M and the output through float and vec2 / vec4 views of those buffers, so that
// every load and store of a warp is contiguous: F(2×2)'s input transform and both output
// transforms take VB tiles per invocation (lane l of the j-th of 32 neighbouring invocations
// is their tile 32·l + j; VB = 4 needs the tile count to be a multiple of 4), F(4×4)'s input
// transform THREADS consecutive tiles of one channel per workgroup. Every stage runs with the
// core's workgroup size, over a grid of (x, y) workgroups numbered row by row. The program's
// register count is the largest of its stages', so the transforms are written to need fewer
// than the product's tiles. On an H100 the contiguous stores took F(2×2)'s output transform
// from 0.058 to 0.032 ms and F(4×4)'s from 0.068 to 0.026 ms at N=32 C=K=128 28×28: each
// invocation had written its VB tiles' outputs word by word, 32 bytes apart from its
// neighbours'. Reaching a lane of V's and M's vectors with a computed index instead measured
// slower than before, hence the float views.

#ifndef WINO_M
#define WINO_M 2
#endif

layout(std430, binding = 3) restrict readonly buffer WinoIn { float inp[]; };
layout(std430, binding = 4) restrict readonly buffer WinoW { float w[]; };
layout(std430, binding = 5) restrict readonly buffer WinoBias { float bias[]; };
layout(std430, binding = 6) restrict writeonly buffer WinoOut { float outp[]; };
layout(std430, binding = 6) restrict writeonly buffer WinoOutPairs { vec2 outp_pairs[]; };
layout(std430, binding = 6) restrict writeonly buffer WinoOutQuads { vec4 outp_quads[]; };
uniform uint height;
uniform uint width;
uniform uint stage;

#define OUT_CHANNELS M
#define IN_CHANNELS K
#define TILES N

// Lane l of a VA-wide value (l is a constant loop index after unrolling).
#if VA == 4
#define LANE_A(v, l) v[l]
#else
#define LANE_A(v, l) v
#endif

// Float views of V and M, which the core declares as vectors of VB lanes. A dispatch reaches
// each buffer through one of its views only (stage 0 writes V through v_lanes, the core reads
// it as vectors in stage 1), which is what `restrict` promises.
layout(std430, binding = 1) restrict writeonly buffer WinoVLanes { float v_lanes[]; };
layout(std430, binding = 2) restrict readonly buffer WinoMLanes { float m_lanes[]; };

// The tile of lane `lane` of item g of a channel's `groups` items of VB tiles: each 32
// neighbouring items take 32·VB neighbouring tiles, lane l of the j-th the tile 32·l + j, so
// that a warp's invocations take neighbouring tiles at every lane (the channel's last items,
// fewer than 32, take their tiles the same way with their count for 32).
uint strided_tile(uint g, uint groups, int lane) {
    uint w = g / 32u;
    uint j = g - w * 32u;
    uint stride = min(32u, groups - w * 32u);
    return w * 32u * uint(VB) + stride * uint(lane) + j;
}

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

// The input transform of workgroup `block` of stage 0's input part: THREADS consecutive tiles
// of one input channel, one tile per invocation, so that neighbouring invocations read
// neighbouring pixels and store neighbouring words of V.
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
    if (tile) {
        for (int p = 0; p < WINO_A; ++p) {
            float v[WINO_A];
            bt_of(bd[p], v);
            for (int q = 0; q < WINO_A; ++q) {
                uint xi = uint(p * WINO_A + q);
                v_lanes[xi * IN_CHANNELS * TILES + ch * TILES + t] = v[q];
            }
        }
    }
}

// Y = Aᵀ M A + bias for VB tiles of one output channel, a tile at a time: row p of M times A,
// added into Y with column p of Aᵀ. A row of 4 outputs goes out as one vec4 where the width is
// a multiple of 4 (every row then starts on a 16-byte boundary).
void output_transform() {
    uint th = tiles_down();
    uint tw = tiles_across();
    uint groups = TILES / uint(VB);
    uint item = item_index();
    if (item >= OUT_CHANNELS * groups) {
        return;
    }
    uint k = item / groups;
    uint g = item - k * groups;
    float offset = bias[k];
    for (int lane = 0; lane < VB; ++lane) {
        uint t = strided_tile(g, groups, lane);
        float y[4][4];
        for (int i = 0; i < 4; ++i) {
            for (int col = 0; col < 4; ++col) {
                y[i][col] = offset;
            }
        }
        for (int p = 0; p < 6; ++p) {
            float m[6];
            for (int q = 0; q < 6; ++q) {
                uint xi = uint(p * 6 + q);
                m[q] = m_lanes[xi * OUT_CHANNELS * TILES + k * TILES + t];
            }
            float r[4];
            AT_OF(m, r);
            vec4 column = AT_COLUMNS[p];
            for (int i = 0; i < 4; ++i) {
                for (int col = 0; col < 4; ++col) {
                    y[i][col] += column[i] * r[col];
                }
            }
        }
        uint n = t / (th * tw);
        uint rest = t - n * th * tw;
        uint ty = rest / tw;
        uint x0 = (rest - ty * tw) * 4u;
        uint plane = (n * OUT_CHANNELS + k) * height * width;
        for (int i = 0; i < 4; ++i) {
            uint yy = ty * 4u + uint(i);
            if (yy >= height) {
                continue;
            }
            uint at = plane + yy * width + x0;
            if ((width & 3u) == 0u) {
                outp_quads[at >> 2] = vec4(y[i][0], y[i][1], y[i][2], y[i][3]);
            } else {
                for (int col = 0; col < 4; ++col) {
                    if (x0 + uint(col) < width) {
                        outp[at + uint(col)] = y[i][col];
                    }
                }
            }
        }
    }
}

#else
// The weight transform goes one row of its 4x4 result at a time, so that an invocation holds
// one row of its VA lanes rather than all 16 elements: the program's register count is the
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

// V = Bᵀ d B for VB tiles of one input channel, a tile at a time (see strided_tile).
void input_transform(uint item) {
    uint th = tiles_down();
    uint tw = tiles_across();
    uint groups = TILES / uint(VB);
    if (item >= IN_CHANNELS * groups) {
        return;
    }
    uint ch = item / groups;
    uint g = item - ch * groups;
    for (int lane = 0; lane < VB; ++lane) {
        uint t = strided_tile(g, groups, lane);
        uint n = t / (th * tw);
        uint rest = t - n * th * tw;
        uint ty = rest / tw;
        int y0 = int(ty * 2u) - 1;
        int x0 = int((rest - ty * tw) * 2u) - 1;
        uint plane = (n * IN_CHANNELS + ch) * height * width;
        float d[4][4];
        for (int i = 0; i < 4; ++i) {
            int y = y0 + i;
            bool row = y >= 0 && y < int(height);
            for (int j = 0; j < 4; ++j) {
                int x = x0 + j;
                bool inside = row && x >= 0 && x < int(width);
                float v = inp[inside ? plane + uint(y) * width + uint(x) : 0u];
                d[i][j] = inside ? v : 0.0;
            }
        }
        for (int p = 0; p < 4; ++p) {
            float r[4];
            for (int j = 0; j < 4; ++j) {
                r[j] = d[ROW_A[p]][j] + ROW_SIGN[p] * d[ROW_B[p]][j];
            }
            uint at = uint(p * 4) * IN_CHANNELS * TILES + ch * TILES + t;
            uint step = IN_CHANNELS * TILES;
            v_lanes[at] = r[0] - r[2];
            v_lanes[at + step] = r[1] + r[2];
            v_lanes[at + 2u * step] = r[2] - r[1];
            v_lanes[at + 3u * step] = r[1] - r[3];
        }
    }
}

// Y = Aᵀ M A + bias for VB tiles of one output channel, a tile at a time: Aᵀ m accumulated over
// the rows of m (s0 = m0 + m1 + m2, s1 = m1 - m2 - m3), then each row's two outputs, as one
// vec2 where the width is even.
void output_transform() {
    uint th = tiles_down();
    uint tw = tiles_across();
    uint groups = TILES / uint(VB);
    uint item = item_index();
    if (item >= OUT_CHANNELS * groups) {
        return;
    }
    uint k = item / groups;
    uint g = item - k * groups;
    float offset = bias[k];
    uint step = OUT_CHANNELS * TILES;
    for (int lane = 0; lane < VB; ++lane) {
        uint t = strided_tile(g, groups, lane);
        uint at = k * TILES + t;
        float s0[4];
        float s1[4];
        for (int q = 0; q < 4; ++q) {
            float m0 = m_lanes[at + uint(q) * step];
            float m1 = m_lanes[at + uint(4 + q) * step];
            float m2 = m_lanes[at + uint(8 + q) * step];
            float m3 = m_lanes[at + uint(12 + q) * step];
            s0[q] = m0 + m1 + m2;
            s1[q] = m1 - m2 - m3;
        }
        uint n = t / (th * tw);
        uint rest = t - n * th * tw;
        uint ty = rest / tw;
        uint x = (rest - ty * tw) * 2u;
        uint plane = (n * OUT_CHANNELS + k) * height * width;
        for (int i = 0; i < 2; ++i) {
            float e0 = i == 0 ? s0[0] : s1[0];
            float e1 = i == 0 ? s0[1] : s1[1];
            float e2 = i == 0 ? s0[2] : s1[2];
            float e3 = i == 0 ? s0[3] : s1[3];
            uint y = ty * 2u + uint(i);
            if (y < height) {
                uint o = plane + y * width + x;
                if ((width & 1u) == 0u) {
                    outp_pairs[o >> 1] = vec2(e0 + e1 + e2, e1 - e2 - e3) + offset;
                } else {
                    outp[o] = e0 + e1 + e2 + offset;
                    if (x + 1u < width) {
                        outp[o + 1u] = e1 - e2 - e3 + offset;
                    }
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
