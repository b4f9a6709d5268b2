//! A throwaway certificate authority and a server certificate it signed,
//! written as PEM files to a temp dir of their own, for tests of TLS
//! connections to private servers.
//!
//! The server certificate names `localhost`, `127.0.0.1` and `::1`, so a
//! client that checks host names accepts it for any loopback address when
//! it trusts [`TestPki::ca_pem`]; it is valid for client authentication
//! too (Redis Cluster nodes present it to each other). Dropping a
//! [`TestPki`] removes its dir.
//!
//! ```
//! let pki = leaseq_testkit::tls::TestPki::generate().expect("certificates");
//! assert!(pki.ca_pem().starts_with(b"-----BEGIN CERTIFICATE-----"));
//! assert!(pki.key_path().is_file());
//! ```

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A CA certificate, and a server certificate and key signed by it, as
/// files in a temp dir (removed on drop).
#[derive(Debug)]
pub struct TestPki {
    dir: PathBuf,
    ca_pem: Vec<u8>,
    other_ca_pem: Vec<u8>,
}

fn ca_params(name: &str) -> Result<CertificateParams, String> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(|e| e.to_string())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(params)
}

impl TestPki {
    /// Generates a CA and a server certificate for the loopback names, and
    /// writes `ca.pem`, `server.pem` and `server.key` (mode 0600 on Unix)
    /// to a fresh temp dir.
    ///
    /// # Errors
    /// When a key cannot be generated or a file cannot be written.
    pub fn generate() -> Result<Self, String> {
        let err = |e: rcgen::Error| format!("certificate: {e}");
        let ca_key = KeyPair::generate().map_err(err)?;
        let ca = ca_params("leaseq test CA")?;
        let ca_cert = ca.self_signed(&ca_key).map_err(err)?;
        let issuer = Issuer::new(ca, ca_key);

        let server_key = KeyPair::generate().map_err(err)?;
        let mut server = CertificateParams::new(vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
        ])
        .map_err(err)?;
        server
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        // Client auth too: cluster nodes present it to each other on the
        // TLS cluster bus.
        server.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        server.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let server_cert = server.signed_by(&server_key, &issuer).map_err(err)?;

        // A second CA that signed nothing: trusting only it must fail.
        let other_key = KeyPair::generate().map_err(err)?;
        let other = ca_params("leaseq unrelated CA")?
            .self_signed(&other_key)
            .map_err(err)?;

        let pki = TestPki {
            dir: crate::env::temp_dir("leaseq-pki")?,
            ca_pem: ca_cert.pem().into_bytes(),
            other_ca_pem: other.pem().into_bytes(),
        };
        write(&pki.ca_path(), &pki.ca_pem, false)?;
        write(&pki.cert_path(), server_cert.pem().as_bytes(), false)?;
        write(&pki.key_path(), server_key.serialize_pem().as_bytes(), true)?;
        Ok(pki)
    }

    /// The CA certificate (PEM): what a client trusts.
    pub fn ca_pem(&self) -> &[u8] {
        &self.ca_pem
    }

    /// A CA certificate (PEM) that signed nothing here: a client trusting
    /// only it must refuse the server.
    pub fn unrelated_ca_pem(&self) -> &[u8] {
        &self.other_ca_pem
    }

    /// The dir holding the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `ca.pem`: the CA certificate.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// `server.pem`: the server certificate.
    pub fn cert_path(&self) -> PathBuf {
        self.dir.join("server.pem")
    }

    /// `server.key`: the server's private key (mode 0600 on Unix).
    pub fn key_path(&self) -> PathBuf {
        self.dir.join("server.key")
    }

    /// Copies the server certificate, key and CA to `dir` (as
    /// `server.pem`, `server.key` mode 0600, `ca.pem`), e.g. for a server
    /// that runs as another user and must own its key.
    ///
    /// # Errors
    /// When a file cannot be written.
    pub fn copy_to(&self, dir: &Path) -> Result<(), String> {
        for (from, secret) in [
            (self.ca_path(), false),
            (self.cert_path(), false),
            (self.key_path(), true),
        ] {
            let bytes = std::fs::read(&from).map_err(|e| format!("{}: {e}", from.display()))?;
            let name = from.file_name().unwrap_or_default();
            write(&dir.join(name), &bytes, secret)?;
        }
        Ok(())
    }
}

fn write(path: &Path, bytes: &[u8], secret: bool) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = if secret { 0o600 } else { 0o644 };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    #[cfg(not(unix))]
    let _ = secret;
    Ok(())
}

/// Makes rustls's `ring` provider the process default unless one is set,
/// so a client that builds its TLS settings from the default (the `redis`
/// crate does) finds one.
pub fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

impl Drop for TestPki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_are_written_and_removed() {
        let pki = TestPki::generate().expect("pki");
        let key = std::fs::read_to_string(pki.key_path()).expect("key");
        assert!(key.contains("PRIVATE KEY"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(pki.key_path())
                .expect("meta")
                .permissions();
            assert_eq!(mode.mode() & 0o777, 0o600);
        }
        assert_ne!(pki.ca_pem(), pki.unrelated_ca_pem());
        let dir = pki.dir().to_path_buf();
        drop(pki);
        assert!(!dir.exists());
    }
}
