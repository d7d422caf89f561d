//! Checks every size, member offset, ioctl number and constant of `sparkle_amdgpu_kmd::uapi` against
//! the C compiler's view of the system's `<libdrm/amdgpu_drm.h>` (Debian: `libdrm-dev`, installed by
//! `scripts/setup.sh`), and what is newer than that header against the current kernel header.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use sparkle_amdgpu_kmd::uapi;

const HEADER: &str = "/usr/include/libdrm/amdgpu_drm.h";

/// Members libdrm 2.4.114's header does not have. Values are from the Linux kernel's
/// `include/uapi/drm/amdgpu_drm.h` (mainline, 2025: `drm_amdgpu_gem_va` grew the VM timeline
/// members in 6.x; `drm_amdgpu_info_hw_ip` gained `ip_discovery_version` in 6.2 and
/// `userq_num_slots` later; `drm_amdgpu_info_device` grew the min clocks, the gfx11 cache sizes,
/// the shadow/CSA sizes and `userq_ip_mask`). Offsets follow from the C declarations there.
const KERNEL_ONLY_MEMBERS: &[(&str, &str, usize, usize)] = &[
    ("struct drm_amdgpu_gem_va", "vm_timeline_point", 40, 8),
    ("struct drm_amdgpu_gem_va", "vm_timeline_syncobj_out", 48, 4),
    ("struct drm_amdgpu_gem_va", "num_syncobj_handles", 52, 4),
    ("struct drm_amdgpu_gem_va", "input_fence_syncobj_handles", 56, 8),
    ("struct drm_amdgpu_info_hw_ip", "ip_discovery_version", 28, 4),
    ("struct drm_amdgpu_info_hw_ip", "userq_num_slots", 32, 4),
    ("struct drm_amdgpu_info_device", "pcie_gen", 132, 4),
    ("struct drm_amdgpu_info_device", "pcie_num_lanes", 268, 4),
    ("struct drm_amdgpu_info_device", "min_engine_clock", 368, 8),
    ("struct drm_amdgpu_info_device", "min_memory_clock", 376, 8),
    ("struct drm_amdgpu_info_device", "tcp_cache_size", 384, 4),
    ("struct drm_amdgpu_info_device", "num_sqc_per_wgp", 388, 4),
    ("struct drm_amdgpu_info_device", "sqc_data_cache_size", 392, 4),
    ("struct drm_amdgpu_info_device", "sqc_inst_cache_size", 396, 4),
    ("struct drm_amdgpu_info_device", "gl1c_cache_size", 400, 4),
    ("struct drm_amdgpu_info_device", "gl2c_cache_size", 404, 4),
    ("struct drm_amdgpu_info_device", "mall_size", 408, 8),
    ("struct drm_amdgpu_info_device", "enabled_rb_pipes_mask_hi", 416, 4),
    ("struct drm_amdgpu_info_device", "shadow_size", 420, 4),
    ("struct drm_amdgpu_info_device", "shadow_alignment", 424, 4),
    ("struct drm_amdgpu_info_device", "csa_size", 428, 4),
    ("struct drm_amdgpu_info_device", "csa_alignment", 432, 4),
    ("struct drm_amdgpu_info_device", "userq_ip_mask", 436, 4),
    ("struct drm_amdgpu_info_device", "pad", 440, 4),
];

/// Members the kernel renamed: (type, current name, name in libdrm 2.4.114). Checked against the
/// old name in the system header as well.
const RENAMED: &[(&str, &str, &str)] = &[
    ("struct drm_amdgpu_info_hw_ip", "ip_discovery_version", "_pad"),
    ("struct drm_amdgpu_info_device", "pcie_gen", "_pad"),
    ("struct drm_amdgpu_info_device", "pcie_num_lanes", "_pad1"),
];

/// Types that grew at their end: (type, size in the current kernel header).
const GROWN: &[(&str, usize)] = &[
    ("struct drm_amdgpu_gem_va", 64),
    ("struct drm_amdgpu_info_hw_ip", 40),
    ("struct drm_amdgpu_info_device", 448),
];

/// Ioctl numbers that differ from the system header because their struct grew (kernel header
/// value: `DRM_IOW(DRM_COMMAND_BASE + 0x08, struct drm_amdgpu_gem_va)` with the 64-byte struct).
const KERNEL_ONLY_IOCTLS: &[(&str, u64)] = &[("DRM_IOCTL_AMDGPU_GEM_VA", 0x4040_6448)];

/// Constants newer than the system header, with their kernel header values.
const KERNEL_ONLY_CONSTANTS: &[(&str, u64)] = &[
    ("AMDGPU_FAMILY_GC_11_0_0", 145),
    ("AMDGPU_FAMILY_GC_11_0_1", 148),
    ("AMDGPU_FAMILY_GC_10_3_6", 149),
    ("AMDGPU_FAMILY_GC_11_5_0", 150),
    ("AMDGPU_FAMILY_GC_10_3_7", 151),
    ("AMDGPU_FAMILY_GC_12_0_0", 152),
    ("AMDGPU_CTX_QUERY2_FLAGS_RESET_IN_PROGRESS", 1 << 5),
];

fn is_kernel_only(c_type: &str, field: &str) -> bool {
    KERNEL_ONLY_MEMBERS.iter().any(|(t, f, _, _)| *t == c_type && *f == field)
}

/// Builds and runs a C program that prints what the system header says, as `key=value` lines.
fn c_view() -> BTreeMap<String, u64> {
    assert!(
        Path::new(HEADER).exists(),
        "{HEADER} is missing: install Debian's libdrm-dev (scripts/setup.sh does)"
    );
    let mut program = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <libdrm/amdgpu_drm.h>\n\
         #define SZ(T, m) sizeof(((T *)0)->m)\nint main(void) {\n",
    );
    let mut renamed_types: BTreeSet<&str> = BTreeSet::new();
    for (t, _, _) in RENAMED {
        renamed_types.insert(t);
    }
    for entry in uapi::layout_table() {
        match entry.field {
            None => {
                program.push_str(&format!("printf(\"size {t}=%zu\\n\", sizeof({t}));\n", t = entry.c_type))
            }
            Some(field) => {
                let c_field = RENAMED
                    .iter()
                    .find(|(t, now, _)| *t == entry.c_type && *now == field)
                    .map(|(_, _, old)| *old)
                    .unwrap_or(field);
                if is_kernel_only(entry.c_type, field) && c_field == field {
                    continue;
                }
                program.push_str(&format!(
                    "printf(\"offset {t}.{f}=%zu\\nsize {t}.{f}=%zu\\n\", offsetof({t}, {c}), SZ({t}, {c}));\n",
                    t = entry.c_type,
                    f = field,
                    c = c_field
                ));
            }
        }
    }
    for ioctl in uapi::ioctl_table() {
        program.push_str(&format!(
            "printf(\"ioctl {n}=%llu\\n\", (unsigned long long)({n}));\n",
            n = ioctl.c_name
        ));
    }
    for (name, _) in uapi::constant_table() {
        if KERNEL_ONLY_CONSTANTS.iter().any(|(n, _)| *n == name) {
            continue;
        }
        program.push_str(&format!("printf(\"const {name}=%llu\\n\", (unsigned long long)({name}));\n"));
    }
    program.push_str("return 0;\n}\n");

    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("layout.c");
    let exe = dir.path().join("layout");
    std::fs::write(&source, &program).unwrap();
    let compiled = Command::new("cc")
        .arg("-std=c11")
        .arg("-Wall")
        .arg(&source)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run the C compiler `cc` ({e}): install gcc (scripts/setup.sh does)")
        });
    assert!(
        compiled.status.success(),
        "the layout probe did not compile against {HEADER}:\n{}\n--- program ---\n{program}",
        String::from_utf8_lossy(&compiled.stderr)
    );
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success());
    String::from_utf8(run.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let (key, value) = line.split_once('=').unwrap();
            (key.to_string(), value.parse().unwrap())
        })
        .collect()
}

#[test]
fn uapi_matches_the_system_header_and_the_kernel_header() {
    let c = c_view();
    let mut mismatches = Vec::new();
    let mut checked = 0;
    let mut check = |what: String, ours: u64, theirs: u64| {
        checked += 1;
        if ours != theirs {
            mismatches.push(format!("{what}: Rust {ours}, header {theirs}"));
        }
    };

    for entry in uapi::layout_table() {
        match entry.field {
            None => {
                let key = format!("size {}", entry.c_type);
                let theirs = c[&key];
                match GROWN.iter().find(|(t, _)| *t == entry.c_type) {
                    Some((_, kernel_size)) => {
                        check(format!("{key} (kernel header)"), entry.size as u64, *kernel_size as u64);
                        // The system header's struct is a prefix of ours: its size is where our
                        // first newer member starts (or, for hw_ip, where the renamed `_pad` ends).
                        let prefix_end = uapi::layout_table()
                            .iter()
                            .filter(|e| e.c_type == entry.c_type)
                            .filter_map(|e| e.field.map(|f| (f, e.offset)))
                            .filter(|(f, _)| is_kernel_only(entry.c_type, f))
                            .filter(|(f, _)| {
                                !RENAMED.iter().any(|(t, now, _)| *t == entry.c_type && now == f)
                            })
                            .map(|(_, offset)| offset)
                            .min()
                            .unwrap();
                        let aligned = prefix_end.div_ceil(8) * 8;
                        check(format!("{key} (libdrm prefix)"), aligned as u64, theirs);
                    }
                    None => check(key, entry.size as u64, theirs),
                }
            }
            Some(field) => {
                let path = format!("{}.{field}", entry.c_type);
                if let Some((_, _, offset, size)) =
                    KERNEL_ONLY_MEMBERS.iter().find(|(t, f, _, _)| *t == entry.c_type && *f == field)
                {
                    check(format!("offset {path} (kernel header)"), entry.offset as u64, *offset as u64);
                    check(format!("size {path} (kernel header)"), entry.size as u64, *size as u64);
                }
                if let Some(theirs) = c.get(&format!("offset {path}")) {
                    check(format!("offset {path}"), entry.offset as u64, *theirs);
                    check(format!("size {path}"), entry.size as u64, c[&format!("size {path}")]);
                }
            }
        }
    }
    for ioctl in uapi::ioctl_table() {
        match KERNEL_ONLY_IOCTLS.iter().find(|(n, _)| *n == ioctl.c_name) {
            Some((_, kernel)) => check(format!("{} (kernel header)", ioctl.c_name), ioctl.value, *kernel),
            None => check(ioctl.c_name.to_string(), ioctl.value, c[&format!("ioctl {}", ioctl.c_name)]),
        }
    }
    for (name, value) in uapi::constant_table() {
        match KERNEL_ONLY_CONSTANTS.iter().find(|(n, _)| *n == name) {
            Some((_, kernel)) => check(format!("{name} (kernel header)"), value, *kernel),
            None => check(name.to_string(), value, c[&format!("const {name}")]),
        }
    }
    assert!(mismatches.is_empty(), "uapi layout mismatches:\n{}", mismatches.join("\n"));
    assert!(checked > 250, "only {checked} values checked");
}

/// The old GEM_VA number (40-byte struct) is what the system header gives; the kernel accepts both
/// because drm_ioctl copies min(user size, kernel size) and zero-fills. Pin the relation.
#[test]
fn gem_va_request_numbers_differ_only_in_size() {
    let c = c_view();
    let old = c["ioctl DRM_IOCTL_AMDGPU_GEM_VA"];
    assert_eq!(old, 0x4028_6448);
    assert_eq!(uapi::DRM_IOCTL_AMDGPU_GEM_VA & !(0x3fff << 16), old & !(0x3fff << 16));
    assert_eq!((uapi::DRM_IOCTL_AMDGPU_GEM_VA >> 16) & 0x3fff, 64);
}
