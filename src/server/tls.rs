//! TLS for client connections: a rustls server configuration from PEM files
//! (`--tls-cert`, `--tls-key`), handed to pgwire, which answers a client's SSLRequest with
//! it.

use std::path::Path;
use std::sync::Arc;

use pgwire::tokio::tokio_rustls::rustls::pki_types::pem::PemObject;
use pgwire::tokio::tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use pgwire::tokio::tokio_rustls::rustls::ServerConfig;
pub use pgwire::tokio::tokio_rustls::TlsAcceptor;

/// A TLS acceptor serving the certificate chain in `cert` with the private key in `key`
/// (both PEM; the key PKCS#8, PKCS#1 or SEC1).
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    let read = |p: &Path| std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display()));
    let cert_pem = read(cert)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: not a PEM certificate: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("{}: no certificate in it", cert.display()));
    }
    let key_der = PrivateKeyDer::from_pem_slice(&read(key)?)
        .map_err(|e| format!("{}: not a PEM private key: {e}", key.display()))?;
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| {
            format!(
                "TLS certificate {} and key {}: {e}",
                cert.display(),
                key.display()
            )
        })?;
    // PostgreSQL 17's direct TLS negotiation asks for this ALPN protocol.
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
