//! Work-group collective functions of OpenCL C 2.0 (`work_group_all`, `work_group_any`,
//! `work_group_broadcast`, `work_group_reduce_*`, `work_group_scan_inclusive_*` and
//! `work_group_scan_exclusive_*` for add, min and max over int, uint, long, ulong, float and
//! double): libclc-22 defines none of them, so kernels calling them failed to link. The compile
//! driver puts [`DEVICE_LIBRARY`] (after the sub-group library it builds on) before sources that
//! use them.
//!
//! Each collective combines its wave's sub-group result with the other waves' through a few
//! bytes of LDS just past the kernel's own (`__builtin_amdgcn_groupstaticsize()`, rounded up to
//! 16): OpenCL C cannot declare `__local` storage outside a kernel, so the backend gives such
//! kernels [`SCRATCH_BYTES`] more LDS at dispatch. A barrier before and after each exchange keeps
//! consecutive collectives from overwriting what another wave has not read yet; like every
//! work-group function, they must be reached by all work-items of the group.

/// LDS bytes past the kernel's own that the collectives use: one 8-byte slot per wave (at most
/// 32 waves in a 1024-item work-group) and the broadcast slot, rounded up.
pub const SCRATCH_BYTES: u32 = 512;

/// The OpenCL C definitions (overloadable, so they take the names clang's built-in
/// declarations mangle to). Needs the sub-group library before it.
pub const DEVICE_LIBRARY: &str = r#"
#define __WG_OVL __attribute__((overloadable))

static inline __local uchar *__wg_scratch(void) {
    uint base = ((uint)__builtin_amdgcn_groupstaticsize() + 15u) & ~15u;
    return (__local uchar *)base;
}

#define __WG_FUNCS(T, ADD_ID, MIN_ID, MAX_ID) \
T __WG_OVL work_group_broadcast(T a, size_t local_id) { \
    __local T *slot = (__local T *)__wg_scratch(); \
    barrier(CLK_LOCAL_MEM_FENCE); \
    if ((size_t)__sg_linear_id() == local_id) *slot = a; \
    barrier(CLK_LOCAL_MEM_FENCE); \
    return *slot; \
} \
T __WG_OVL work_group_broadcast(T a, size_t x, size_t y) { \
    return work_group_broadcast(a, x + y * get_local_size(0)); \
} \
T __WG_OVL work_group_broadcast(T a, size_t x, size_t y, size_t z) { \
    return work_group_broadcast(a, x + get_local_size(0) * (y + z * get_local_size(1))); \
} \
__WG_COLLECTIVE(T, add, __SG_ADD, ADD_ID) \
__WG_COLLECTIVE(T, min, __SG_MIN, MIN_ID) \
__WG_COLLECTIVE(T, max, __SG_MAX, MAX_ID)

/* The waves' sub-group totals, in wave order, then combined by each work-item: the waves
   before its own for a scan, all of them for a reduction. */
#define __WG_COLLECTIVE(T, NAME, OP, ID) \
static inline T __WG_OVL __wg_before_##NAME(T partial, uint waves) { \
    __local T *slots = (__local T *)__wg_scratch(); \
    barrier(CLK_LOCAL_MEM_FENCE); \
    if (get_sub_group_local_id() == 0) slots[get_sub_group_id()] = partial; \
    barrier(CLK_LOCAL_MEM_FENCE); \
    T total = (T)(ID); \
    for (uint i = 0; i < waves; i++) total = OP(total, slots[i]); \
    return total; \
} \
T __WG_OVL work_group_reduce_##NAME(T x) { \
    return __wg_before_##NAME(sub_group_reduce_##NAME(x), get_num_sub_groups()); \
} \
T __WG_OVL work_group_scan_inclusive_##NAME(T x) { \
    T own = sub_group_scan_inclusive_##NAME(x); \
    T before = __wg_before_##NAME(sub_group_reduce_##NAME(x), get_sub_group_id()); \
    return OP(before, own); \
} \
T __WG_OVL work_group_scan_exclusive_##NAME(T x) { \
    T own = sub_group_scan_exclusive_##NAME(x); \
    T before = __wg_before_##NAME(sub_group_reduce_##NAME(x), get_sub_group_id()); \
    return OP(before, own); \
}

__WG_FUNCS(int, 0, INT_MAX, INT_MIN)
__WG_FUNCS(uint, 0u, UINT_MAX, 0u)
__WG_FUNCS(long, 0L, LONG_MAX, LONG_MIN)
__WG_FUNCS(ulong, 0UL, ULONG_MAX, 0UL)
__WG_FUNCS(float, 0.0f, INFINITY, -INFINITY)
#ifdef cl_khr_fp64
__WG_FUNCS(double, 0.0, (double)INFINITY, -(double)INFINITY)
#endif

int __WG_OVL work_group_all(int predicate) { return work_group_reduce_min(predicate != 0 ? 1 : 0); }
int __WG_OVL work_group_any(int predicate) { return work_group_reduce_max(predicate != 0 ? 1 : 0); }
"#;

/// Whether OpenCL C source may use work-group collectives (then [`DEVICE_LIBRARY`] goes with
/// it, and the kernel gets [`SCRATCH_BYTES`] more LDS).
pub fn uses_collectives(source: &str) -> bool {
    ["work_group_all", "work_group_any", "work_group_broadcast", "work_group_reduce", "work_group_scan"]
        .iter()
        .any(|name| source.contains(name))
}
