// 3x3 convolution, stride 1, zero padding 1, NCHW layout, with bias:
//   out[n][k][y][x] = bias[k] + sum_{c, dy, dx} in[n][c][y+dy-1][x+dx-1] * w[k][c][dy][dx]
// Same math and argument order as conv2d.comp: input, weights, bias, output, N, C, H, W_, K.
// One work-item per output element: x, y from the global id, z = n * K + k.
__kernel __attribute__((reqd_work_group_size(16, 16, 1)))
void conv2d(__global const float *restrict inp, __global const float *restrict w,
            __global const float *restrict bias, __global float *restrict outp,
            uint N, uint C, uint H, uint W_, uint K) {
    uint x = (uint)get_global_id(0);
    uint y = (uint)get_global_id(1);
    uint nk = (uint)get_global_id(2);
    if (x >= W_ || y >= H || nk >= N * K) {
        return;
    }
    uint n = nk / K;
    uint k = nk % K;
    float acc = bias[k];
    for (uint c = 0; c < C; ++c) {
        uint in_base = (n * C + c) * H * W_;
        uint w_base = (k * C + c) * 9u;
        for (int dy = 0; dy < 3; ++dy) {
            int iy = (int)y + dy - 1;
            if (iy < 0 || iy >= (int)H) {
                continue;
            }
            for (int dx = 0; dx < 3; ++dx) {
                int ix = (int)x + dx - 1;
                if (ix < 0 || ix >= (int)W_) {
                    continue;
                }
                acc += inp[in_base + (uint)iy * W_ + (uint)ix] * w[w_base + (uint)(dy * 3 + dx)];
            }
        }
    }
    outp[((n * K + k) * H + y) * W_ + x] = acc;
}
