// A mix of float and integer operations as LLVM lowers them for gfx1100 (division, square root,
// min/max, conversions, integer division and remainder, selects, shifts, popcount).
#ifdef SIM_BUILTINS
#define ID() (__builtin_amdgcn_workgroup_id_x() * 64u + __builtin_amdgcn_workitem_id_x())
#define SQRT __builtin_sqrtf
#define FABS __builtin_fabsf
#define FMIN __builtin_fminf
#define FMAX __builtin_fmaxf
#define FLOOR __builtin_floorf
#define FMA __builtin_fmaf
#define POPCOUNT __builtin_popcount
#define IMIN(a, b) ((a) < (b) ? (a) : (b))
#define IMAX(a, b) ((a) > (b) ? (a) : (b))
#else
#define ID() ((uint)(get_group_id(0) * get_local_size(0) + get_local_id(0)))
#define SQRT sqrt
#define FABS fabs
#define FMIN fmin
#define FMAX fmax
#define FLOOR floor
#define FMA fma
#define POPCOUNT popcount
#define IMIN min
#define IMAX max
#endif

kernel void math(global const float* a, global const float* b, global const int* ia,
                 global const int* ib, global float* fo, global int* io, uint n) {
    uint i = ID();
    if (i >= n) {
        return;
    }
    float x = a[i];
    float y = b[i];
    int p = ia[i];
    int q = ib[i];
    fo[8 * i + 0] = x / y;
    fo[8 * i + 1] = SQRT(FABS(x));
    fo[8 * i + 2] = FMIN(x, y);
    fo[8 * i + 3] = FMAX(x, y);
    fo[8 * i + 4] = (float)p;
    fo[8 * i + 5] = FLOOR(x * 3.0f);
    fo[8 * i + 6] = x > y ? x - y : y * 2.0f;
    fo[8 * i + 7] = FMA(x, y, 1.0f);
    io[8 * i + 0] = p / q;
    io[8 * i + 1] = p % q;
    io[8 * i + 2] = (int)((uint)p / (uint)q);
    io[8 * i + 3] = (int)(x * 100.0f);
    io[8 * i + 4] = IMIN(p, q);
    io[8 * i + 5] = IMAX(p, q);
    io[8 * i + 6] = p >> 3;
    io[8 * i + 7] = POPCOUNT(p) + (int)((uint)p >> 29);
}
