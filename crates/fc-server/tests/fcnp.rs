//! FCNP on the server: its own port and the RESP port (told apart by the first byte), every
//! opcode against the same keyspace RESP sees, typed replies, pipelining by id, refusals that
//! leave the connection usable, framing errors that end only that connection, authentication,
//! ACLs, transactions, and direct shard ports that make no cross-worker hop.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use common::{client, info_field, start};
use fc_fcnp::{
    Body, Flags, Opcode, Packed, RequestHeader, Response, ResponseDecoder, Value, encode_request,
};
use fc_server::{ServerConfig, ServerHandle};
use fc_shard::{EmbeddedRouteMode, ShardRouter};
use redis::Commands;

/// A blocking FCNP connection for tests.
struct Fcnp {
    stream: TcpStream,
    buf: BytesMut,
    next_id: u32,
}

impl Fcnp {
    fn open(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Self {
            stream,
            buf: BytesMut::new(),
            next_id: 0,
        }
    }

    fn send(&mut self, header: RequestHeader, items: &[&[u8]]) -> u32 {
        let mut wire = BytesMut::new();
        encode_request(&mut wire, &header, items);
        self.stream.write_all(&wire).unwrap();
        header.id
    }

    fn id(&mut self) -> u32 {
        self.next_id += 1;
        self.next_id
    }

    fn recv(&mut self) -> Option<Response> {
        loop {
            if let Some(response) = ResponseDecoder::default().decode(&mut self.buf).unwrap() {
                return Some(response);
            }
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// One request, its response (checked to carry the request's id).
    fn call(&mut self, header: RequestHeader, items: &[&[u8]]) -> Body {
        let id = self.send(header, items);
        let response = self.recv().expect("a response");
        assert_eq!(response.id, id);
        response.body
    }

    fn op(&mut self, opcode: Opcode, items: &[&[u8]]) -> Value {
        let id = self.id();
        match self.call(RequestHeader::new(opcode, id), items) {
            Body::Value(v) => v,
            other => panic!("{other:?}"),
        }
    }

    fn cmd(&mut self, args: &[&str]) -> Value {
        let items: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.op(Opcode::Command, &items)
    }
}

fn bulk(s: &str) -> Value {
    Value::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

fn status(s: &str) -> Value {
    Value::Status(Bytes::copy_from_slice(s.as_bytes()))
}

fn error_text(v: &Value) -> String {
    String::from_utf8_lossy(
        v.as_error()
            .unwrap_or_else(|| panic!("not an error: {v:?}")),
    )
    .into_owned()
}

fn server_with(config: ServerConfig) -> ServerHandle {
    start(ServerConfig {
        shards: 8,
        threads: 2,
        fcnp_bind: Some("127.0.0.1:0".parse().unwrap()),
        ..config
    })
}

#[test]
fn both_ports_serve_the_keyspace_resp_sees() {
    let server = server_with(ServerConfig::default());
    let mut own = Fcnp::open(server.fcnp_addr().unwrap());
    let mut sniffed = Fcnp::open(server.addr());
    let mut resp = client(&server);
    assert_eq!(own.op(Opcode::Set, &[b"k", b"v1"]), status("OK"));
    assert_eq!(sniffed.op(Opcode::Get, &[b"k"]), bulk("v1"));
    let got: String = resp.get("k").unwrap();
    assert_eq!(got, "v1");
    let () = resp.set("r", "from resp").unwrap();
    assert_eq!(own.op(Opcode::Get, &[b"r"]), bulk("from resp"));
    // A RESP client is still served on the main port.
    let pong: String = redis::cmd("PING").query(&mut resp).unwrap();
    assert_eq!(pong, "PONG");
    server.shutdown();
}

#[test]
fn every_opcode_does_what_its_command_does() {
    let server = server_with(ServerConfig::default());
    let mut c = Fcnp::open(server.fcnp_addr().unwrap());
    let mut resp = client(&server);
    // SET with a TTL, NX, XX, GET, KEEPTTL.
    let id = c.id();
    let set = RequestHeader::new(Opcode::Set, id).with_ttl_ms(100_000);
    assert_eq!(c.call(set, &[b"t", b"1"]), Body::Value(status("OK")));
    let pttl: i64 = resp.pttl("t").unwrap();
    assert!(pttl > 90_000 && pttl <= 100_000, "{pttl}");
    let id = c.id();
    let nx = RequestHeader::new(Opcode::Set, id).with_flags(Flags::NX);
    assert_eq!(c.call(nx, &[b"t", b"2"]), Body::Value(Value::Nil));
    let id = c.id();
    let xx =
        RequestHeader::new(Opcode::Set, id).with_flags(Flags::XX | Flags::GET | Flags::KEEPTTL);
    assert_eq!(c.call(xx, &[b"t", b"3"]), Body::Value(bulk("1")));
    assert!(resp.pttl::<_, i64>("t").unwrap() > 0, "KEEPTTL kept it");
    let Value::Int(ttl) = c.op(Opcode::Ttl, &[b"t"]) else {
        panic!("TTL is an integer")
    };
    assert!(ttl > 0 && ttl <= 100_000, "{ttl}");
    assert_eq!(c.op(Opcode::Persist, &[b"t"]), Value::Int(1));
    assert_eq!(c.op(Opcode::Ttl, &[b"t"]), Value::Int(-1));
    let id = c.id();
    let expire = RequestHeader::new(Opcode::Expire, id).with_ttl_ms(50_000);
    assert_eq!(c.call(expire, &[b"t"]), Body::Value(Value::Int(1)));
    let id = c.id();
    let expire_nx = RequestHeader::new(Opcode::Expire, id)
        .with_ttl_ms(10)
        .with_flags(Flags::NX);
    assert_eq!(c.call(expire_nx, &[b"t"]), Body::Value(Value::Int(0)));
    assert_eq!(c.op(Opcode::Ttl, &[b"missing"]), Value::Int(-2));
    // Counters and strings.
    assert_eq!(
        c.op(Opcode::IncrBy, &[b"n", &(-5i64).to_le_bytes()]),
        Value::Int(-5)
    );
    assert_eq!(
        c.op(Opcode::IncrBy, &[b"n", &7i64.to_le_bytes()]),
        Value::Int(2)
    );
    assert_eq!(c.op(Opcode::Append, &[b"s", b"ab"]), Value::Int(2));
    assert_eq!(c.op(Opcode::Append, &[b"s", b"cd"]), Value::Int(4));
    assert_eq!(c.op(Opcode::GetDel, &[b"s"]), bulk("abcd"));
    assert_eq!(c.op(Opcode::Get, &[b"s"]), Value::Nil);
    // Batches.
    assert_eq!(
        c.op(Opcode::MSet, &[b"a", b"1", b"b", b"", b"c", b"333"]),
        status("OK")
    );
    let id = c.id();
    let Body::Packed(packed) = c.call(
        RequestHeader::new(Opcode::MGet, id),
        &[b"a", b"nope", b"b", b"c"],
    ) else {
        panic!("MGET replies packed");
    };
    let values: Vec<Option<&[u8]>> = packed.iter().collect();
    assert_eq!(values, [Some(&b"1"[..]), None, Some(b""), Some(b"333")]);
    assert_eq!(&packed.data[..], b"1333", "the values share one buffer");
    assert_eq!(c.op(Opcode::Exists, &[b"a", b"b", b"nope"]), Value::Int(2));
    assert_eq!(c.op(Opcode::Del, &[b"a", b"b", b"nope"]), Value::Int(2));
    // A string opcode on another type gets Redis's error, as a value.
    let () = resp.hset("h", "f", "v").unwrap();
    assert!(error_text(&c.op(Opcode::Get, &[b"h"])).starts_with("WRONGTYPE"));
    // MGET of a wrong type is nil, as in Redis; an MGET error (arity) comes as a value.
    let id = c.id();
    let Body::Packed(p) = c.call(RequestHeader::new(Opcode::MGet, id), &[b"h"]) else {
        panic!()
    };
    assert_eq!(p.get(0), None);
    assert_eq!(p, Packed::decode(p_bytes(&p)).unwrap());
    server.shutdown();
}

/// A packed batch's body again (for the round trip above).
fn p_bytes(p: &Packed) -> Bytes {
    let mut body = BytesMut::new();
    body.extend_from_slice(&(p.len() as u32).to_le_bytes());
    for len in &p.lens {
        body.extend_from_slice(&len.to_le_bytes());
    }
    body.extend_from_slice(&p.data);
    body.freeze()
}

#[test]
fn any_command_comes_back_typed() {
    let server = server_with(ServerConfig::default());
    let mut c = Fcnp::open(server.fcnp_addr().unwrap());
    assert_eq!(c.cmd(&["PING"]), status("PONG"));
    assert_eq!(c.cmd(&["HSET", "h", "f", "v", "g", "w"]), Value::Int(2));
    assert_eq!(
        c.cmd(&["HGETALL", "h"]),
        Value::Map(vec![(bulk("f"), bulk("v")), (bulk("g"), bulk("w"))])
    );
    assert_eq!(c.cmd(&["SADD", "s", "x"]), Value::Int(1));
    assert_eq!(c.cmd(&["SMEMBERS", "s"]), Value::Set(vec![bulk("x")]));
    assert_eq!(c.cmd(&["ZADD", "z", "1.5", "m"]), Value::Int(1));
    assert_eq!(
        c.cmd(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        Value::Array(vec![Value::Array(vec![bulk("m"), Value::Double(1.5)])])
    );
    assert_eq!(c.cmd(&["ZSCORE", "z", "m"]), Value::Double(1.5));
    assert_eq!(c.cmd(&["ZSCORE", "z", "nope"]), Value::Nil);
    assert_eq!(
        c.cmd(&["EVAL", "return {1, 'two', {ok='fine'}}", "0"]),
        Value::Array(vec![Value::Int(1), bulk("two"), status("fine")])
    );
    assert_eq!(c.cmd(&["EVAL", "return true", "0"]), Value::Int(1));
    let Value::Verbatim { format, text } = c.cmd(&["INFO", "server"]) else {
        panic!("INFO is a verbatim text");
    };
    assert_eq!(&format, b"txt");
    assert!(text.starts_with(b"# Server"));
    assert!(error_text(&c.cmd(&["NOSUCHCOMMAND"])).starts_with("ERR unknown command"));
    assert!(error_text(&c.cmd(&["GET"])).starts_with("ERR wrong number of arguments"));
    // A transaction, command by command.
    assert_eq!(c.cmd(&["MULTI"]), status("OK"));
    assert_eq!(c.cmd(&["INCR", "n"]), status("QUEUED"));
    assert_eq!(c.cmd(&["INCR", "n"]), status("QUEUED"));
    assert_eq!(
        c.cmd(&["EXEC"]),
        Value::Array(vec![Value::Int(1), Value::Int(2)])
    );
    // The connection speaks RESP3 underneath: HELLO says so.
    let Value::Map(hello) = c.cmd(&["HELLO"]) else {
        panic!()
    };
    assert!(hello.contains(&(bulk("proto"), Value::Int(3))));
    server.shutdown();
}

#[test]
fn pipelined_requests_come_back_by_id() {
    let server = server_with(ServerConfig::default());
    let mut c = Fcnp::open(server.fcnp_addr().unwrap());
    let mut wire = BytesMut::new();
    // Ids need not be in order: a client picks them.
    let ids: Vec<u32> = (0..2000u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    for (i, id) in ids.iter().enumerate() {
        let key = format!("key:{}", (i / 2) % 100);
        let value = format!("{i}");
        let header = if i % 2 == 0 {
            RequestHeader::new(Opcode::Set, *id)
        } else {
            RequestHeader::new(Opcode::Get, *id)
        };
        if i % 2 == 0 {
            encode_request(&mut wire, &header, &[key.as_bytes(), value.as_bytes()]);
        } else {
            encode_request(&mut wire, &header, &[key.as_bytes()]);
        }
    }
    c.stream.write_all(&wire).unwrap();
    for (i, id) in ids.iter().enumerate() {
        let response = c.recv().unwrap();
        assert_eq!(response.id, *id);
        let want = if i % 2 == 0 {
            status("OK")
        } else {
            bulk(&format!("{}", i - 1))
        };
        assert_eq!(response.body, Body::Value(want));
    }
    server.shutdown();
}

#[test]
fn refusals_answer_and_keep_the_connection() {
    let server = server_with(ServerConfig::default());
    let mut c = Fcnp::open(server.fcnp_addr().unwrap());
    let id = c.id();
    let unknown = RequestHeader {
        opcode: 0x7e,
        ..RequestHeader::new(Opcode::Get, id)
    };
    let Body::Value(v) = c.call(unknown, &[b"k"]) else {
        panic!()
    };
    assert_eq!(error_text(&v), "ERR unknown FCNP opcode 0x7e");
    assert!(error_text(&c.cmd(&["SUBSCRIBE", "ch"])).contains("not available over FCNP"));
    assert!(error_text(&c.cmd(&["CLIENT", "TRACKING", "on"])).contains("not available over FCNP"));
    assert!(error_text(&c.op(Opcode::Get, &[b"a", b"b"])).contains("wrong number of items"));
    // A route hash the server disagrees with is refused; the right one is served.
    let router = ShardRouter::new(8, EmbeddedRouteMode::Namespaced);
    let route = router.route_key(b"user:1").route_hash();
    let id = c.id();
    let wrong = RequestHeader::new(Opcode::Get, id).with_route(route ^ 1);
    let Body::Value(v) = c.call(wrong, &[b"user:1"]) else {
        panic!()
    };
    assert!(error_text(&v).contains("route hash"));
    let id = c.id();
    let right = RequestHeader::new(Opcode::Set, id).with_route(route);
    assert_eq!(c.call(right, &[b"user:1", b"u"]), Body::Value(status("OK")));
    assert_eq!(c.op(Opcode::Get, &[b"user:1"]), bulk("u"));
    server.shutdown();
}

#[test]
fn a_framing_error_ends_that_connection_only() {
    let server = server_with(ServerConfig::default());
    let mut good = Fcnp::open(server.fcnp_addr().unwrap());
    assert_eq!(good.op(Opcode::Set, &[b"k", b"v"]), status("OK"));
    // A RESP client on the FCNP port: told in an FCNP fatal frame, then closed.
    let mut bad = Fcnp::open(server.fcnp_addr().unwrap());
    bad.stream.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let fatal = bad.recv().unwrap();
    assert_eq!(
        fatal.body,
        Body::Fatal("FCNP protocol error: bad magic byte 0x2a".into())
    );
    assert!(bad.recv().is_none(), "closed after the fatal frame");
    // A body over the limit is refused from its header, before it is sent.
    let mut huge = Fcnp::open(server.addr());
    let mut head = vec![0xFC, 1, 0x20, 0, 1, 0, 0, 0, 1, 0, 0, 0];
    head.extend_from_slice(&u32::MAX.to_le_bytes());
    huge.stream.write_all(&head).unwrap();
    let Body::Fatal(text) = huge.recv().unwrap().body else {
        panic!()
    };
    assert!(text.contains("exceeds the limit"), "{text}");
    // A version from the future.
    let mut future = Fcnp::open(server.addr());
    future
        .stream
        .write_all(&[0xFC, 9, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
        .unwrap();
    assert!(matches!(future.recv().unwrap().body, Body::Fatal(_)));
    // The other client and the data are untouched.
    assert_eq!(good.op(Opcode::Get, &[b"k"]), bulk("v"));
    server.shutdown();
}

#[test]
fn authentication_and_acls_apply_to_fcnp() {
    let server = server_with(ServerConfig {
        requirepass: Some("secret".into()),
        ..ServerConfig::default()
    });
    let mut c = Fcnp::open(server.fcnp_addr().unwrap());
    assert!(error_text(&c.op(Opcode::Get, &[b"k"])).starts_with("NOAUTH"));
    // Before AUTH, Redis's small limits: 11 items end the connection.
    let mut greedy = Fcnp::open(server.fcnp_addr().unwrap());
    let items: Vec<&[u8]> = vec![b"x"; 11];
    let id = greedy.id();
    greedy.send(RequestHeader::new(Opcode::Del, id), &items);
    assert!(matches!(greedy.recv().unwrap().body, Body::Fatal(_)));
    assert_eq!(c.cmd(&["AUTH", "secret"]), status("OK"));
    assert_eq!(c.op(Opcode::Set, &[b"k", b"v"]), status("OK"));
    // After AUTH, the full limits.
    let many: Vec<String> = (0..100)
        .map(|i| format!("k{i}"))
        .chain(["k".into()])
        .collect();
    let many: Vec<&[u8]> = many.iter().map(|k| k.as_bytes()).collect();
    assert_eq!(c.op(Opcode::Del, &many), Value::Int(1));
    assert_eq!(
        c.cmd(&["ACL", "SETUSER", "reader", "on", ">pw", "~*", "+@read"]),
        status("OK")
    );
    let mut reader = Fcnp::open(server.addr());
    assert_eq!(reader.cmd(&["AUTH", "reader", "pw"]), status("OK"));
    assert_eq!(reader.op(Opcode::Get, &[b"k"]), Value::Nil);
    assert!(error_text(&reader.op(Opcode::Set, &[b"k", b"v"])).starts_with("NOPERM"));
    server.shutdown();
}

#[test]
fn direct_shard_ports_reach_the_owner_with_no_hop() {
    let server = server_with(ServerConfig {
        direct_shard_ports: Some(None),
        ..ServerConfig::default()
    });
    let direct = server.direct_addrs().to_vec();
    assert_eq!(direct.len(), 8);
    let router = ShardRouter::new(8, EmbeddedRouteMode::Namespaced);
    let mut resp = client(&server);
    let hops = |resp: &mut redis::Connection| info_field(resp, "stats", "cross_worker_hops");
    let mut conns: Vec<Fcnp> = direct.iter().map(|a| Fcnp::open(*a)).collect();
    let before = hops(&mut resp);
    for i in 0..400 {
        let key = format!("key:{i}");
        let route = router.route_key(key.as_bytes());
        let c = &mut conns[router.shard_of(&route)];
        let id = c.id();
        let set = RequestHeader::new(Opcode::Set, id).with_route(route.route_hash());
        assert_eq!(
            c.call(set, &[key.as_bytes(), b"v"]),
            Body::Value(status("OK"))
        );
        let id = c.id();
        let get = RequestHeader::new(Opcode::Get, id).with_route(route.route_hash());
        assert_eq!(c.call(get, &[key.as_bytes()]), Body::Value(bulk("v")));
    }
    assert_eq!(
        hops(&mut resp),
        before,
        "no cross-worker hop on direct ports"
    );
    // RESP on a direct port too.
    let route = router.route_key(b"key:1");
    let mut on_shard = redis::Client::open(format!("redis://{}/", direct[router.shard_of(&route)]))
        .unwrap()
        .get_connection()
        .unwrap();
    let got: String = on_shard.get("key:1").unwrap();
    assert_eq!(got, "v");
    assert_eq!(hops(&mut resp), before);
    // The fanout port hops for keys of the other worker: the counter is live.
    let mut fanout = Fcnp::open(server.fcnp_addr().unwrap());
    for i in 0..400 {
        let key = format!("key:{i}");
        assert_eq!(fanout.op(Opcode::Get, &[key.as_bytes()]), bulk("v"));
    }
    assert!(hops(&mut resp) > before);
    server.shutdown();
}

#[test]
fn an_fcnp_client_arriving_during_a_busy_script_waits_for_the_worker() {
    let server = start(ServerConfig {
        shards: 1,
        threads: 1,
        busy_reply_threshold_ms: 50,
        ..ServerConfig::default()
    });
    let url = format!("redis://{}/", server.addr());
    let runner = std::thread::spawn(move || {
        let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
        redis::cmd("EVAL")
            .arg("local i = 0 while true do i = i + 1 end")
            .arg(0)
            .query::<redis::Value>(&mut con)
    });
    std::thread::sleep(Duration::from_millis(300));
    // The only worker runs the script: the acceptor answers RESP clients itself; an FCNP
    // client's request waits for the worker instead of being read as RESP. (Request id 10
    // with the route flag: the frame's fifth byte is a newline with no NUL before it, so a RESP
    // parser would take its first bytes as an inline command.)
    let mut fcnp = Fcnp::open(server.addr());
    let id = 10;
    let route = ShardRouter::new(1, EmbeddedRouteMode::Namespaced)
        .route_key(b"k")
        .route_hash();
    fcnp.send(
        RequestHeader::new(Opcode::Get, id).with_route(route),
        &[b"k"],
    );
    std::thread::sleep(Duration::from_millis(100));
    let mut resp = client(&server);
    let killed: String = redis::cmd("SCRIPT").arg("KILL").query(&mut resp).unwrap();
    assert_eq!(killed, "OK");
    assert!(runner.join().unwrap().is_err(), "the script was killed");
    let response = fcnp.recv().expect("served once the worker is free");
    assert_eq!(response.id, id);
    assert_eq!(response.body, Body::Value(Value::Nil));
    server.shutdown();
}
