//! The cryptography behind the fleet clients' TLS (`https://` S3 endpoints, `rediss://`): rustls
//! with ring. The S3 client's HTTP stack takes the process's default rustls provider and, with
//! none installed, would panic while building its client; so the tier installs ring as that
//! default before it builds any client. A provider the program installed itself is kept. The
//! handshakes themselves are tested in the fleet test binary (`tls`), each in a process of its own.

/// Makes ring the process's default rustls provider unless one is installed already.
pub(super) fn install_default_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may install one between the check and here: then that one stays,
        // which is as good (any provider serves these clients).
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_provider_is_installed_and_a_second_call_keeps_it() {
        super::install_default_provider();
        let first = rustls::crypto::CryptoProvider::get_default().expect("a default provider").clone();
        super::install_default_provider();
        let second = rustls::crypto::CryptoProvider::get_default().expect("a default provider");
        assert!(std::sync::Arc::ptr_eq(&first, second), "the installed provider stays");
    }
}
