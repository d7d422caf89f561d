//! The entry file format: a fixed 96-byte little-endian header, then the payload (the blob).
//!
//! Every field is checked before a payload is handed to a backend, and the header carries its own
//! checksum, so a flip in any byte of the file — header or payload — is caught: the payload by its
//! xxh3-64, the header (including the payload checksum field) by the header checksum.

use bytemuck::{Pod, Zeroable};
use xxhash_rust::xxh3::xxh3_64;

use super::{CacheKey, CACHE_FORMAT_VERSION};

/// `SPRKLCH` + NUL, read as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"SPRKLCH\0");
/// Bytes of the header in front of every entry's blob (96).
pub const HEADER_LEN: usize = std::mem::size_of::<EntryHeader>();

/// The on-disk header. Fields are stored little-endian whatever the host; use
/// [`EntryHeader::to_bytes`] and [`EntryHeader::parse`] rather than casting directly.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct EntryHeader {
    /// `SPRKLCH` + NUL, read as a little-endian u64.
    pub magic: u64,
    /// The cache format version the entry was written in.
    pub version: u32,
    /// The backend's tag ([`GpuId::backend_tag`](super::GpuId::backend_tag)).
    pub backend: u32,
    /// The hash of the [`GpuId`](super::GpuId) the blob was compiled for.
    pub gpu_hash: u64,
    /// The low 64 bits of the [`CacheKey`].
    pub key_lo: u64,
    /// The high 64 bits of the [`CacheKey`].
    pub key_hi: u64,
    /// The backend's format tag of the blob ([`Blob::format`](super::Blob::format)).
    pub blob_format: u32,
    /// Zero; there so that every field stays naturally aligned (no implicit padding for Pod).
    pub reserved: u32,
    /// Bytes of the blob after the header.
    pub payload_len: u64,
    /// xxh3-64 of the blob.
    pub payload_xxh3: u64,
    /// How long the compile took, in nanoseconds.
    pub compile_time_ns: u64,
    /// When the entry was written, in nanoseconds since the Unix epoch.
    pub created_ns: u64,
    /// Time of publishing. Later uses are recorded in the file's mtime instead, because
    /// rewriting a header in place could expose a torn one to a concurrent reader.
    pub last_used_ns: u64,
    /// xxh3-64 of all the bytes above.
    pub header_xxh3: u64,
}

const _: () = assert!(HEADER_LEN == 96);

/// Why an entry was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    Truncated { len: u64 },
    BadHeaderChecksum,
    BadMagic,
    Version(u32),
    Backend(u32),
    Gpu(u64),
    Key(u128),
    Length { header: u64, file: u64 },
    BadPayloadChecksum,
    Reserved,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Truncated { len } => write!(f, "file of {len} bytes is shorter than a header"),
            Problem::BadHeaderChecksum => f.write_str("header checksum mismatch"),
            Problem::BadMagic => f.write_str("not a sparkle cache entry"),
            Problem::Version(v) => write!(f, "format version {v}, expected {CACHE_FORMAT_VERSION}"),
            Problem::Backend(b) => write!(f, "written by backend {b}"),
            Problem::Gpu(g) => write!(f, "written for GPU {g:016x}"),
            Problem::Key(k) => write!(f, "holds key {k:032x}"),
            Problem::Length { header, file } => {
                write!(f, "header says {header} payload bytes, file holds {file}")
            }
            Problem::BadPayloadChecksum => f.write_str("payload checksum mismatch"),
            Problem::Reserved => f.write_str("reserved header field is not zero"),
        }
    }
}

/// What an entry must be to be accepted.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    /// The backend's tag.
    pub backend: u32,
    /// The hash of this device's [`GpuId`](super::GpuId).
    pub gpu_hash: u64,
    /// The key looked up.
    pub key: CacheKey,
}

impl EntryHeader {
    /// The header of a new entry holding `payload`, with its checksums.
    pub fn new(
        expect: Expect,
        blob_format: u32,
        payload: &[u8],
        compile_time_ns: u64,
        created_ns: u64,
    ) -> Self {
        let key = expect.key.as_u128();
        let mut header = EntryHeader {
            magic: MAGIC,
            version: CACHE_FORMAT_VERSION,
            backend: expect.backend,
            gpu_hash: expect.gpu_hash,
            key_lo: key as u64,
            key_hi: (key >> 64) as u64,
            blob_format,
            reserved: 0,
            payload_len: payload.len() as u64,
            payload_xxh3: xxh3_64(payload),
            compile_time_ns,
            created_ns,
            last_used_ns: created_ns,
            header_xxh3: 0,
        };
        header.header_xxh3 = header.own_checksum();
        header
    }

    /// The key the header names.
    pub fn key(&self) -> CacheKey {
        CacheKey::from_u128(u128::from(self.key_lo) | (u128::from(self.key_hi) << 64))
    }

    fn own_checksum(&self) -> u64 {
        let bytes = self.to_le();
        xxh3_64(&bytemuck::bytes_of(&bytes)[..HEADER_LEN - 8])
    }

    /// A copy with every field converted to (or from: the swap is its own inverse) little-endian.
    fn to_le(self) -> Self {
        EntryHeader {
            magic: self.magic.to_le(),
            version: self.version.to_le(),
            backend: self.backend.to_le(),
            gpu_hash: self.gpu_hash.to_le(),
            key_lo: self.key_lo.to_le(),
            key_hi: self.key_hi.to_le(),
            blob_format: self.blob_format.to_le(),
            reserved: self.reserved.to_le(),
            payload_len: self.payload_len.to_le(),
            payload_xxh3: self.payload_xxh3.to_le(),
            compile_time_ns: self.compile_time_ns.to_le(),
            created_ns: self.created_ns.to_le(),
            last_used_ns: self.last_used_ns.to_le(),
            header_xxh3: self.header_xxh3.to_le(),
        }
    }

    /// The header as stored: little-endian whatever the host.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out.copy_from_slice(bytemuck::bytes_of(&self.to_le()));
        out
    }

    /// Decodes a header and checks what it can say about itself: its checksum, magic, version,
    /// and that the file is as long as it says. Does not look at the payload.
    pub fn parse(bytes: &[u8; HEADER_LEN], file_len: u64) -> Result<Self, Problem> {
        let header = bytemuck::pod_read_unaligned::<EntryHeader>(bytes).to_le();
        if header.own_checksum() != header.header_xxh3 {
            return Err(Problem::BadHeaderChecksum);
        }
        if header.magic != MAGIC {
            return Err(Problem::BadMagic);
        }
        if header.version != CACHE_FORMAT_VERSION {
            return Err(Problem::Version(header.version));
        }
        if header.reserved != 0 {
            return Err(Problem::Reserved);
        }
        let payload_in_file = file_len.saturating_sub(HEADER_LEN as u64);
        if header.payload_len != payload_in_file {
            return Err(Problem::Length { header: header.payload_len, file: payload_in_file });
        }
        Ok(header)
    }

    /// Checks that this header belongs to the entry the caller asked for.
    pub fn check_identity(&self, expect: &Expect) -> Result<(), Problem> {
        if self.backend != expect.backend {
            return Err(Problem::Backend(self.backend));
        }
        if self.gpu_hash != expect.gpu_hash {
            return Err(Problem::Gpu(self.gpu_hash));
        }
        if self.key() != expect.key {
            return Err(Problem::Key(self.key().as_u128()));
        }
        Ok(())
    }

    /// Checks the blob against the header's length and checksum.
    pub fn check_payload(&self, payload: &[u8]) -> Result<(), Problem> {
        if payload.len() as u64 != self.payload_len {
            return Err(Problem::Length { header: self.payload_len, file: payload.len() as u64 });
        }
        if xxh3_64(payload) != self.payload_xxh3 {
            return Err(Problem::BadPayloadChecksum);
        }
        Ok(())
    }
}

/// Verifies a whole entry held in memory (a remote object's payload) exactly as
/// `files::read_entry` verifies a file: header, identity, then payload.
#[cfg(feature = "remote")]
pub(crate) fn verify_bytes<'a>(bytes: &'a [u8], expect: &Expect) -> Result<(EntryHeader, &'a [u8]), Problem> {
    let len = bytes.len() as u64;
    let header_bytes: &[u8; HEADER_LEN] =
        bytes.get(..HEADER_LEN).and_then(|b| b.try_into().ok()).ok_or(Problem::Truncated { len })?;
    let header = EntryHeader::parse(header_bytes, len)?;
    header.check_identity(expect)?;
    let payload = &bytes[HEADER_LEN..];
    header.check_payload(payload)?;
    Ok((header, payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expect() -> Expect {
        Expect { backend: 1, gpu_hash: 0xfeed, key: CacheKey::from_u128(0x1234_5678_9abc_def0_1122_3344) }
    }

    #[test]
    fn round_trips() {
        let payload = b"hello blob";
        let header = EntryHeader::new(expect(), 7, payload, 5, 6);
        let bytes = header.to_bytes();
        assert_eq!(&bytes[..8], b"SPRKLCH\0");
        let parsed = EntryHeader::parse(&bytes, (HEADER_LEN + payload.len()) as u64).unwrap();
        assert_eq!(parsed, header);
        parsed.check_identity(&expect()).unwrap();
        parsed.check_payload(payload).unwrap();
        assert_eq!(parsed.key(), expect().key);
    }

    #[test]
    fn every_header_bit_is_covered() {
        let payload = b"x";
        let bytes = EntryHeader::new(expect(), 7, payload, 5, 6).to_bytes();
        for i in 0..HEADER_LEN {
            for bit in 0..8 {
                let mut bad = bytes;
                bad[i] ^= 1 << bit;
                assert!(EntryHeader::parse(&bad, (HEADER_LEN + 1) as u64).is_err(), "byte {i} bit {bit}");
            }
        }
    }
}
