// FMA ceiling: ACC independent vec4 accumulators per invocation, ITER steps (ITER is read as
// a run-time bound so that the loop stays a loop).
layout(std430, binding = 0) restrict buffer Out { float outp[]; };
void main() {
    float seed = float(gl_GlobalInvocationID.x) * 1e-7;
    vec4 acc[ACC];
    for (int i = 0; i < ACC; ++i) acc[i] = vec4(seed + float(i));
    vec4 m = vec4(0.9999, 0.9998, 0.9997, 0.9996) + seed;
    vec4 a = vec4(1e-4);
    uint iters = uint(ITER) + (gl_NumWorkGroups.y - 1u);
    for (uint it = 0u; it < iters; ++it) {
        for (int i = 0; i < ACC; ++i) acc[i] = fma(acc[i], m, a);
    }
    vec4 s = vec4(0.0);
    for (int i = 0; i < ACC; ++i) s += acc[i];
    outp[gl_GlobalInvocationID.x] = s.x + s.y + s.z + s.w;
}
