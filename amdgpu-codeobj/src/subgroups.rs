//! Sub-group built-ins (cl_khr_subgroups and the shuffle, relative-shuffle and ballot
//! extensions) for OpenCL C on amdgpu: libclc-22 defines none of them, so kernels calling
//! `sub_group_reduce_add` failed to link. The compile driver puts [`DEVICE_LIBRARY`] before
//! sources that use sub-groups; a sub-group is a wave (32 or 64 lanes, whichever the kernel is
//! compiled for).
//!
//! Every cross-lane step is one `ds_bpermute` (a lane reads any lane of its wave). Lanes past
//! the sub-group's size (the last wave of a work-group that is not a multiple of the wave size)
//! are inactive and hold nothing meaningful: reductions and scans never read them.

/// The OpenCL C definitions (overloadable, so they take the names clang's built-in declarations
/// mangle to).
pub const DEVICE_LIBRARY: &str = r#"
#define __SG_OVL __attribute__((overloadable))
#define __SG_INL __attribute__((overloadable, always_inline))

static inline uint __sg_linear_id(void) {
    return (uint)(get_local_id(0) + get_local_size(0) * (get_local_id(1) + get_local_size(1) * get_local_id(2)));
}
static inline uint __sg_linear_size(void) {
    return (uint)(get_local_size(0) * get_local_size(1) * get_local_size(2));
}
static inline uint __sg_wave(void) { return (uint)__builtin_amdgcn_wavefrontsize(); }

uint __SG_OVL get_max_sub_group_size(void) { return __sg_wave(); }
uint __SG_OVL get_num_sub_groups(void) { return (__sg_linear_size() + __sg_wave() - 1) / __sg_wave(); }
uint __SG_OVL get_enqueued_num_sub_groups(void) { return get_num_sub_groups(); }
uint __SG_OVL get_sub_group_id(void) { return __sg_linear_id() / __sg_wave(); }
uint __SG_OVL get_sub_group_local_id(void) { return __sg_linear_id() % __sg_wave(); }
uint __SG_OVL get_sub_group_size(void) {
    uint rest = __sg_linear_size() - get_sub_group_id() * __sg_wave();
    return rest < __sg_wave() ? rest : __sg_wave();
}

/* libclc has no atomic_work_item_fence: a work-group-scope fence is at least as strong as any
   scope a sub-group barrier may name. */
void __SG_OVL sub_group_barrier(cl_mem_fence_flags flags) {
    __builtin_amdgcn_fence(__ATOMIC_ACQ_REL, "workgroup");
    __builtin_amdgcn_wave_barrier();
}
#if __OPENCL_C_VERSION__ >= 200
void __SG_OVL sub_group_barrier(cl_mem_fence_flags flags, memory_scope scope) {
    __builtin_amdgcn_fence(__ATOMIC_ACQ_REL, "workgroup");
    __builtin_amdgcn_wave_barrier();
}
#endif

/* Lane `lane`'s value of x (lanes wrap within the wave). */
static inline uint __SG_INL __sg_read(uint x, uint lane) {
    return (uint)__builtin_amdgcn_ds_bpermute((int)(lane << 2), (int)x);
}
static inline int __SG_INL __sg_read(int x, uint lane) { return as_int(__sg_read(as_uint(x), lane)); }
static inline float __SG_INL __sg_read(float x, uint lane) { return as_float(__sg_read(as_uint(x), lane)); }
static inline ulong __SG_INL __sg_read(ulong x, uint lane) {
    uint lo = __sg_read((uint)x, lane), hi = __sg_read((uint)(x >> 32), lane);
    return ((ulong)hi << 32) | lo;
}
static inline long __SG_INL __sg_read(long x, uint lane) { return as_long(__sg_read(as_ulong(x), lane)); }
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
static inline double __SG_INL __sg_read(double x, uint lane) { return as_double(__sg_read(as_ulong(x), lane)); }
#endif

#define __SG_ADD(a, b) ((a) + (b))
#define __SG_MIN(a, b) ((a) < (b) ? (a) : (b))
#define __SG_MAX(a, b) ((a) > (b) ? (a) : (b))

#define __SG_FUNCS(T, ADD_ID, MIN_ID, MAX_ID) \
T __SG_OVL sub_group_broadcast(T x, uint id) { return __sg_read(x, id); } \
T __SG_OVL sub_group_shuffle(T x, uint id) { return __sg_read(x, id); } \
T __SG_OVL sub_group_shuffle_xor(T x, uint mask) { return __sg_read(x, get_sub_group_local_id() ^ mask); } \
T __SG_OVL sub_group_shuffle_up(T x, uint delta) { return __sg_read(x, get_sub_group_local_id() - delta); } \
T __SG_OVL sub_group_shuffle_down(T x, uint delta) { return __sg_read(x, get_sub_group_local_id() + delta); } \
__SG_REDUCE(T, add, __SG_ADD, ADD_ID) \
__SG_REDUCE(T, min, __SG_MIN, MIN_ID) \
__SG_REDUCE(T, max, __SG_MAX, MAX_ID)

/* The inclusive scan doubles its reach each step and only ever reads lanes below its own, so
   lanes past a partial sub-group are never read; the reduction is the scan's last lane, the
   exclusive scan the inclusive one shifted up a lane. */
#define __SG_REDUCE(T, NAME, OP, ID) \
T __SG_OVL sub_group_scan_inclusive_##NAME(T x) { \
    uint lane = get_sub_group_local_id(); \
    for (uint d = 1; d < __sg_wave(); d <<= 1) { \
        T y = __sg_read(x, lane - d); \
        x = OP(x, (lane >= d ? y : (T)(ID))); \
    } \
    return x; \
} \
T __SG_OVL sub_group_scan_exclusive_##NAME(T x) { \
    uint lane = get_sub_group_local_id(); \
    T inclusive = sub_group_scan_inclusive_##NAME(x); \
    T before = __sg_read(inclusive, lane - 1u); \
    return lane == 0 ? (T)(ID) : before; \
} \
T __SG_OVL sub_group_reduce_##NAME(T x) { \
    return __sg_read(sub_group_scan_inclusive_##NAME(x), get_sub_group_size() - 1u); \
}

__SG_FUNCS(int, 0, INT_MAX, INT_MIN)
__SG_FUNCS(uint, 0u, UINT_MAX, 0u)
__SG_FUNCS(long, 0L, LONG_MAX, LONG_MIN)
__SG_FUNCS(ulong, 0UL, ULONG_MAX, 0UL)
__SG_FUNCS(float, 0.0f, INFINITY, -INFINITY)
#ifdef cl_khr_fp64
__SG_FUNCS(double, 0.0, (double)INFINITY, -(double)INFINITY)
#endif

int __SG_OVL sub_group_any(int predicate) { return sub_group_reduce_max(predicate != 0 ? 1 : 0); }
int __SG_OVL sub_group_all(int predicate) { return sub_group_reduce_min(predicate != 0 ? 1 : 0); }

/* Bit i of the result: lane i's predicate (lanes past the sub-group are 0). */
uint4 __SG_OVL sub_group_ballot(int predicate) {
    uint lane = get_sub_group_local_id();
    uint bit = predicate != 0 ? 1u << (lane & 31u) : 0u;
    uint words[2] = {0u, 0u};
    for (uint w = 0; w < __sg_wave() / 32u; w++) {
        words[w] = sub_group_reduce_add(lane / 32u == w ? bit : 0u);
    }
    return (uint4)(words[0], words[1], 0u, 0u);
}
"#;

/// Whether OpenCL C source may use sub-group built-ins (then [`DEVICE_LIBRARY`] goes with it).
pub fn uses_subgroups(source: &str) -> bool {
    source.contains("sub_group")
}
