//! Finding the amdgpu render node: lists `renderD*` nodes under a `/dev/dri`-like folder (the
//! root is a parameter so tests can use a fake tree), learns each node's driver from sysfs or by
//! opening it, honours `SPARKLE_AMDGPU_NODE`, and turns "nothing usable" into one clear error: no
//! render nodes, only other drivers' nodes (listed with their drivers), or no permission (with
//! how to join the `render` group).

use std::path::{Path, PathBuf};

use super::error::{AmdgpuError, Result};
use super::kmd::DriverVersion;
use super::render_node;

/// Environment variable that forces one node.
pub const NODE_ENV: &str = "SPARKLE_AMDGPU_NODE";

/// Where the system keeps DRM nodes and their sysfs entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrmPaths {
    /// `/dev/dri`.
    pub dev_dri: PathBuf,
    /// `/sys/class/drm`.
    pub sys_class_drm: PathBuf,
}

impl Default for DrmPaths {
    fn default() -> Self {
        Self { dev_dri: PathBuf::from("/dev/dri"), sys_class_drm: PathBuf::from("/sys/class/drm") }
    }
}

impl DrmPaths {
    /// Both folders under `root` (`<root>/dev/dri`, `<root>/sys/class/drm`), for fake trees.
    #[cfg(test)]
    pub fn under(root: &Path) -> Self {
        Self { dev_dri: root.join("dev/dri"), sys_class_drm: root.join("sys/class/drm") }
    }
}

/// What probing one node found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// Opened; the driver is amdgpu.
    Amdgpu(DriverVersion),
    /// Another driver (name from the DRM version or sysfs).
    OtherDriver(String),
    /// The node could not be opened for lack of permission; the driver if sysfs said.
    PermissionDenied { driver: Option<String> },
    /// Anything else; the driver if sysfs said.
    Failed { driver: Option<String>, message: String },
}

/// One probed node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeProbe {
    pub path: PathBuf,
    pub outcome: ProbeOutcome,
}

/// How a node is probed (the real one opens it; tests substitute outcomes).
pub trait NodeProber {
    fn probe(&self, path: &Path) -> ProbeOutcome;
}

/// Probes by sysfs and by opening the node and asking the DRM driver its name.
#[derive(Debug, Clone, Default)]
pub struct SystemProber {
    pub paths: DrmPaths,
}

impl NodeProber for SystemProber {
    fn probe(&self, path: &Path) -> ProbeOutcome {
        let sysfs_driver = path
            .file_name()
            .and_then(|name| sysfs_driver_name(&self.paths.sys_class_drm, &name.to_string_lossy()));
        if let Some(driver) = &sysfs_driver {
            if driver != "amdgpu" {
                return ProbeOutcome::OtherDriver(driver.clone());
            }
        }
        let file = match render_node::open_node(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return ProbeOutcome::PermissionDenied { driver: sysfs_driver }
            }
            Err(e) => return ProbeOutcome::Failed { driver: sysfs_driver, message: e.to_string() },
        };
        match render_node::driver_version_of(&file) {
            Ok(version) if version.name == "amdgpu" => ProbeOutcome::Amdgpu(version),
            Ok(version) => ProbeOutcome::OtherDriver(version.name),
            Err(e) => {
                ProbeOutcome::Failed { driver: sysfs_driver, message: format!("not a DRM device ({e})") }
            }
        }
    }
}

/// The kernel driver bound to `node` according to sysfs (`<sys>/<node>/device/driver` links to
/// `…/drivers/<name>`).
pub fn sysfs_driver_name(sys_class_drm: &Path, node: &str) -> Option<String> {
    let link = std::fs::read_link(sys_class_drm.join(node).join("device/driver")).ok()?;
    link.file_name().map(|n| n.to_string_lossy().into_owned())
}

/// `renderD*` nodes in `dev_dri`, by number; empty when the folder does not exist.
pub fn render_nodes(dev_dri: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dev_dri) else {
        return Vec::new();
    };
    let mut nodes: Vec<(u32, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let number = name.strip_prefix("renderD")?.parse().ok()?;
            Some((number, e.path()))
        })
        .collect();
    nodes.sort();
    nodes.into_iter().map(|(_, path)| path).collect()
}

/// Probes every render node in `dev_dri`.
pub fn scan(dev_dri: &Path, prober: &dyn NodeProber) -> Vec<NodeProbe> {
    render_nodes(dev_dri).into_iter().map(|path| NodeProbe { outcome: prober.probe(&path), path }).collect()
}

const RENDER_GROUP_HINT: &str = "add your user to the `render` group (`sudo usermod -aG render $USER`, then log out and in again), or run with access to the node";

fn describe(probe: &NodeProbe) -> String {
    let path = probe.path.display();
    match &probe.outcome {
        ProbeOutcome::Amdgpu(version) => format!("{path} ({version})"),
        ProbeOutcome::OtherDriver(driver) => format!("{path} ({driver})"),
        ProbeOutcome::PermissionDenied { driver } => {
            format!("{path} ({}, permission denied)", driver.as_deref().unwrap_or("driver unknown"))
        }
        ProbeOutcome::Failed { driver, message } => {
            format!("{path} ({}: {message})", driver.as_deref().unwrap_or("driver unknown"))
        }
    }
}

/// Chooses the node to use from probes, or says precisely why there is none.
pub fn choose(dev_dri: &Path, probes: &[NodeProbe]) -> Result<PathBuf> {
    if let Some(found) = probes.iter().find(|p| matches!(p.outcome, ProbeOutcome::Amdgpu(_))) {
        return Ok(found.path.clone());
    }
    if probes.is_empty() {
        return Err(AmdgpuError::Unavailable(format!(
            "no DRM render nodes in {} (no GPU driver is loaded, or /dev/dri is not visible here, e.g. in a container without --device /dev/dri)",
            dev_dri.display()
        )));
    }
    let listed = probes.iter().map(describe).collect::<Vec<_>>().join(", ");
    let blocked = probes.iter().any(|p| match &p.outcome {
        ProbeOutcome::PermissionDenied { driver } => driver.as_deref().is_none_or(|d| d == "amdgpu"),
        _ => false,
    });
    if blocked {
        return Err(AmdgpuError::Unavailable(format!(
            "permission denied opening the render node: {listed}; {RENDER_GROUP_HINT}"
        )));
    }
    let any_amdgpu = probes.iter().any(|p| match &p.outcome {
        ProbeOutcome::Failed { driver, .. } => driver.as_deref() == Some("amdgpu"),
        _ => false,
    });
    if any_amdgpu {
        return Err(AmdgpuError::Unavailable(format!("the amdgpu render node could not be used: {listed}")));
    }
    Err(AmdgpuError::Unavailable(format!("no amdgpu render node, only other drivers' nodes: {listed}")))
}

/// Probes one forced node.
pub fn choose_forced(path: &Path, prober: &dyn NodeProber) -> Result<PathBuf> {
    let probe = NodeProbe { path: path.to_path_buf(), outcome: prober.probe(path) };
    match &probe.outcome {
        ProbeOutcome::Amdgpu(_) => Ok(probe.path),
        ProbeOutcome::PermissionDenied { .. } => Err(AmdgpuError::Unavailable(format!(
            "{NODE_ENV}={}: permission denied; {RENDER_GROUP_HINT}",
            path.display()
        ))),
        _ => Err(AmdgpuError::Unavailable(format!(
            "{NODE_ENV} names {}, which is not a usable amdgpu render node",
            describe(&probe)
        ))),
    }
}

/// The amdgpu render node to use: `SPARKLE_AMDGPU_NODE` if set, else the first amdgpu node in
/// `paths.dev_dri`.
pub fn find_node(paths: &DrmPaths, prober: &dyn NodeProber) -> Result<PathBuf> {
    if let Some(forced) = std::env::var_os(NODE_ENV).filter(|v| !v.is_empty()) {
        return choose_forced(Path::new(&forced), prober);
    }
    let probes = scan(&paths.dev_dri, prober);
    for probe in &probes {
        tracing::debug!(node = %probe.path.display(), outcome = ?probe.outcome, "probed render node");
    }
    choose(&paths.dev_dri, &probes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Fake(HashMap<PathBuf, ProbeOutcome>);

    impl NodeProber for Fake {
        fn probe(&self, path: &Path) -> ProbeOutcome {
            self.0
                .get(path)
                .cloned()
                .unwrap_or(ProbeOutcome::Failed { driver: None, message: "missing".into() })
        }
    }

    fn amdgpu() -> ProbeOutcome {
        ProbeOutcome::Amdgpu(DriverVersion { name: "amdgpu".into(), major: 3, minor: 57, patch: 0 })
    }

    fn tree(nodes: &[&str]) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("dev/dri")).unwrap();
        for node in nodes {
            std::fs::write(root.path().join("dev/dri").join(node), b"").unwrap();
        }
        root
    }

    #[test]
    fn lists_render_nodes_by_number_only() {
        let root = tree(&["renderD129", "card0", "renderD128", "renderD1000", "by-path"]);
        let nodes = render_nodes(&root.path().join("dev/dri"));
        let names: Vec<String> =
            nodes.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["renderD128", "renderD129", "renderD1000"]);
        assert!(render_nodes(&root.path().join("nope")).is_empty());
    }

    #[test]
    fn picks_the_first_amdgpu_node() {
        let root = tree(&["renderD128", "renderD129"]);
        let dri = root.path().join("dev/dri");
        let fake = Fake(HashMap::from([
            (dri.join("renderD128"), ProbeOutcome::OtherDriver("i915".into())),
            (dri.join("renderD129"), amdgpu()),
        ]));
        assert_eq!(choose(&dri, &scan(&dri, &fake)).unwrap(), dri.join("renderD129"));
    }

    #[test]
    fn no_nodes_says_so() {
        let root = tree(&[]);
        let dri = root.path().join("dev/dri");
        let err = choose(&dri, &scan(&dri, &Fake(HashMap::new()))).unwrap_err().to_string();
        assert!(err.contains("no DRM render nodes"), "{err}");
    }

    #[test]
    fn other_drivers_are_listed_with_their_names() {
        let root = tree(&["renderD128", "renderD129"]);
        let dri = root.path().join("dev/dri");
        let fake = Fake(HashMap::from([
            (dri.join("renderD128"), ProbeOutcome::OtherDriver("nvidia-drm".into())),
            (dri.join("renderD129"), ProbeOutcome::OtherDriver("i915".into())),
        ]));
        let err = choose(&dri, &scan(&dri, &fake)).unwrap_err();
        assert!(matches!(err, AmdgpuError::Unavailable(_)));
        let err = err.to_string();
        assert!(err.contains("only other drivers"), "{err}");
        assert!(err.contains("renderD128 (nvidia-drm)") && err.contains("renderD129 (i915)"), "{err}");
    }

    #[test]
    fn permission_denied_explains_the_render_group() {
        let root = tree(&["renderD128"]);
        let dri = root.path().join("dev/dri");
        let fake = Fake(HashMap::from([(
            dri.join("renderD128"),
            ProbeOutcome::PermissionDenied { driver: Some("amdgpu".into()) },
        )]));
        let err = choose(&dri, &scan(&dri, &fake)).unwrap_err().to_string();
        assert!(err.contains("permission denied") && err.contains("usermod -aG render"), "{err}");
        let err = choose_forced(&dri.join("renderD128"), &fake).unwrap_err().to_string();
        assert!(err.contains(NODE_ENV) && err.contains("render"), "{err}");
    }

    #[test]
    fn sysfs_names_the_driver_without_opening_the_node() {
        let root = tree(&["renderD128", "renderD129"]);
        let sys = root.path().join("sys/class/drm");
        for (node, driver) in [("renderD128", "amdgpu"), ("renderD129", "nouveau")] {
            std::fs::create_dir_all(sys.join(node).join("device")).unwrap();
            std::os::unix::fs::symlink(
                format!("../../../bus/pci/drivers/{driver}"),
                sys.join(node).join("device/driver"),
            )
            .unwrap();
        }
        assert_eq!(sysfs_driver_name(&sys, "renderD128").as_deref(), Some("amdgpu"));
        let prober = SystemProber { paths: DrmPaths::under(root.path()) };
        let probes = scan(&root.path().join("dev/dri"), &prober);
        assert_eq!(probes[1].outcome, ProbeOutcome::OtherDriver("nouveau".into()));
        // The fake node is a plain file: sysfs says amdgpu, but it is no DRM device.
        assert!(
            matches!(&probes[0].outcome, ProbeOutcome::Failed { driver: Some(d), .. } if d == "amdgpu"),
            "{:?}",
            probes[0]
        );
        let err = choose(&root.path().join("dev/dri"), &probes).unwrap_err().to_string();
        assert!(err.contains("could not be used") && err.contains("not a DRM device"), "{err}");
    }
}
