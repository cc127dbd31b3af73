//! TLS for client connections: a rustls server configuration from PEM files
//! (`--tls-cert`, `--tls-key`), handed to pgwire, which answers a client's SSLRequest with
//! it.

use std::path::Path;
use std::sync::Arc;

use pgwire::tokio::tokio_rustls::rustls::pki_types::pem::PemObject;
use pgwire::tokio::tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use pgwire::tokio::tokio_rustls::rustls::ServerConfig;
pub use pgwire::tokio::tokio_rustls::TlsAcceptor;

use super::setup::SetupError;

/// A TLS acceptor serving the certificate chain in `cert` with the private key in `key`
/// (both PEM; the key PKCS#8, PKCS#1 or SEC1).
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, SetupError> {
    let read = |p: &Path, what| {
        std::fs::read(p).map_err(|source| SetupError::Read {
            what,
            path: p.to_path_buf(),
            source,
        })
    };
    let bad = |p: &Path, message: String| SetupError::Tls {
        path: p.to_path_buf(),
        message,
    };
    let cert_pem = read(cert, "TLS certificate")?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(cert, format!("not a PEM certificate: {e}")))?;
    if chain.is_empty() {
        return Err(bad(cert, "no certificate in it".into()));
    }
    let key_der = PrivateKeyDer::from_pem_slice(&read(key, "TLS key")?)
        .map_err(|e| bad(key, format!("not a PEM private key: {e}")))?;
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| bad(cert, format!("with key {}: {e}", key.display())))?;
    // PostgreSQL 17's direct TLS negotiation asks for this ALPN protocol.
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
