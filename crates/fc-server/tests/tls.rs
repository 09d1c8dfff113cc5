//! The TLS port (`tls` feature): certificates made here with rcgen (a CA, the server's, a
//! client's, and a client's from another CA), a Rust client (rustls over a blocking socket)
//! and Debian's `redis-cli --tls` when it is installed; client certificates required,
//! optional and off; a TLS-only server; garbage and bad files refused with clear errors.

#![cfg(feature = "tls")]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::start;
use fc_server::{Server, ServerConfig, ServerHandle, TlsAuthClients, TlsConfig, TlsProtocol};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// PEM files in a temporary directory.
struct Pki {
    dir: tempfile::TempDir,
    ca: CertificateDer<'static>,
}

impl Pki {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

/// A CA, the server's certificate for localhost and 127.0.0.1, a client's from the CA, and a
/// client's from another CA.
fn pki() -> Pki {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: String| std::fs::write(dir.path().join(name), text).unwrap();
    let authority = ca("fast-cache test CA");
    write("ca.pem", authority.pem());
    let leaf =
        |names: Vec<String>, cert: &str, key: &str, issuer: &CertifiedIssuer<'_, KeyPair>| {
            let key_pair = KeyPair::generate().unwrap();
            let params = CertificateParams::new(names).unwrap();
            let signed = params.signed_by(&key_pair, issuer).unwrap();
            write(cert, signed.pem());
            write(key, key_pair.serialize_pem());
        };
    leaf(
        vec!["localhost".into(), "127.0.0.1".into()],
        "server.pem",
        "server.key",
        &authority,
    );
    leaf(
        vec!["client".into()],
        "client.pem",
        "client.key",
        &authority,
    );
    let rogue = ca("someone else's CA");
    leaf(vec!["rogue".into()], "rogue.pem", "rogue.key", &rogue);
    Pki {
        ca: authority.der().clone(),
        dir,
    }
}

fn tls_server(pki: &Pki, auth: TlsAuthClients, plaintext: bool) -> ServerHandle {
    start(ServerConfig {
        shards: 8,
        threads: 2,
        plaintext,
        tls: Some(TlsConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            cert_file: pki.path("server.pem"),
            key_file: pki.path("server.key"),
            ca_cert_file: Some(pki.path("ca.pem")),
            auth_clients: auth,
            protocols: vec![TlsProtocol::Tls12, TlsProtocol::Tls13],
        }),
        ..ServerConfig::default()
    })
}

fn certs(path: &Path) -> Vec<CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_file_iter(path)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A rustls client: trusts the test CA, presents `identity` (a certificate and key file
/// pair) when given.
fn connect(
    pki: &Pki,
    addr: SocketAddr,
    identity: Option<(&str, &str)>,
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    use rustls::pki_types::pem::PemObject;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca.clone()).unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match identity {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                certs(&pki.path(cert)),
                PrivateKeyDer::from_pem_file(pki.path(key)).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    let name = ServerName::try_from("localhost").unwrap();
    let connection = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let socket = TcpStream::connect(addr).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    rustls::StreamOwned::new(connection, socket)
}

/// Sends one command and reads what comes back (until the reply ends with CRLF), or the
/// error that ended the connection.
fn exchange(
    stream: &mut rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    request: &[u8],
) -> Result<Vec<u8>, std::io::Error> {
    stream.write_all(request)?;
    stream.flush()?;
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while !reply.ends_with(b"\r\n") {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        reply.extend_from_slice(&buf[..n]);
    }
    Ok(reply)
}

const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

#[test]
fn client_certificates_required_checked_and_refused() {
    let pki = pki();
    let server = tls_server(&pki, TlsAuthClients::Yes, true);
    let tls = server.tls_addr().unwrap();
    let mut good = connect(&pki, tls, Some(("client.pem", "client.key")));
    assert_eq!(exchange(&mut good, PING).unwrap(), b"+PONG\r\n");
    let set = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n";
    assert_eq!(exchange(&mut good, set).unwrap(), b"+OK\r\n");
    // A pipeline of many commands in one write, all answered.
    let pipeline: Vec<u8> = PING.repeat(500);
    good.write_all(&pipeline).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    while got.len() < 500 * 7 {
        let n = good.read(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, b"+PONG\r\n".repeat(500));
    // No certificate, or one from another CA: no reply, ever.
    let mut none = connect(&pki, tls, None);
    assert!(exchange(&mut none, PING).is_err());
    let mut rogue = connect(&pki, tls, Some(("rogue.pem", "rogue.key")));
    assert!(exchange(&mut rogue, PING).is_err());
    // The plaintext port serves the same data.
    let mut plain = common::client(&server);
    let value: String = redis::cmd("GET").arg("k").query(&mut plain).unwrap();
    assert_eq!(value, "hello");
    // Garbage on the TLS port closes that connection only.
    let mut garbage = TcpStream::connect(tls).unwrap();
    garbage
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    garbage.write_all(PING).unwrap();
    let mut sink = Vec::new();
    let _ = garbage.read_to_end(&mut sink);
    assert!(!sink.starts_with(b"+PONG"), "{sink:?}");
    assert_eq!(exchange(&mut good, PING).unwrap(), b"+PONG\r\n");
    drop((good, plain));
    server.shutdown();
}

#[test]
fn optional_and_no_client_authentication() {
    let pki = pki();
    let server = tls_server(&pki, TlsAuthClients::Optional, true);
    let tls = server.tls_addr().unwrap();
    let mut anonymous = connect(&pki, tls, None);
    assert_eq!(exchange(&mut anonymous, PING).unwrap(), b"+PONG\r\n");
    let mut known = connect(&pki, tls, Some(("client.pem", "client.key")));
    assert_eq!(exchange(&mut known, PING).unwrap(), b"+PONG\r\n");
    // A certificate that is given is still checked.
    let mut rogue = connect(&pki, tls, Some(("rogue.pem", "rogue.key")));
    assert!(exchange(&mut rogue, PING).is_err());
    drop((anonymous, known));
    server.shutdown();

    let server = tls_server(&pki, TlsAuthClients::No, true);
    let mut anonymous = connect(&pki, server.tls_addr().unwrap(), None);
    assert_eq!(exchange(&mut anonymous, PING).unwrap(), b"+PONG\r\n");
    drop(anonymous);
    server.shutdown();
}

#[test]
fn a_tls_only_server_has_no_plaintext_port() {
    let pki = pki();
    let server = tls_server(&pki, TlsAuthClients::No, false);
    let tls = server.tls_addr().unwrap();
    assert_eq!(server.addr(), tls);
    let mut client = connect(&pki, tls, None);
    let info = b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n";
    client.write_all(info).unwrap();
    let mut text = Vec::new();
    let mut buf = [0u8; 8192];
    while !String::from_utf8_lossy(&text).contains("tcp_port:") {
        let n = client.read(&mut buf).unwrap();
        assert!(n > 0);
        text.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&text);
    assert!(text.contains("tcp_port:0\r\n"), "{text}");
    drop(client);
    server.shutdown();
}

#[test]
fn bad_files_are_named_and_nothing_starts() {
    let pki = pki();
    let config = |cert: &str, key: &str, ca: Option<&str>, auth| ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        shards: 8,
        threads: 1,
        tls: Some(TlsConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            cert_file: pki.path(cert),
            key_file: pki.path(key),
            ca_cert_file: ca.map(|c| pki.path(c)),
            auth_clients: auth,
            protocols: vec![TlsProtocol::Tls13],
        }),
        ..ServerConfig::default()
    };
    let err = Server::start(config(
        "missing.pem",
        "server.key",
        None,
        TlsAuthClients::No,
    ))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("tls-cert-file") && err.contains("missing.pem"),
        "{err}"
    );
    let err = Server::start(config("server.pem", "client.key", None, TlsAuthClients::No))
        .unwrap_err()
        .to_string();
    assert!(err.contains("does not fit"), "{err}");
    let err = Server::start(config(
        "server.pem",
        "server.key",
        None,
        TlsAuthClients::Yes,
    ))
    .unwrap_err()
    .to_string();
    assert!(err.contains("tls-ca-cert-file"), "{err}");
    let err = Server::start(config(
        "server.pem",
        "server.key",
        Some("server.key"),
        TlsAuthClients::Yes,
    ))
    .unwrap_err()
    .to_string();
    assert!(err.contains("tls-ca-cert-file"), "{err}");
}

#[test]
fn redis_cli_speaks_to_the_tls_port() {
    let Ok(help) = std::process::Command::new("redis-cli")
        .arg("--help")
        .output()
    else {
        eprintln!("redis-cli is not installed: the Rust client's tests stand alone");
        return;
    };
    assert!(
        String::from_utf8_lossy(&help.stdout).contains("--tls")
            || String::from_utf8_lossy(&help.stderr).contains("--tls"),
        "this redis-cli has no TLS"
    );
    let pki = pki();
    let server = tls_server(&pki, TlsAuthClients::Yes, true);
    let port = server.tls_addr().unwrap().port().to_string();
    let cli = |args: &[&str]| {
        let ca = pki.path("ca.pem");
        let out = std::process::Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &port, "--tls", "--cacert"])
            .arg(&ca)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
            + String::from_utf8_lossy(&out.stderr).trim()
    };
    let cert = pki.path("client.pem").display().to_string();
    let key = pki.path("client.key").display().to_string();
    assert_eq!(
        cli(&["--cert", &cert, "--key", &key, "set", "greeting", "hi"]),
        "OK"
    );
    assert_eq!(
        cli(&["--cert", &cert, "--key", &key, "get", "greeting"]),
        "hi"
    );
    // Without a client certificate the server refuses it.
    let refused = cli(&["ping"]);
    assert!(!refused.contains("PONG"), "{refused}");
    server.shutdown();
}
