// y[i] = a * x[i] + y[i] for i < n. One work-item per element.
// Same math and argument order as saxpy.comp: x, y, a, n.
__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void saxpy(__global const float *restrict x, __global float *restrict y, float a, uint n) {
    size_t i = get_global_id(0);
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}
