// y[i] = a * x[i] + y[i] for i < n.
// Defines: VEC (1 or 4: elements per load; 4 needs n to be a multiple of 4, so that the
// buffers hold whole vec4s) and PER_THREAD (loads per invocation). A workgroup covers
// PER_THREAD consecutive runs of gl_WorkGroupSize.x loads, so each run is contiguous across the
// invocations; all loads are issued before any store.
#if VEC == 4
#define ELEM vec4
#else
#define ELEM float
#endif
layout(std430, binding = 0) readonly buffer X { ELEM x[]; };
layout(std430, binding = 1) buffer Y { ELEM y[]; };
uniform float a;
uniform uint n;

void main() {
    uint count = n / uint(VEC);
    uint base = gl_WorkGroupID.x * gl_WorkGroupSize.x * uint(PER_THREAD) + gl_LocalInvocationID.x;
    ELEM xs[PER_THREAD];
    ELEM ys[PER_THREAD];
    for (int j = 0; j < PER_THREAD; ++j) {
        uint i = base + uint(j) * gl_WorkGroupSize.x;
        if (i < count) {
            xs[j] = x[i];
            ys[j] = y[i];
        }
    }
    for (int j = 0; j < PER_THREAD; ++j) {
        uint i = base + uint(j) * gl_WorkGroupSize.x;
        if (i < count) {
            y[i] = a * xs[j] + ys[j];
        }
    }
}
