//! The fleet cache (feature `remote`) against real servers started on 127.0.0.1, and the test
//! servers and fault proxy themselves. One test binary; a module per area.

#[cfg(feature = "remote")]
#[path = "../support/cache/mod.rs"]
mod cache_support;
#[cfg(feature = "remote")]
#[path = "../support/isolated.rs"]
mod isolated;
#[path = "../support/remote/mod.rs"]
mod remote_support;

#[cfg(feature = "remote")]
mod adversary;
#[cfg(feature = "remote")]
mod bounds;
#[cfg(feature = "remote")]
mod cache;
#[cfg(feature = "remote")]
mod leases;
#[cfg(all(feature = "remote", feature = "amdgpu-sim"))]
mod recipes;
mod servers;
#[cfg(feature = "remote")]
mod tls;
#[cfg(feature = "remote")]
mod trace;
