// 3x3 convolution, stride 1, zero padding 1, NCHW layout, with bias:
//   out[n][k][y][x] = bias[k] + sum_{c, dy, dx} in[n][c][y+dy-1][x+dx-1] * w[k][c][dy][dx]
// One invocation per output element: x, y from the global id, z = n * K + k.
layout(std430, binding = 0) readonly buffer In { float inp[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) writeonly buffer Out { float outp[]; };
uniform uint N;
uniform uint C;
uniform uint H;
uniform uint W_;
uniform uint K;

void main() {
    uint x = gl_GlobalInvocationID.x;
    uint y = gl_GlobalInvocationID.y;
    uint nk = gl_GlobalInvocationID.z;
    if (x >= W_ || y >= H || nk >= N * K) {
        return;
    }
    uint n = nk / K;
    uint k = nk % K;
    float acc = bias[k];
    for (uint c = 0u; c < C; ++c) {
        uint in_base = (n * C + c) * H * W_;
        uint w_base = (k * C + c) * 9u;
        for (int dy = 0; dy < 3; ++dy) {
            int iy = int(y) + dy - 1;
            if (iy < 0 || iy >= int(H)) {
                continue;
            }
            for (int dx = 0; dx < 3; ++dx) {
                int ix = int(x) + dx - 1;
                if (ix < 0 || ix >= int(W_)) {
                    continue;
                }
                acc += inp[in_base + uint(iy) * W_ + uint(ix)] * w[w_base + uint(dy * 3 + dx)];
            }
        }
    }
    outp[((n * K + k) * H + y) * W_ + x] = acc;
}
