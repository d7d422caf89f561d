// y[i] = a * x[i] + y[i] for i < n. One invocation per element.
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };
uniform float a;
uniform uint n;

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}
