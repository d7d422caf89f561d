// Half-precision arithmetic: LLVM emits gfx11 true16 encodings (v1.l / v1.h halves) for it.
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#ifdef SIM_BUILTINS
#define ID() (__builtin_amdgcn_workgroup_id_x() * 64u + __builtin_amdgcn_workitem_id_x())
#else
#define ID() ((uint)(get_group_id(0) * get_local_size(0) + get_local_id(0)))
#endif

kernel void half_ops(global const half* a, global const half* b, global half* o, global float* f,
                     uint n) {
    uint i = ID();
    if (i >= n) {
        return;
    }
    half x = a[i];
    half y = b[i];
    o[4 * i + 0] = x * y + (half)1.5f;
    o[4 * i + 1] = x - y;
    o[4 * i + 2] = x > y ? x : y * (half)0.5f;
    o[4 * i + 3] = (half)((float)x * 3.0f);
    f[i] = (float)(x + y);
}
