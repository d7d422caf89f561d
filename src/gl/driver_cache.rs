//! The GL driver's own shader cache, kept inside Sparkle's cache folder. On NVIDIA a program
//! binary is not finished machine code: loading one still makes the driver finish it, which its
//! own shader cache (`__GL_SHADER_DISK_CACHE_PATH`) remembers; Mesa keeps one too
//! (`MESA_SHADER_CACHE_DIR`). Pointing both into Sparkle's cache folder makes that folder the
//! whole of a warm start: copied to another machine it starts warm there, and pruning and
//! clearing it cover the driver's files too.
//!
//! Where: one folder, `<cache dir>/drivers/gl/` (see `cache::prepare_driver_cache`), for every
//! GPU and both drivers, not a GPU's own folder. Drivers read these variables when the EGL
//! display is initialized, before any context exists to tell which GPU and driver build it is
//! (Sparkle's `GpuId` needs a live context), and they key their entries by GPU and driver build
//! themselves: NVIDIA writes `GLCache/` there, Mesa `mesa_shader_cache/`, side by side.
//!
//! When: once per process, at the first GL device opened, before its display exists; drivers
//! read the variables once, so a later runtime with another cache folder cannot move the
//! driver's cache — its device reports where the cache stayed and why.
//!
//! What the user set always wins: a variable set (non-empty) is left as it is, and a driver
//! whose cache the user switched off (`__GL_SHADER_DISK_CACHE=0`, `MESA_SHADER_CACHE_DISABLE`)
//! is left off. With the location Sparkle also sets `__GL_SHADER_DISK_CACHE=1` where it is
//! unset: NVIDIA documents its cache as off by default for root, and a private folder owned by
//! the same user gives no reason for that. With Sparkle's cache off (or read-only: the driver would write there) nothing
//! is touched. A variable Sparkle set is recorded in [`SET_BY_SPARKLE_ENV`], so that a process
//! started from a Sparkle process, which inherits them, does not take them for the user's (if
//! that process cannot place the cache itself, the driver reads the inherited value, and the
//! device says so).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::cache;

/// NVIDIA: where its shader cache lives (it writes `GLCache/` inside).
pub const NVIDIA_PATH_ENV: &str = "__GL_SHADER_DISK_CACHE_PATH";
/// NVIDIA: `0` switches its shader cache off.
pub const NVIDIA_SWITCH_ENV: &str = "__GL_SHADER_DISK_CACHE";
/// Mesa: where its shader cache lives (it writes `mesa_shader_cache/` inside).
pub const MESA_DIR_ENV: &str = "MESA_SHADER_CACHE_DIR";
/// Mesa: a true value switches its shader cache off.
pub const MESA_DISABLE_ENV: &str = "MESA_SHADER_CACHE_DISABLE";
/// Older Mesa names of the same two settings, which Mesa still honours.
const MESA_OLD_DIR_ENV: &str = "MESA_GLSL_CACHE_DIR";
const MESA_OLD_DISABLE_ENV: &str = "MESA_GLSL_CACHE_DISABLE";

/// Holds the folder Sparkle pointed the driver variables at, in the process that did and in the
/// processes it starts. A driver variable with exactly this value was inherited from a Sparkle
/// process, not chosen by the user.
pub const SET_BY_SPARKLE_ENV: &str = "SPARKLE_DRIVER_CACHE_SET";

/// The GL backend's folder among the cache folder's driver folders.
const FOLDER_NAME: &str = "gl";

/// A GL driver family with a shader cache of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    Nvidia,
    Mesa,
}

impl Driver {
    /// The driver a context's strings say it is, if it is one of ours.
    pub fn of(vendor: &str, version: &str) -> Option<Driver> {
        if vendor.contains("NVIDIA") || version.contains("NVIDIA") {
            Some(Driver::Nvidia)
        } else if version.contains("Mesa") || vendor.contains("Mesa") {
            Some(Driver::Mesa)
        } else {
            None
        }
    }

    fn name(self) -> &'static str {
        match self {
            Driver::Nvidia => "NVIDIA",
            Driver::Mesa => "Mesa",
        }
    }

    /// The variable that places the cache, then older names that do the same.
    fn path_vars(self) -> &'static [&'static str] {
        match self {
            Driver::Nvidia => &[NVIDIA_PATH_ENV],
            Driver::Mesa => &[MESA_DIR_ENV, MESA_OLD_DIR_ENV],
        }
    }

    /// The switch Sparkle sets to `1` with the location when the user left it unset: NVIDIA's
    /// driver leaves its cache off for root by default, which a private folder of the cache,
    /// owned by the same user, gives no reason to.
    fn switch_on(self) -> Option<&'static str> {
        match self {
            Driver::Nvidia => Some(NVIDIA_SWITCH_ENV),
            Driver::Mesa => None,
        }
    }

    /// The variable (and its value) that switches this driver's cache off, if one does.
    fn switched_off(self, var: &dyn Fn(&str) -> Option<String>) -> Option<(&'static str, String)> {
        match self {
            Driver::Nvidia => var(NVIDIA_SWITCH_ENV)
                .filter(|value| value.trim() == "0")
                .map(|value| (NVIDIA_SWITCH_ENV, value)),
            // Mesa parses these as booleans: 1, true, y, yes (any case) switch it off.
            Driver::Mesa => [MESA_DISABLE_ENV, MESA_OLD_DISABLE_ENV].into_iter().find_map(|name| {
                var(name)
                    .filter(|value| {
                        matches!(value.trim().to_ascii_lowercase().as_str(), "1" | "true" | "y" | "yes")
                    })
                    .map(|value| (name, value))
            }),
        }
    }
}

/// Where one driver's shader cache is, and who chose it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Sparkle set `var` to this folder inside its cache folder, and `switched_on` to `1`.
    Sparkle { var: &'static str, path: PathBuf, switched_on: Option<&'static str> },
    /// The user set `var`; left as it is.
    User { var: &'static str, value: String },
    /// The user switched the driver's cache off with `var`.
    Off { var: &'static str, value: String },
    /// Left as the Sparkle process that started this one set `var` (this process could not
    /// place it: its cache is off or unusable).
    Inherited { var: &'static str, value: String },
    /// Left wherever the driver puts it by default, and why.
    Default { why: String },
}

impl Placement {
    fn describe(&self) -> String {
        match self {
            Placement::Sparkle { var, path, switched_on } => {
                let switch = switched_on.map(|name| format!(" and {name}=1")).unwrap_or_default();
                format!(
                    "{} (inside the Sparkle cache dir; chosen by Sparkle through {var}{switch})",
                    path.display()
                )
            }
            Placement::User { var, value } => format!("{value} (chosen by the user: {var})"),
            Placement::Off { var, value } => format!("off (the user set {var}={value})"),
            Placement::Inherited { var, value } => {
                format!("{value} (inherited from the Sparkle process that started this one: {var})")
            }
            Placement::Default { why } => format!("the driver's default location ({why})"),
        }
    }
}

/// What this process decided for the driver caches, once, at its first GL device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The Sparkle cache folder of that first device (`None`: its cache was off or read-only).
    pub cache_dir: Option<PathBuf>,
    pub nvidia: Placement,
    pub mesa: Placement,
}

impl Decision {
    pub fn placement(&self, driver: Driver) -> &Placement {
        match driver {
            Driver::Nvidia => &self.nvidia,
            Driver::Mesa => &self.mesa,
        }
    }

    /// The `driver shader cache` line of a device's details: the placement of `driver` (both
    /// when the driver is not known), and whether `cache_dir`, the folder of the runtime asking,
    /// differs from the one the decision was made for.
    pub fn describe(&self, driver: Option<Driver>, cache_dir: Option<&Path>) -> String {
        let mut text = match driver {
            Some(driver) => self.placement(driver).describe(),
            None => [Driver::Nvidia, Driver::Mesa]
                .iter()
                .map(|&d| format!("{}: {}", d.name(), self.placement(d).describe()))
                .collect::<Vec<_>>()
                .join("; "),
        };
        if !same_dir(self.cache_dir.as_deref(), cache_dir) {
            let first = self.cache_dir.as_ref().map_or_else(
                || "with the Sparkle cache off or read-only".to_owned(),
                |dir| format!("with the cache dir {}", dir.display()),
            );
            text.push_str(&format!(
                "; this process's first GL device was opened {first}, and drivers read the location once per \
                 process, so this runtime's cache dir does not hold the driver's cache"
            ));
        }
        text
    }
}

/// Whether two cache folders are the same folder (spelled alike, or resolving alike).
fn same_dir(a: Option<&Path>, b: Option<&Path>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            a == b || matches!((std::fs::canonicalize(a), std::fs::canonicalize(b)), (Ok(a), Ok(b)) if a == b)
        }
        _ => false,
    }
}

/// What to do for each driver, from the environment as `var` reads it (empty counts as unset)
/// and the Sparkle cache folder; `prepare` makes the driver folder and is called at most once,
/// only if some variable is to be set.
fn decide(
    var: &dyn Fn(&str) -> Option<String>,
    cache_dir: Option<&Path>,
    prepare: impl FnOnce(&Path) -> Result<PathBuf, String>,
) -> Decision {
    let var = |name: &str| var(name).filter(|value| !value.trim().is_empty());
    let inherited = var(SET_BY_SPARKLE_ENV);
    let mut prepare = Some(prepare);
    let mut folder: Option<Result<PathBuf, String>> = None;
    let mut place = |driver: Driver| {
        if let Some((var, value)) = driver.switched_off(&var) {
            return Placement::Off { var, value };
        }
        let set = driver.path_vars().iter().find_map(|&name| var(name).map(|value| (name, value)));
        let from_parent = set.clone().filter(|(_, value)| Some(value) == inherited.as_ref());
        if let Some((var, value)) = set.filter(|_| from_parent.is_none()) {
            return Placement::User { var, value };
        }
        // The driver still reads an inherited value if this process cannot replace it.
        let unplaced = |why: String| match &from_parent {
            Some((var, value)) => Placement::Inherited { var, value: value.clone() },
            None => Placement::Default { why },
        };
        let Some(dir) = cache_dir else {
            return unplaced("the Sparkle cache is off or read-only".into());
        };
        let folder = folder.get_or_insert_with(|| match prepare.take() {
            Some(prepare) => prepare(dir),
            None => Err("the folder was not prepared".into()),
        });
        match folder {
            Ok(path) => Placement::Sparkle {
                var: driver.path_vars()[0],
                path: path.clone(),
                switched_on: driver.switch_on().filter(|&name| var(name).is_none()),
            },
            Err(why) => unplaced(format!("no usable folder in the Sparkle cache dir: {why}")),
        }
    };
    let nvidia = place(Driver::Nvidia);
    let mesa = place(Driver::Mesa);
    Decision { cache_dir: cache_dir.map(Path::to_path_buf), nvidia, mesa }
}

/// Makes the decision of this process and sets the variables, at the first call; every call
/// returns it. Must run before the process's first EGL display is initialized: `GlDevice::open`
/// calls it before it starts (or finds) the GL thread.
pub(crate) fn configure(cache_dir: Option<&Path>) -> &'static Decision {
    static DECISION: OnceLock<Decision> = OnceLock::new();
    let decision = DECISION.get_or_init(|| {
        let lookup = |name: &str| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned());
        let decision = decide(&lookup, cache_dir, |dir| {
            cache::prepare_driver_cache(dir, FOLDER_NAME).map_err(|err| err.to_string())
        });
        apply(&decision);
        decision
    });
    if !same_dir(decision.cache_dir.as_deref(), cache_dir) {
        tracing::info!(
            first = ?decision.cache_dir, this = ?cache_dir,
            "the GL driver's shader cache stays where this process's first GL device put it: drivers read its \
             location once per process"
        );
    }
    decision
}

/// Sets the variables the decision gives to Sparkle, and the record of them.
fn apply(decision: &Decision) {
    let mut set = None;
    for placement in [&decision.nvidia, &decision.mesa] {
        match placement {
            Placement::Sparkle { var, path, switched_on } => {
                // Why this is sound: `set_var` races only with code reading the environment on
                // another thread without std's lock (C's getenv). This runs once, inside the
                // OnceLock above that every GL device open passes first, so before this
                // process's first EGL display exists: no driver thread has started yet, and no
                // other Sparkle thread reads these variables. An application whose own threads
                // call getenv concurrently should open its first runtime before starting them,
                // or set the variables itself (then they are left alone).
                std::env::set_var(var, path);
                if let Some(switch) = switched_on {
                    // Same guard.
                    std::env::set_var(switch, "1");
                }
                set = Some(path);
                tracing::debug!(var, path = %path.display(), "pointed the GL driver's shader cache into the Sparkle cache dir");
            }
            Placement::User { var, value } => {
                tracing::debug!(var, value = %value, "the GL driver's shader cache stays where the user put it")
            }
            Placement::Off { var, value } => {
                tracing::debug!(var, value = %value, "the GL driver's shader cache is off, as the user asked")
            }
            Placement::Inherited { var, value } => tracing::debug!(
                var, value = %value,
                "the GL driver's shader cache stays where the Sparkle process that started this one put it"
            ),
            Placement::Default { why } => {
                tracing::debug!(why = %why, "the GL driver's shader cache stays in its default location")
            }
        }
    }
    if let Some(path) = set {
        // Same guard as above.
        std::env::set_var(SET_BY_SPARKLE_ENV, path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
    }

    fn prepared(dir: &Path) -> Result<PathBuf, String> {
        Ok(dir.join("drivers/gl"))
    }

    const DIR: &str = "/c";

    #[test]
    fn unset_variables_point_into_the_cache_dir() {
        let d = decide(&env(&[]), Some(Path::new(DIR)), prepared);
        let nvidia_on = Some(NVIDIA_SWITCH_ENV);
        let path = PathBuf::from("/c/drivers/gl");
        assert_eq!(
            d.nvidia,
            Placement::Sparkle { var: NVIDIA_PATH_ENV, path: path.clone(), switched_on: nvidia_on }
        );
        assert_eq!(d.mesa, Placement::Sparkle { var: MESA_DIR_ENV, path, switched_on: None });
        assert_eq!(d.cache_dir.as_deref(), Some(Path::new(DIR)));
        // Empty counts as unset.
        let d = decide(&env(&[(MESA_DIR_ENV, " ")]), Some(Path::new(DIR)), prepared);
        assert!(matches!(d.mesa, Placement::Sparkle { .. }), "{d:?}");
    }

    #[test]
    fn what_the_user_set_wins_per_variable() {
        let vars = [(NVIDIA_PATH_ENV, "/mine")];
        let d = decide(&env(&vars), Some(Path::new(DIR)), prepared);
        assert_eq!(d.nvidia, Placement::User { var: NVIDIA_PATH_ENV, value: "/mine".into() });
        assert!(matches!(d.mesa, Placement::Sparkle { .. }));

        let d = decide(&env(&[(MESA_OLD_DIR_ENV, "/old")]), Some(Path::new(DIR)), prepared);
        assert_eq!(d.mesa, Placement::User { var: MESA_OLD_DIR_ENV, value: "/old".into() });

        let vars = [(NVIDIA_SWITCH_ENV, "0"), (NVIDIA_PATH_ENV, "/mine"), (MESA_DISABLE_ENV, "TRUE")];
        let d = decide(&env(&vars), Some(Path::new(DIR)), prepared);
        assert_eq!(d.nvidia, Placement::Off { var: NVIDIA_SWITCH_ENV, value: "0".into() });
        assert_eq!(d.mesa, Placement::Off { var: MESA_DISABLE_ENV, value: "TRUE".into() });

        // Switches that do not switch off leave the placement to the path variables.
        let vars = [(NVIDIA_SWITCH_ENV, "1"), (MESA_DISABLE_ENV, "false")];
        let d = decide(&env(&vars), Some(Path::new(DIR)), prepared);
        assert!(matches!(d.nvidia, Placement::Sparkle { .. }) && matches!(d.mesa, Placement::Sparkle { .. }));
        // A switch the user set is not set again.
        assert!(matches!(d.nvidia, Placement::Sparkle { switched_on: None, .. }), "{d:?}");
    }

    #[test]
    fn variables_inherited_from_a_sparkle_process_are_not_the_users() {
        let vars = [(NVIDIA_PATH_ENV, "/parent/drivers/gl"), (SET_BY_SPARKLE_ENV, "/parent/drivers/gl")];
        let d = decide(&env(&vars), Some(Path::new(DIR)), prepared);
        let path = PathBuf::from("/c/drivers/gl");
        let on = Some(NVIDIA_SWITCH_ENV);
        assert_eq!(d.nvidia, Placement::Sparkle { var: NVIDIA_PATH_ENV, path, switched_on: on });
        let vars = [(NVIDIA_PATH_ENV, "/mine"), (SET_BY_SPARKLE_ENV, "/parent/drivers/gl")];
        let d = decide(&env(&vars), Some(Path::new(DIR)), prepared);
        assert!(matches!(d.nvidia, Placement::User { .. }), "{d:?}");
        // With nowhere to put it, the inherited value is what the driver reads, and is said so.
        let vars = [(MESA_DIR_ENV, "/parent/drivers/gl"), (SET_BY_SPARKLE_ENV, "/parent/drivers/gl")];
        let d = decide(&env(&vars), None, prepared);
        assert_eq!(d.mesa, Placement::Inherited { var: MESA_DIR_ENV, value: "/parent/drivers/gl".into() });
        assert!(d.placement(Driver::Mesa).describe().contains("inherited"), "{d:?}");
        assert!(matches!(d.nvidia, Placement::Default { .. }), "{d:?}");
    }

    #[test]
    fn cache_off_or_unusable_touches_nothing() {
        let called = std::cell::Cell::new(false);
        let d = decide(&env(&[]), None, |dir| {
            called.set(true);
            prepared(dir)
        });
        assert!(!called.get(), "no folder is made with the cache off");
        assert!(matches!(&d.nvidia, Placement::Default { why } if why.contains("off")), "{d:?}");
        assert!(matches!(d.mesa, Placement::Default { .. }));

        let d = decide(&env(&[]), Some(Path::new(DIR)), |_| Err("it is a symbolic link".into()));
        assert!(matches!(&d.mesa, Placement::Default { why } if why.contains("symbolic link")), "{d:?}");

        // Both set by the user: no folder needed.
        let vars = [(NVIDIA_PATH_ENV, "/a"), (MESA_DIR_ENV, "/b")];
        let d = decide(&env(&vars), Some(Path::new(DIR)), |_| panic!("no folder needed"));
        assert!(matches!(d.mesa, Placement::User { .. }));
    }

    #[test]
    fn descriptions_name_the_place_and_who_chose_it() {
        let d = decide(&env(&[(MESA_DIR_ENV, "/b")]), Some(Path::new(DIR)), prepared);
        let nvidia = d.describe(Some(Driver::Nvidia), Some(Path::new(DIR)));
        assert!(nvidia.contains("/c/drivers/gl") && nvidia.contains("chosen by Sparkle"), "{nvidia}");
        assert!(nvidia.contains("__GL_SHADER_DISK_CACHE=1"), "{nvidia}");
        let mesa = d.describe(Some(Driver::Mesa), Some(Path::new(DIR)));
        assert!(mesa.contains("/b") && mesa.contains("chosen by the user: MESA_SHADER_CACHE_DIR"), "{mesa}");
        let both = d.describe(None, Some(Path::new(DIR)));
        assert!(both.contains("NVIDIA: ") && both.contains("Mesa: "), "{both}");
        let other = d.describe(Some(Driver::Nvidia), Some(Path::new("/elsewhere")));
        assert!(other.contains("/c/drivers/gl") && other.contains("once per process"), "{other}");
    }

    #[test]
    fn drivers_are_told_apart_by_their_strings() {
        assert_eq!(Driver::of("NVIDIA Corporation", "4.6.0 NVIDIA 580.159.04"), Some(Driver::Nvidia));
        assert_eq!(Driver::of("Mesa", "4.5 (Core Profile) Mesa 22.3.6"), Some(Driver::Mesa));
        assert_eq!(Driver::of("AMD", "4.6.0 Core Profile Context 23.0"), None);
    }
}
