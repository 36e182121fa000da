//! Certificates for the TLS tests, made on the spot with `rcgen`: a CA, and leaf
//! certificates it signs (for servers and clients alike), written as PEM files. A leaf
//! can be written again over the same files, as a rotation does.

use std::io;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};

/// A test certificate authority whose files live in one directory.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    dir: PathBuf,
    ca: PathBuf,
}

/// A certificate and its key, as files, and the certificate's DER (to recognise it).
#[derive(Clone, Debug)]
pub struct Leaf {
    /// The certificate (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM, PKCS#8).
    pub key: PathBuf,
    /// The certificate (DER).
    pub der: Vec<u8>,
}

fn rcgen_error(error: rcgen::Error) -> io::Error {
    io::Error::other(error)
}

impl TestCa {
    /// A new CA called `name`, its certificate written to `dir/<name>-ca.pem`.
    ///
    /// # Errors
    /// When a key cannot be made or the file cannot be written.
    pub fn new(dir: &Path, name: &str) -> io::Result<Self> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(rcgen_error)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{name} test CA"));
        let key = KeyPair::generate().map_err(rcgen_error)?;
        let issuer = CertifiedIssuer::self_signed(params, key).map_err(rcgen_error)?;
        let ca = dir.join(format!("{name}-ca.pem"));
        std::fs::write(&ca, issuer.pem())?;
        Ok(Self {
            issuer,
            dir: dir.to_owned(),
            ca,
        })
    }

    /// The CA certificate's file (PEM).
    pub fn ca(&self) -> &Path {
        &self.ca
    }

    /// A leaf for `names` (DNS names or IP addresses), good for servers and clients,
    /// written to `dir/<stem>.pem` and `dir/<stem>.key`.
    ///
    /// # Errors
    /// As [`TestCa::write_leaf`].
    pub fn issue(&self, stem: &str, names: &[&str]) -> io::Result<Leaf> {
        let cert = self.dir.join(format!("{stem}.pem"));
        let key = self.dir.join(format!("{stem}.key"));
        self.write_leaf(names, &cert, &key)
    }

    /// A new leaf for `names` written over `cert` and `key` the way a rotation does: each
    /// file written beside its place and renamed over it (the key first, so for a moment
    /// the key and the certificate do not match, as in a real rotation).
    ///
    /// # Errors
    /// When a key cannot be made or a file cannot be written.
    pub fn write_leaf(&self, names: &[&str], cert: &Path, key: &Path) -> io::Result<Leaf> {
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let mut params = CertificateParams::new(names).map_err(rcgen_error)?;
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let leaf_key = KeyPair::generate().map_err(rcgen_error)?;
        let leaf = params
            .signed_by(&leaf_key, &self.issuer)
            .map_err(rcgen_error)?;
        replace(key, leaf_key.serialize_pem().as_bytes())?;
        replace(cert, leaf.pem().as_bytes())?;
        Ok(Leaf {
            cert: cert.to_owned(),
            key: key.to_owned(),
            der: leaf.der().to_vec(),
        })
    }
}

fn replace(path: &Path, contents: &[u8]) -> io::Result<()> {
    let mut beside = path.as_os_str().to_owned();
    beside.push(".new");
    std::fs::write(&beside, contents)?;
    std::fs::rename(&beside, path)
}
