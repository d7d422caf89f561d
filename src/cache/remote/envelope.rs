//! The remote object format: a small envelope around a payload that is byte for byte what the
//! disk tier stores (a whole entry file: header and blob) or a driver-cache archive.
//!
//! ```text
//! magic "SPRKREM\0" | version u32 | kind u32 | flags u32 | provenance_len u32 | payload_len u64
//! [signature 64 B | public key 32 B]   (flags bit 0)
//! provenance (JSON, provenance_len bytes) | payload (payload_len bytes)
//! ```
//!
//! Little-endian. The signature is ed25519 over a domain tag, the object's name, the kind, the
//! provenance and the payload, so a signed object cannot be replayed under another name or as
//! another kind. Parsing checks every length against the bytes received before slicing, and a
//! truncated or padded object is refused.

use serde::{Deserialize, Serialize};

/// `SPRKREM` + NUL.
const MAGIC: [u8; 8] = *b"SPRKREM\0";
const VERSION: u32 = 1;
const FIXED_LEN: usize = 8 + 4 + 4 + 4 + 4 + 8;
const SIGNED: u32 = 1;
pub(crate) const SIGNATURE_LEN: usize = 64;
pub(crate) const PUBLIC_KEY_LEN: usize = 32;
/// Provenance is a few hundred bytes; anything past this is not ours.
const MAX_PROVENANCE: usize = 64 << 10;
/// The most bytes an envelope adds to its payload.
pub(crate) const MAX_OVERHEAD: usize = FIXED_LEN + SIGNATURE_LEN + PUBLIC_KEY_LEN + MAX_PROVENANCE;
const DOMAIN: &[u8] = b"sparkle remote object v1\0";

/// What an object's payload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A program entry, exactly as the disk tier stores it.
    Entry = 1,
    /// A gzip'd tar archive of a driver's own shader cache folder.
    DriverArchive = 2,
    /// The fleet's working set: `<key hex> <compile ns>` lines, in first-use order.
    WorkingSet = 3,
    /// A program's recipe, exactly as the disk tier keeps it (`recipes.rs`).
    Recipe = 4,
    /// A GPU folder's identity, filed under its device (`recipes.rs`).
    DeviceDriver = 5,
    /// The placement's history of a device set, as its local file (`fleet_files.rs`).
    PlacementHistory = 6,
}

impl Kind {
    fn from_u32(value: u32) -> Option<Kind> {
        match value {
            1 => Some(Kind::Entry),
            2 => Some(Kind::DriverArchive),
            3 => Some(Kind::WorkingSet),
            4 => Some(Kind::Recipe),
            5 => Some(Kind::DeviceDriver),
            6 => Some(Kind::PlacementHistory),
            _ => None,
        }
    }
}

/// Who produced an object: shown by `sparkle cache remote`, never trusted for anything (a
/// recipe's creation time orders a fleet rebuild, `recipes.rs`; it decides nothing that is built).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub(crate) struct Provenance {
    /// Sparkle's version on the producing machine.
    pub sparkle: String,
    pub backend: String,
    /// The producer's GPU id fields (device, driver version, compiler identity, …).
    pub gpu: Vec<(String, String)>,
    pub created_unix_ns: u64,
}

/// A parsed envelope, borrowing from the received bytes.
#[derive(Debug)]
pub(crate) struct Opened<'a> {
    pub kind: Kind,
    pub provenance: &'a [u8],
    pub payload: &'a [u8],
    /// The signature and the key that claims it, unchecked.
    pub signature: Option<(&'a [u8; SIGNATURE_LEN], &'a [u8; PUBLIC_KEY_LEN])>,
    /// The bytes a signature covers (without the name, which the reader supplies).
    signed_parts: (u32, &'a [u8], &'a [u8]),
}

impl Opened<'_> {
    /// The message the signature must cover for an object stored at `name`.
    pub fn signed_message(&self, name: &str) -> Vec<u8> {
        let (kind, provenance, payload) = self.signed_parts;
        message(name, kind, provenance, payload)
    }
}

/// The message a signature covers.
pub(crate) fn message(name: &str, kind: u32, provenance: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(DOMAIN.len() + name.len() + provenance.len() + payload.len() + 32);
    out.extend_from_slice(DOMAIN);
    for part in [name.as_bytes(), &kind.to_le_bytes(), provenance, payload] {
        out.extend_from_slice(&(part.len() as u64).to_le_bytes());
        out.extend_from_slice(part);
    }
    out
}

/// Signs a message: returns the signature and the public key that checks it.
pub(crate) type Sign<'a> = &'a dyn Fn(&[u8]) -> ([u8; SIGNATURE_LEN], [u8; PUBLIC_KEY_LEN]);

/// Builds an object. `sign` gets the message and returns the signature and public key.
pub(crate) fn seal(
    name: &str,
    kind: Kind,
    provenance: &Provenance,
    payload: &[u8],
    sign: Option<Sign<'_>>,
) -> Vec<u8> {
    let provenance = serde_json::to_vec(provenance).unwrap_or_default();
    let signature = sign.map(|sign| sign(&message(name, kind as u32, &provenance, payload)));
    let mut out = Vec::with_capacity(FIXED_LEN + 96 + provenance.len() + payload.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(kind as u32).to_le_bytes());
    out.extend_from_slice(&(if signature.is_some() { SIGNED } else { 0 }).to_le_bytes());
    out.extend_from_slice(&(provenance.len() as u32).to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    if let Some((signature, key)) = signature {
        out.extend_from_slice(&signature);
        out.extend_from_slice(&key);
    }
    out.extend_from_slice(&provenance);
    out.extend_from_slice(payload);
    out
}

/// Parses an object; every length is checked against `bytes`.
pub(crate) fn open(bytes: &[u8]) -> Result<Opened<'_>, String> {
    let take = |at: usize, len: usize| -> Result<&[u8], String> {
        at.checked_add(len)
            .and_then(|end| bytes.get(at..end))
            .ok_or_else(|| format!("truncated: {} bytes", bytes.len()))
    };
    let u32_at = |at: usize| -> Result<u32, String> {
        let b = take(at, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    if take(0, 8)? != MAGIC {
        return Err("not a Sparkle remote object".into());
    }
    let version = u32_at(8)?;
    if version != VERSION {
        return Err(format!("remote object format {version}, expected {VERSION}"));
    }
    let kind_raw = u32_at(12)?;
    let kind = Kind::from_u32(kind_raw).ok_or_else(|| format!("unknown object kind {kind_raw}"))?;
    let flags = u32_at(16)?;
    if flags & !SIGNED != 0 {
        return Err(format!("unknown flags {flags:#x}"));
    }
    let provenance_len = u32_at(20)? as usize;
    if provenance_len > MAX_PROVENANCE {
        return Err(format!("provenance of {provenance_len} bytes"));
    }
    let payload_len = {
        let b = take(24, 8)?;
        u64::from_le_bytes(b.try_into().map_err(|_| "truncated".to_owned())?)
    };
    let payload_len = usize::try_from(payload_len).map_err(|_| "payload too large".to_owned())?;
    let mut at = FIXED_LEN;
    let signature = if flags & SIGNED != 0 {
        let signature: &[u8; SIGNATURE_LEN] =
            take(at, SIGNATURE_LEN)?.try_into().map_err(|_| "truncated".to_owned())?;
        let key: &[u8; PUBLIC_KEY_LEN] =
            take(at + SIGNATURE_LEN, PUBLIC_KEY_LEN)?.try_into().map_err(|_| "truncated".to_owned())?;
        at += SIGNATURE_LEN + PUBLIC_KEY_LEN;
        Some((signature, key))
    } else {
        None
    };
    let provenance = take(at, provenance_len)?;
    at += provenance_len;
    let payload = take(at, payload_len)?;
    if at + payload_len != bytes.len() {
        return Err(format!(
            "{} bytes after the payload (the object was altered or padded)",
            bytes.len() - at - payload_len
        ));
    }
    Ok(Opened { kind, provenance, payload, signature, signed_parts: (kind_raw, provenance, payload) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provenance() -> Provenance {
        Provenance { sparkle: "0.1.0".into(), backend: "gl".into(), gpu: vec![], created_unix_ns: 5 }
    }

    #[test]
    fn round_trips_signed_and_unsigned() {
        let sealed = seal("a/b", Kind::Entry, &provenance(), b"payload", None);
        let opened = open(&sealed).unwrap();
        assert_eq!(opened.kind, Kind::Entry);
        assert_eq!(opened.payload, b"payload");
        assert!(opened.signature.is_none());
        let sign = |m: &[u8]| ([m.len() as u8; 64], [9u8; 32]);
        let sealed = seal("a/b", Kind::DriverArchive, &provenance(), b"tar", Some(&sign));
        let opened = open(&sealed).unwrap();
        assert_eq!(opened.kind, Kind::DriverArchive);
        let (signature, key) = opened.signature.unwrap();
        assert_eq!(key, &[9u8; 32]);
        assert_eq!(signature[0], opened.signed_message("a/b").len() as u8);
        assert_ne!(opened.signed_message("a/b"), opened.signed_message("a/c"));
    }

    #[test]
    fn every_truncation_and_padding_is_refused() {
        let sign = |_: &[u8]| ([1u8; 64], [2u8; 32]);
        let sealed = seal("n", Kind::Entry, &provenance(), b"0123456789", Some(&sign));
        for len in 0..sealed.len() {
            assert!(open(&sealed[..len]).is_err(), "{len}");
        }
        let mut padded = sealed.clone();
        padded.push(0);
        assert!(open(&padded).is_err());
        for at in [0, 8, 12, 16] {
            let mut bad = sealed.clone();
            bad[at] ^= 0x40;
            assert!(open(&bad).is_err(), "byte {at}");
        }
    }
}
