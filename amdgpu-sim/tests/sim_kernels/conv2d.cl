// 3x3 convolution, stride 1, zero padding 1, NCHW, with bias:
//   out[n][k][y][x] = bias[k] + sum_{c,dy,dx} in[n][c][y+dy-1][x+dx-1] * w[k][c][dy][dx]
// One work-item per output element: x, y from the global id, z = n * K + k.
#ifdef SIM_BUILTINS
#define GID(d, size) (__builtin_amdgcn_workgroup_id_##d() * (size) + __builtin_amdgcn_workitem_id_##d())
#define GLOBAL_X() GID(x, 8u)
#define GLOBAL_Y() GID(y, 8u)
#define GLOBAL_Z() GID(z, 1u)
#else
// Not get_global_id: see saxpy.cl for why libclc-22's global offset is wrong under amdhsa.
#define GID(d) ((uint)(get_group_id(d) * get_local_size(d) + get_local_id(d)))
#define GLOBAL_X() GID(0)
#define GLOBAL_Y() GID(1)
#define GLOBAL_Z() GID(2)
#endif

kernel void conv2d(global const float* inp, global const float* w, global const float* bias,
                   global float* outp, uint N, uint C, uint H, uint W, uint K) {
    uint x = GLOBAL_X();
    uint y = GLOBAL_Y();
    uint nk = GLOBAL_Z();
    if (x >= W || y >= H || nk >= N * K) {
        return;
    }
    uint n = nk / K;
    uint k = nk % K;
    float acc = bias[k];
    for (uint c = 0; c < C; ++c) {
        uint in_base = (n * C + c) * H * W;
        uint w_base = (k * C + c) * 9u;
        for (int dy = 0; dy < 3; ++dy) {
            int iy = (int)y + dy - 1;
            if (iy < 0 || iy >= (int)H) {
                continue;
            }
            for (int dx = 0; dx < 3; ++dx) {
                int ix = (int)x + dx - 1;
                if (ix < 0 || ix >= (int)W) {
                    continue;
                }
                acc += inp[in_base + (uint)iy * W + (uint)ix] * w[w_base + (uint)(dy * 3 + dx)];
            }
        }
    }
    outp[((n * K + k) * H + y) * W + x] = acc;
}
