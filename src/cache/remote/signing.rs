//! Signing keys of the fleet cache: a machine that publishes signs with its ed25519 secret key
//! (`SPARKLE_CACHE_SIGNING_KEY`), and a machine that trusts keys (`SPARKLE_CACHE_TRUSTED_KEYS`)
//! refuses any remote object that is not signed by one of them, before anything else reads it.
//!
//! Key files are text: 64 hex digits (the 32-byte secret seed, or a public key), `#` comments
//! allowed, so that they can be made, read and rotated with ordinary tools.

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};

use super::config::{hex_key, parse_hex_key, SECRET_KEY_MARK, SIGNING_KEY_ENV, TRUSTED_KEYS_ENV};
use super::envelope::{Opened, PUBLIC_KEY_LEN, SIGNATURE_LEN};

/// This machine's signing key.
pub(crate) struct Signer25519 {
    key: SigningKey,
}

impl Signer25519 {
    /// Reads a secret key file and checks that it is one: a file made by `sparkle cache keygen`
    /// names the public half of its key on its first line, which a public key file (64 hex digits
    /// as well) cannot match. With `trusted`, the key's public half must be among them: a machine
    /// must not publish what it (and the fleet) would refuse. A file that others may read is used,
    /// with a warning.
    pub fn load(path: &Path, trusted: Option<&[[u8; 32]]>) -> Result<Signer25519, String> {
        let shown = path.display();
        let text = fs::read_to_string(path)
            .map_err(|err| format!("{SIGNING_KEY_ENV}: cannot read {shown}: {err}"))?;
        let seed = text
            .lines()
            .map(|l| l.split('#').next().unwrap_or("").trim())
            .find(|l| !l.is_empty())
            .and_then(parse_hex_key)
            .ok_or_else(|| {
                format!("{SIGNING_KEY_ENV}: {shown} does not hold a secret key of 64 hex digits")
            })?;
        if trusted.is_some_and(|keys| keys.contains(&seed)) {
            return Err(format!(
                "{SIGNING_KEY_ENV}: {shown} holds a public key (it is listed in {TRUSTED_KEYS_ENV}), which \
                 cannot sign; name the secret key file `sparkle cache keygen FILE` wrote"
            ));
        }
        let key = SigningKey::from_bytes(&seed);
        let public = key.verifying_key().to_bytes();
        let named = text
            .lines()
            .find_map(|line| line.split_once(SECRET_KEY_MARK))
            .map(|(_, rest)| rest.trim())
            .ok_or_else(|| {
                format!(
                    "{SIGNING_KEY_ENV}: {shown} does not say that it is a secret key: a signing key file made \
                     by `sparkle cache keygen FILE` starts with `# {SECRET_KEY_MARK}<64 hex digits>`, and a \
                     file holding only a public key (such as the one keygen prints) cannot sign; if this \
                     really is a secret seed, add that line with its public key, {}",
                    hex_key(&public)
                )
            })?;
        if parse_hex_key(named) != Some(public) {
            return Err(format!(
                "{SIGNING_KEY_ENV}: {shown} is not a secret key file: the public key it names ({named}) is not \
                 the one its key makes ({}); it may be a public key file or an edited one",
                hex_key(&public)
            ));
        }
        if let Some(keys) = trusted {
            if !keys.contains(&public) {
                return Err(format!(
                    "{SIGNING_KEY_ENV}: the public key of {shown}, {}, is not in {TRUSTED_KEYS_ENV}, so this \
                     machine would publish what it refuses itself; add it there (and on the machines that \
                     should accept its entries)",
                    hex_key(&public)
                ));
            }
        }
        if fs::metadata(path).is_ok_and(|meta| meta.permissions().mode() & 0o077 != 0) {
            tracing::warn!(
                path = %shown,
                "the cache signing key can be read by other users; make it private (chmod 600)"
            );
        }
        Ok(Signer25519 { key })
    }

    pub fn public_key(&self) -> [u8; PUBLIC_KEY_LEN] {
        self.key.verifying_key().to_bytes()
    }

    pub fn sign(&self, message: &[u8]) -> ([u8; SIGNATURE_LEN], [u8; PUBLIC_KEY_LEN]) {
        (self.key.sign(message).to_bytes(), self.public_key())
    }
}

/// The public keys this machine accepts.
pub(crate) struct TrustedKeys {
    keys: Vec<VerifyingKey>,
}

impl TrustedKeys {
    /// Checks that each key is a valid curve point.
    pub fn new(raw: &[[u8; 32]]) -> Result<TrustedKeys, String> {
        let keys = raw
            .iter()
            .map(|bytes| {
                VerifyingKey::from_bytes(bytes)
                    .map_err(|_| format!("{} is not a valid ed25519 public key", hex_key(bytes)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(TrustedKeys { keys })
    }

    /// Accepts `opened` (stored at `name`) only if a trusted key signed it.
    pub fn check(&self, name: &str, opened: &Opened<'_>) -> Result<(), String> {
        let Some((signature, claimed)) = opened.signature else {
            return Err("it is not signed, and only signed entries are trusted".into());
        };
        let Some(key) = self.keys.iter().find(|key| key.as_bytes() == claimed) else {
            return Err(format!("it is signed by {}, which is not a trusted key", hex_key(claimed)));
        };
        key.verify_strict(&opened.signed_message(name), &Signature::from_bytes(signature))
            .map_err(|_| format!("its signature by {} does not match its contents", hex_key(claimed)))
    }
}

/// Makes a new key pair: the secret key goes to `path` (created 0600, never overwritten), the
/// public key is returned as hex.
pub fn generate_key_file(path: &Path) -> io::Result<String> {
    let mut seed = [0u8; 32];
    fs::File::open("/dev/urandom")?.read_exact(&mut seed)?;
    let key = SigningKey::from_bytes(&seed);
    let public = hex_key(&key.verifying_key().to_bytes());
    let mut file = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    writeln!(file, "# {SECRET_KEY_MARK}{public}")?;
    writeln!(file, "{}", hex_key(&seed))?;
    Ok(public)
}

/// The public key (hex) of the secret key file at `path`.
pub fn public_key_of(path: &Path) -> Result<String, String> {
    Signer25519::load(path, None).map(|signer| hex_key(&signer.public_key()))
}

#[cfg(test)]
mod tests {
    use super::super::envelope::{open, seal, Kind, Provenance};
    use super::*;

    #[test]
    fn only_a_secret_key_whose_public_half_is_trusted_signs() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("key");
        let public = generate_key_file(&secret).unwrap();
        let public_bytes = parse_hex_key(&public).unwrap();
        Signer25519::load(&secret, Some(&[public_bytes])).unwrap();
        // The public key saved as a file (what `keygen > key.pub` keeps), given as the signing key.
        let pub_file = dir.path().join("key.pub");
        fs::write(&pub_file, format!("{public}\n")).unwrap();
        let err = Signer25519::load(&pub_file, None).err().unwrap();
        assert!(err.contains("does not say that it is a secret key"), "{err}");
        let err = Signer25519::load(&pub_file, Some(&[public_bytes])).err().unwrap();
        assert!(err.contains("holds a public key"), "{err}");
        // A public key under a copied first line: the named key is not the one it makes.
        let text = fs::read_to_string(&secret).unwrap();
        let first = text.lines().next().unwrap();
        fs::write(&pub_file, format!("{first}\n{public}\n")).unwrap();
        let err = Signer25519::load(&pub_file, None).err().unwrap();
        assert!(err.contains("is not a secret key file"), "{err}");
        // A secret key whose public half this machine does not trust.
        let err = Signer25519::load(&secret, Some(&[[7u8; 32]])).err().unwrap();
        assert!(err.contains("is not in") && err.contains(&public), "{err}");
    }

    #[test]
    fn trusted_signatures_pass_and_everything_else_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        let public = generate_key_file(&path).unwrap();
        assert!(generate_key_file(&path).is_err(), "never overwrites a key");
        let signer = Signer25519::load(&path, None).unwrap();
        assert_eq!(hex_key(&signer.public_key()), public);
        let trusted = TrustedKeys::new(&[signer.public_key()]).unwrap();

        let sign = |m: &[u8]| signer.sign(m);
        let sealed = seal("gpu/key", Kind::Entry, &Provenance::default(), b"entry", Some(&sign));
        trusted.check("gpu/key", &open(&sealed).unwrap()).unwrap();
        // Another name: a replay under another key.
        assert!(trusted.check("gpu/other", &open(&sealed).unwrap()).unwrap_err().contains("does not match"));
        // A flipped payload byte.
        let mut altered = sealed.clone();
        *altered.last_mut().unwrap() ^= 1;
        assert!(trusted.check("gpu/key", &open(&altered).unwrap()).is_err());
        // Unsigned.
        let unsigned = seal("gpu/key", Kind::Entry, &Provenance::default(), b"entry", None);
        assert!(trusted.check("gpu/key", &open(&unsigned).unwrap()).unwrap_err().contains("not signed"));
        // Signed by a key nobody trusts.
        let other = dir.path().join("other");
        generate_key_file(&other).unwrap();
        let stranger = Signer25519::load(&other, None).unwrap();
        let sign = |m: &[u8]| stranger.sign(m);
        let sealed = seal("gpu/key", Kind::Entry, &Provenance::default(), b"entry", Some(&sign));
        assert!(trusted.check("gpu/key", &open(&sealed).unwrap()).unwrap_err().contains("not a trusted key"));
    }
}
