// Winograd F(2x2, 3x3) conv2d: 3x3 kernel, stride 1, zero padding 1, NCHW input, KCRS weights,
// bias. Compiled appended to shaders/gemm.comp with WINOGRAD defined (the core's `main` becomes
// `gemm_main`, batched over workgroup z); one program, three dispatches told apart by `stage`:
//   0  U[xi][k][c] = (G g Gᵀ)[xi]    per output channel k and input channel c (the weights),
//      V[xi][c][t] = (Bᵀ d B)[xi]    then per input channel c and 4x4 input tile t (stride 2,
//                                    the input's ragged right and bottom edges read as zero):
//                                    the first workgroups take the weights, the others the input
//   1  M[xi] = U[xi] · V[xi]         16 products (K x C)·(C x tiles) on the GEMM core
//   2  Y = Aᵀ M A + bias             per k and tile: its 2x2 outputs, clipped at the edges
// xi = 4·row + column of an element of the 4x4 transformed tile. The tiles of all images are
// numbered t = (n·TH + ty)·TW + tx with TH = ceil(height / 2), TW = ceil(width / 2); the core's
// M, N, K are the output channels, the tiles and the input channels.
//
// Each invocation of the transforms takes VA (weights) or VB (input, output) neighbouring input
// channels or tiles, so that U, V and M are read and written with the core's vector widths; VB
// = 4 needs the tile count to be a multiple of 4 and VA = 4 the input channels. Every stage runs
// with the core's workgroup size, over a grid of (x, y) workgroups numbered row by row.

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
uint weight_items() {
    uint items = OUT_CHANNELS * (IN_CHANNELS / uint(VA));
    return (items + uint(THREADS) - 1u) / uint(THREADS) * uint(THREADS);
}

uint item_index() {
    return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * uint(THREADS) + gl_LocalInvocationIndex;
}

void weight_transform(uint item) {
    uint groups = IN_CHANNELS / uint(VA);
    if (item >= OUT_CHANNELS * groups) {
        return;
    }
    uint k = item / groups;
    uint c0 = (item - k * groups) * uint(VA);
    A_ELEM u[16];
    for (int lane = 0; lane < VA; ++lane) {
        uint base = (k * IN_CHANNELS + c0 + uint(lane)) * 9u;
        float g[9];
        for (int i = 0; i < 9; ++i) {
            g[i] = w[base + uint(i)];
        }
        // G g, row by row: g0, (g0 + g1 + g2) / 2, (g0 - g1 + g2) / 2, g2.
        float t[12];
        for (int j = 0; j < 3; ++j) {
            t[j] = g[j];
            t[3 + j] = 0.5 * (g[j] + g[3 + j] + g[6 + j]);
            t[6 + j] = 0.5 * (g[j] - g[3 + j] + g[6 + j]);
            t[9 + j] = g[6 + j];
        }
        // (G g) Gᵀ, the same combination along each row.
        for (int i = 0; i < 4; ++i) {
            float a0 = t[i * 3];
            float a1 = t[i * 3 + 1];
            float a2 = t[i * 3 + 2];
            LANE_A(u[i * 4], lane) = a0;
            LANE_A(u[i * 4 + 1], lane) = 0.5 * (a0 + a1 + a2);
            LANE_A(u[i * 4 + 2], lane) = 0.5 * (a0 - a1 + a2);
            LANE_A(u[i * 4 + 3], lane) = a2;
        }
    }
    for (int xi = 0; xi < 16; ++xi) {
        a[(uint(xi) * OUT_CHANNELS * IN_CHANNELS + k * IN_CHANNELS + c0) / uint(VA)] = u[xi];
    }
}

void input_transform(uint item) {
    uint th = (height + 1u) / 2u;
    uint tw = (width + 1u) / 2u;
    uint groups = TILES / uint(VB);
    if (item >= IN_CHANNELS * groups) {
        return;
    }
    uint ch = item / groups;
    uint t0 = (item - ch * groups) * uint(VB);
    B_ELEM v[16];
    for (int lane = 0; lane < VB; ++lane) {
        uint t = t0 + uint(lane);
        uint n = t / (th * tw);
        uint rest = t - n * th * tw;
        uint ty = rest / tw;
        uint tx = rest - ty * tw;
        int y0 = int(ty * 2u) - 1;
        int x0 = int(tx * 2u) - 1;
        uint plane = (n * IN_CHANNELS + ch) * height * width;
        float d[16];
        for (int i = 0; i < 4; ++i) {
            for (int j = 0; j < 4; ++j) {
                int y = y0 + i;
                int x = x0 + j;
                bool inside = y >= 0 && y < int(height) && x >= 0 && x < int(width);
                float value = inp[inside ? plane + uint(y) * width + uint(x) : 0u];
                d[i * 4 + j] = inside ? value : 0.0;
            }
        }
        // Bᵀ d, row by row: d0 - d2, d1 + d2, d2 - d1, d1 - d3.
        float r[16];
        for (int j = 0; j < 4; ++j) {
            r[j] = d[j] - d[8 + j];
            r[4 + j] = d[4 + j] + d[8 + j];
            r[8 + j] = d[8 + j] - d[4 + j];
            r[12 + j] = d[4 + j] - d[12 + j];
        }
        // (Bᵀ d) B, the same combination along each row.
        for (int i = 0; i < 4; ++i) {
            LANE_B(v[i * 4], lane) = r[i * 4] - r[i * 4 + 2];
            LANE_B(v[i * 4 + 1], lane) = r[i * 4 + 1] + r[i * 4 + 2];
            LANE_B(v[i * 4 + 2], lane) = r[i * 4 + 2] - r[i * 4 + 1];
            LANE_B(v[i * 4 + 3], lane) = r[i * 4 + 1] - r[i * 4 + 3];
        }
    }
    for (int xi = 0; xi < 16; ++xi) {
        b[(uint(xi) * IN_CHANNELS * TILES + ch * TILES + t0) / uint(VB)] = v[xi];
    }
}

void output_transform() {
    uint th = (height + 1u) / 2u;
    uint tw = (width + 1u) / 2u;
    uint groups = TILES / uint(VB);
    uint item = item_index();
    if (item >= OUT_CHANNELS * groups) {
        return;
    }
    uint k = item / groups;
    uint t0 = (item - k * groups) * uint(VB);
    C_ELEM m[16];
    for (int xi = 0; xi < 16; ++xi) {
        m[xi] = c[(uint(xi) * OUT_CHANNELS * TILES + k * TILES + t0) / uint(VB)];
    }
    float offset = bias[k];
    for (int lane = 0; lane < VB; ++lane) {
        // Aᵀ m, row by row: m0 + m1 + m2, m1 - m2 - m3.
        float s[8];
        for (int j = 0; j < 4; ++j) {
            float m0 = LANE_B(m[j], lane);
            float m1 = LANE_B(m[4 + j], lane);
            float m2 = LANE_B(m[8 + j], lane);
            float m3 = LANE_B(m[12 + j], lane);
            s[j] = m0 + m1 + m2;
            s[4 + j] = m1 - m2 - m3;
        }
        uint t = t0 + uint(lane);
        uint n = t / (th * tw);
        uint rest = t - n * th * tw;
        uint ty = rest / tw;
        uint tx = rest - ty * tw;
        uint plane = (n * OUT_CHANNELS + k) * height * width;
        for (int i = 0; i < 2; ++i) {
            uint y = ty * 2u + uint(i);
            float left = s[i * 4] + s[i * 4 + 1] + s[i * 4 + 2] + offset;
            float right = s[i * 4 + 1] - s[i * 4 + 2] - s[i * 4 + 3] + offset;
            uint x = tx * 2u;
            if (y < height) {
                outp[plane + y * width + x] = left;
                if (x + 1u < width) {
                    outp[plane + y * width + x + 1u] = right;
                }
            }
        }
    }
}

void main() {
    if (stage == 0u) {
        uint item = item_index();
        uint weights = weight_items();
        if (item < weights) {
            weight_transform(item);
        } else {
            input_transform(item - weights);
        }
    } else if (stage == 1u) {
        gemm_main();
    } else {
        output_transform();
    }
}
