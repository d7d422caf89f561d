//! PM4 packets.
