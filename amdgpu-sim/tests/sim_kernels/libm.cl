// libclc math functions (range reduction tables in .rodata, polynomial evaluation) and 32-bit
// global atomics, which LLVM turns into one atomic per wave (mbcnt, readlane, ctz loops).
kernel void libm(global const float* a, global float* o, global int* cnt, uint n) {
    uint i = (uint)get_group_id(0) * get_local_size(0) + (uint)get_local_id(0);
    if (i >= n) {
        return;
    }
    float x = a[i];
    o[8*i+0] = exp(x);
    o[8*i+1] = log(fabs(x) + 1.0f);
    o[8*i+2] = sin(x);
    o[8*i+3] = cos(x);
    o[8*i+4] = pow(fabs(x), 1.7f);
    o[8*i+5] = tanh(x);
    o[8*i+6] = rsqrt(fabs(x) + 0.5f);
    o[8*i+7] = atan2(x, 2.0f);
    atomic_add(cnt, 1);
    atomic_max(cnt + 1, (int)i);
}
