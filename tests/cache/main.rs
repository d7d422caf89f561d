//! The program cache on its own, with an in-process test "compiler" (`cache_support`): the
//! memory tier, the disk tier and its entry files, single flight, read-only and unusable
//! folders, permissions and links, the driver caches' folders, and processes sharing a folder
//! (and starting together).
//! One test binary; a module per area.

#[path = "../support/cache/mod.rs"]
mod cache_support;
#[path = "../support/isolated.rs"]
mod isolated;

mod corruption;
mod cross_process;
mod disk_store;
mod driver_dirs;
mod entry_paths;
mod flow;
mod memory;
mod permissions;
mod processes;
mod read_only;
mod single_flight;
mod symlinks;
