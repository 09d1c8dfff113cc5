//! New connections while a busy script holds the only worker.
//!
//! A script past `busy-reply-threshold` keeps its worker thread until it ends. Clients of
//! the other workers are answered `BUSY` by their workers and can send `SCRIPT KILL`, and the
//! acceptor gives new clients to those workers. A server with one worker has nobody left to
//! answer, so the acceptor answers new clients itself, as Redis answers every client while a
//! script is busy:
//! - `SCRIPT KILL` and `FUNCTION KILL` run;
//! - `SHUTDOWN NOSAVE` stops the script and the server;
//! - `AUTH` and `QUIT` run;
//! - any other command Redis allows during a busy script (`MULTI`, `HELLO`, `FUNCTION STATS`
//!   and the like) waits for the worker, and so does every command after it;
//! - the rest get `BUSY`.
//!
//! Once the script ends, the connection goes to the worker with what it had not yet run. An
//! FCNP client is answered nothing here: its requests wait for the worker.
//! Clients already connected to the busy worker are answered from the script's hook
//! (`parked`), with the same rules ([`busy_step`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use fc_resp::{Limits, RequestParser};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::parked::{Step, busy_step};
use crate::reply::{Reply, Resp};
use crate::shared::{Handover, Job, Shared};

/// How often a connection answered here looks whether the script ended.
const POLL: Duration = Duration::from_millis(10);

/// Uncounts the client from `clients` unless the connection was handed to a worker (whose
/// connection state uncounts it).
struct Counted {
    shared: Arc<Shared>,
    handed: bool,
}

impl Drop for Counted {
    fn drop(&mut self) {
        if !self.handed {
            self.shared.clients.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Answers a new connection of `worker` while a script keeps that worker busy, then hands it
/// to the worker (see the module's documentation). The acceptor counted it in `clients`.
pub(crate) async fn serve(shared: Arc<Shared>, stream: std::net::TcpStream, worker: usize) {
    let mut counted = Counted {
        shared: Arc::clone(&shared),
        handed: false,
    };
    let Ok(mut stream) = tokio::net::TcpStream::from_std(stream) else {
        return;
    };
    let _ = stream.set_nodelay(true);
    let live = &shared.live;
    // The user it is authenticated as (`None`: not yet).
    let mut authed = (!shared.acl.default_needs_auth()).then(|| shared.acl.default_user());
    let mut parser = if authed.is_some() {
        RequestParser::new(live.request_limits())
    } else {
        RequestParser::with_auth_required(live.request_limits(), Limits::unauthenticated())
    };
    let mut rbuf = BytesMut::with_capacity(4096);
    // Commands that wait for the worker, encoded again (the worker parses them first).
    let mut waiting = BytesMut::new();
    let mut args = Vec::new();
    loop {
        // The replies of what can be answered now (the sink is not `Send`: dropped before
        // any wait).
        let (replies, close) = {
            let mut out = Resp::new(1024);
            let mut close = false;
            // Once the script ended, what is left goes to the worker unparsed. An FCNP client
            // (its first byte FCNP's magic) is not answered here: it waits for the worker,
            // which serves it in its protocol.
            while waiting.is_empty()
                && shared.scripts.is_busy()
                && rbuf.first() != Some(&fc_fcnp::MAGIC)
            {
                match parser.parse_into(&mut rbuf, &mut args) {
                    Ok(true) => match answer(&shared, &mut authed, &mut parser, &args, &mut out) {
                        Step::Answered => {}
                        Step::Wait => fc_resp::encode_command(&mut waiting, &args),
                        Step::Close => {
                            close = true;
                            break;
                        }
                    },
                    Ok(false) => break,
                    Err(err) => {
                        err.write_reply(&mut out.buf);
                        close = true;
                        break;
                    }
                }
            }
            (out.buf, close)
        };
        if !replies.is_empty() && stream.write_all(&replies).await.is_err() {
            return;
        }
        if close {
            return;
        }
        if !shared.scripts.is_busy() {
            // The script ended: the worker takes the connection with what it has not run.
            waiting.extend_from_slice(&rbuf);
            let Ok(std_stream) = stream.into_std() else {
                return;
            };
            let handover = Handover {
                pending: waiting,
                authed: authed.is_some(),
                tls: false,
                fcnp: false,
                memcached: false,
                user: authed,
            };
            if shared.inboxes[worker]
                .send(Job::Conn(std_stream, handover))
                .is_ok()
            {
                counted.handed = true;
            }
            return;
        }
        tokio::select! {
            read = stream.read_buf(&mut rbuf) => match read {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            () = tokio::time::sleep(POLL) => {}
        }
        let held = (rbuf.len() + waiting.len()) as u64;
        if held > live.client_query_buffer_limit.load(Ordering::Relaxed) {
            tracing::warn!(
                "closing a client answered during a busy script: query buffer over the limit"
            );
            return;
        }
    }
}

/// Runs or refuses one command of a connection answered during a busy script.
fn answer(
    shared: &Shared,
    authed: &mut Option<Arc<crate::acl::User>>,
    parser: &mut RequestParser,
    args: &[Bytes],
    out: &mut Resp,
) -> Step {
    let name = args[0].to_ascii_lowercase();
    match name.as_slice() {
        b"quit" => {
            out.ok();
            return Step::Close;
        }
        b"auth" => {
            let (name, password) = match args {
                [_, password] => ("default".into(), password),
                [_, user, password] => (String::from_utf8_lossy(user), password),
                _ => {
                    out.error(b"ERR wrong number of arguments for 'auth' command");
                    return Step::Answered;
                }
            };
            match crate::session::check_password(shared, &name, args.len() == 2, password) {
                Ok(who) => {
                    *authed = Some(who);
                    parser.authenticate();
                    out.ok();
                }
                Err(text) => out.error(&text),
            }
            return Step::Answered;
        }
        b"hello" => return Step::Wait,
        _ => {}
    }
    busy_step(shared, authed.is_some(), args, out)
}
