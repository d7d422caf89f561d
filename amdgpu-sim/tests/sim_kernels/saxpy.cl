// y[i] = a * x[i] + y[i] for i < n; one work-item per element. Built with or without libclc:
// without it (SIM_BUILTINS) the global id comes from clang builtins and a fixed group size.
// With libclc the id is group id * local size + local id: libclc-22's get_global_id adds
// get_global_offset, which it reads from implicit-argument dwords 1..3, and under code object
// v5/v6 those hold hidden_block_count_y/z and the group sizes, not a global offset.
#ifdef SIM_BUILTINS
#define GLOBAL_ID_X() (__builtin_amdgcn_workgroup_id_x() * 64u + __builtin_amdgcn_workitem_id_x())
#else
#define GLOBAL_ID_X() ((uint)(get_group_id(0) * get_local_size(0) + get_local_id(0)))
#endif

kernel void saxpy(global const float* x, global float* y, float a, uint n) {
    uint i = GLOBAL_ID_X();
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}
