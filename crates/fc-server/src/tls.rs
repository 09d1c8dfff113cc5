//! The TLS port (the `tls` feature; `--tls-port`, `[tls]`): rustls's server configuration
//! from the `tls-*` settings, with the `ring` provider. Certificates and keys are read once at
//! start, each error naming its file; client certificates are checked against the CA file
//! when `tls-auth-clients` is `yes` (required) or `optional` (checked when given). The
//! handshake runs on the connection's worker (`conn::serve`), within 10 s; a failed one
//! closes that connection and touches no one else.

use std::path::Path;
use std::sync::Arc;

use fc_config::{TlsAuthClients, TlsConfig, TlsProtocol};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, RootCertStore};

/// The certificates of a PEM file.
fn certificates(what: &str, path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let read = |e: &dyn std::fmt::Display| anyhow::anyhow!("{what} {}: {e}", path.display());
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| read(&e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| read(&e))?;
    if certs.is_empty() {
        return Err(read(&"no certificate in it"));
    }
    Ok(certs)
}

/// The acceptor of the TLS port's connections.
///
/// # Errors
/// A file that cannot be read or holds no certificate or key, a key that does not match the
/// certificate, a CA file missing where client certificates are checked.
pub(crate) fn acceptor(config: &TlsConfig) -> anyhow::Result<TlsAcceptor> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = config
        .protocols
        .iter()
        .map(|p| match p {
            TlsProtocol::Tls12 => &rustls::version::TLS12,
            TlsProtocol::Tls13 => &rustls::version::TLS13,
        })
        .collect();
    let chain = certificates("tls-cert-file", &config.cert_file)?;
    let key = PrivateKeyDer::from_pem_file(&config.key_file)
        .map_err(|e| anyhow::anyhow!("tls-key-file {}: {e}", config.key_file.display()))?;
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)?;
    let builder = match config.auth_clients {
        TlsAuthClients::No => builder.with_no_client_auth(),
        auth @ (TlsAuthClients::Yes | TlsAuthClients::Optional) => {
            let Some(ca) = &config.ca_cert_file else {
                anyhow::bail!("tls-auth-clients {} needs tls-ca-cert-file", auth.name());
            };
            let mut roots = RootCertStore::empty();
            for cert in certificates("tls-ca-cert-file", ca)? {
                roots
                    .add(cert)
                    .map_err(|e| anyhow::anyhow!("tls-ca-cert-file {}: {e}", ca.display()))?;
            }
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider));
            let verifier = if auth == TlsAuthClients::Optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(verifier.build()?)
        }
    };
    let server = builder.with_single_cert(chain, key).map_err(|e| {
        anyhow::anyhow!(
            "tls-key-file {} does not fit tls-cert-file {}: {e}",
            config.key_file.display(),
            config.cert_file.display()
        )
    })?;
    Ok(TlsAcceptor::from(Arc::new(server)))
}
