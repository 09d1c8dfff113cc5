//! ACL users end to end: `AUTH user pass` and `HELLO 3 AUTH`, `NOPERM` for commands, keys
//! and channels (also inside `MULTI` and scripts), changes reaching connected clients at
//! once, `DELUSER` closing a user's connections, the ACL log, `requirepass` as the default
//! user's password, and the ACL file across a restart.

mod common;

use common::{Raw, client, start};
use fc_server::{ServerConfig, ServerHandle};
use redis::Value;

fn server_with(requirepass: Option<&str>, acl_file: Option<std::path::PathBuf>) -> ServerHandle {
    start(ServerConfig {
        shards: 8,
        threads: 2,
        requirepass: requirepass.map(String::from),
        acl_file,
        ..ServerConfig::default()
    })
}

fn cmd(con: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<Value> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
}

fn ok(con: &mut redis::Connection, args: &[&str]) {
    let reply = cmd(con, args);
    assert!(reply.is_ok(), "{args:?}: {reply:?}");
}

fn err(con: &mut redis::Connection, args: &[&str]) -> String {
    match cmd(con, args) {
        Ok(v) => panic!("{args:?} answered {v:?}"),
        Err(e) => format!("{} {}", e.code().unwrap_or(""), e.detail().unwrap_or("")),
    }
}

/// A connection authenticated as `user`.
fn login(server: &ServerHandle, user: &str, password: &str) -> redis::Connection {
    let mut con = client(server);
    ok(&mut con, &["AUTH", user, password]);
    con
}

/// The ACL log's newest entries as (reason, context, object, username).
fn log(con: &mut redis::Connection) -> Vec<(String, String, String, String)> {
    let entries: Vec<std::collections::HashMap<String, Value>> =
        redis::cmd("ACL").arg("LOG").query(con).unwrap();
    let text = |e: &std::collections::HashMap<String, Value>, k: &str| match &e[k] {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        other => format!("{other:?}"),
    };
    entries
        .iter()
        .map(|e| {
            (
                text(e, "reason"),
                text(e, "context"),
                text(e, "object"),
                text(e, "username"),
            )
        })
        .collect()
}

#[test]
fn users_are_checked_for_commands_keys_and_channels() {
    let server = server_with(None, None);
    let mut admin = client(&server);
    ok(
        &mut admin,
        &[
            "ACL", "SETUSER", "bob", "on", ">pw", "~app:*", "%R~ro:*", "&news.*", "+get", "+set",
            "+publish", "+multi", "+exec", "+eval",
        ],
    );
    ok(&mut admin, &["SET", "ro:1", "v"]);
    let mut bob = login(&server, "bob", "pw");
    let whoami: String = redis::cmd("ACL").arg("WHOAMI").query(&mut admin).unwrap();
    assert_eq!(whoami, "default");
    ok(&mut bob, &["SET", "app:1", "x"]);
    ok(&mut bob, &["GET", "ro:1"]);
    assert_eq!(
        err(&mut bob, &["SET", "ro:1", "y"]),
        "NOPERM No permissions to access a key"
    );
    assert_eq!(
        err(&mut bob, &["GET", "secret"]),
        "NOPERM No permissions to access a key"
    );
    assert_eq!(
        err(&mut bob, &["DEL", "app:1"]),
        "NOPERM User bob has no permissions to run the 'del' command"
    );
    assert_eq!(
        err(&mut bob, &["ACL", "WHOAMI"]),
        "NOPERM User bob has no permissions to run the 'acl|whoami' command"
    );
    ok(&mut bob, &["PUBLISH", "news.today", "hi"]);
    assert_eq!(
        err(&mut bob, &["PUBLISH", "sports", "hi"]),
        "NOPERM No permissions to access a channel"
    );
    // Inside MULTI a refused command aborts the transaction, as any refusal does.
    ok(&mut bob, &["MULTI"]);
    assert!(err(&mut bob, &["DEL", "app:1"]).starts_with("NOPERM"));
    assert!(err(&mut bob, &["EXEC"]).starts_with("EXECABORT"));
    // Rules that change between MULTI and EXEC: the command is refused at EXEC, with
    // Redis's text, and the others run.
    ok(&mut admin, &["ACL", "SETUSER", "bob", "+incr"]);
    let mut raw = Raw::open(server.addr());
    raw.send(&["AUTH", "bob", "pw"]);
    raw.expect(b"+OK\r\n");
    raw.send(&["MULTI"]);
    raw.send(&["INCR", "app:n"]);
    raw.send(&["SET", "app:2", "y"]);
    raw.expect(b"+OK\r\n+QUEUED\r\n+QUEUED\r\n");
    ok(&mut admin, &["ACL", "SETUSER", "bob", "-incr"]);
    raw.send(&["EXEC"]);
    raw.expect(b"*2\r\n-NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to execute the command or subcommand\r\n+OK\r\n");
    // Inside a script each command is checked.
    let script_err = err(
        &mut bob,
        &["EVAL", "return redis.call('GET', 'secret')", "0"],
    );
    assert!(
        script_err.contains("No permissions to access a key"),
        "{script_err}"
    );
    let got: String = redis::cmd("EVAL")
        .arg("return redis.call('GET', KEYS[1])")
        .arg(1)
        .arg("app:1")
        .query(&mut bob)
        .unwrap();
    assert_eq!(got, "x");
    // The log has each denial, newest first.
    let entries = log(&mut admin);
    let expect = |reason: &str, context: &str, object: &str| {
        (
            reason.into(),
            context.into(),
            object.into(),
            "bob".to_string(),
        )
    };
    assert_eq!(entries[0], expect("key", "lua", "secret"));
    assert_eq!(entries[1], expect("command", "multi", "incr"));
    assert!(entries.contains(&expect("command", "multi", "del")));
    assert!(entries.contains(&expect("channel", "toplevel", "sports")));
    assert!(entries.contains(&expect("command", "toplevel", "acl|whoami")));
    // The same denial again within a minute counts up instead of adding an entry.
    let before = log(&mut admin).len();
    err(&mut bob, &["PUBLISH", "sports", "again"]);
    assert_eq!(log(&mut admin).len(), before);
    // CLIENT LIST names the user.
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut admin).unwrap();
    assert!(list.contains("user=bob"), "{list}");
    drop((bob, admin));
    server.shutdown();
}

#[test]
fn authentication_failures_and_disabled_users() {
    let server = server_with(None, None);
    let mut admin = client(&server);
    // No password on the default user: AUTH <password> says so.
    assert_eq!(
        err(&mut admin, &["AUTH", "pw"]),
        "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
    );
    ok(&mut admin, &["ACL", "SETUSER", "eve", ">pw", "+@all", "~*"]);
    let mut other = client(&server);
    // Off (a new user's default): refused as a wrong password.
    assert_eq!(
        err(&mut other, &["AUTH", "eve", "pw"]),
        "WRONGPASS invalid username-password pair or user is disabled."
    );
    ok(&mut admin, &["ACL", "SETUSER", "eve", "on"]);
    assert_eq!(
        err(&mut other, &["AUTH", "eve", "nope"]),
        "WRONGPASS invalid username-password pair or user is disabled."
    );
    assert_eq!(
        err(&mut other, &["AUTH", "nobody", "pw"]),
        "WRONGPASS invalid username-password pair or user is disabled."
    );
    ok(&mut other, &["AUTH", "eve", "pw"]);
    let entries = log(&mut admin);
    assert_eq!(
        entries[0],
        (
            "auth".into(),
            "toplevel".into(),
            "AUTH".into(),
            "nobody".into()
        )
    );
    // HELLO 3 AUTH: a map back, as the user.
    let mut raw = Raw::open(server.addr());
    raw.send(&["HELLO", "3", "AUTH", "eve", "pw"]);
    let mut reply = [0u8; 2];
    std::io::Read::read_exact(&mut raw.0, &mut reply).unwrap();
    assert_eq!(&reply, b"%7");
    drop((admin, other));
    server.shutdown();
}

#[test]
fn requirepass_is_the_default_users_password() {
    let server = server_with(Some("s3cret"), None);
    let mut con = client(&server);
    assert!(err(&mut con, &["GET", "k"]).starts_with("NOAUTH"));
    ok(&mut con, &["AUTH", "s3cret"]);
    ok(&mut con, &["AUTH", "default", "s3cret"]);
    let list: Vec<String> = redis::cmd("ACL").arg("LIST").query(&mut con).unwrap();
    assert!(list[0].starts_with("user default on #"), "{list:?}");
    ok(&mut con, &["CONFIG", "SET", "requirepass", "other"]);
    let mut fresh = client(&server);
    assert!(err(&mut fresh, &["AUTH", "s3cret"]).starts_with("WRONGPASS"));
    ok(&mut fresh, &["AUTH", "other"]);
    // No password: every new connection is the default user at once.
    ok(&mut con, &["CONFIG", "SET", "requirepass", ""]);
    let mut open = client(&server);
    ok(&mut open, &["SET", "k", "v"]);
    drop((con, fresh, open));
    server.shutdown();
}

#[test]
fn changes_reach_connected_clients_and_deluser_closes_them() {
    let server = server_with(None, None);
    let mut admin = client(&server);
    ok(
        &mut admin,
        &["ACL", "SETUSER", "carl", "on", ">pw", "~*", "+@all"],
    );
    let mut carl = login(&server, "carl", "pw");
    ok(&mut carl, &["SET", "k", "v"]);
    ok(&mut admin, &["ACL", "SETUSER", "carl", "-set"]);
    assert!(err(&mut carl, &["SET", "k", "v"]).starts_with("NOPERM"));
    ok(&mut carl, &["GET", "k"]);
    // The default user restricted: its connections (even on the in-place path) see it.
    let mut plain = client(&server);
    ok(&mut plain, &["GET", "k"]);
    ok(&mut admin, &["ACL", "SETUSER", "default", "-get"]);
    assert!(err(&mut plain, &["GET", "k"]).starts_with("NOPERM"));
    ok(&mut admin, &["ACL", "SETUSER", "default", "+get"]);
    ok(&mut plain, &["GET", "k"]);
    let removed: i64 = redis::cmd("ACL")
        .arg("DELUSER")
        .arg("carl")
        .arg("nobody")
        .query(&mut admin)
        .unwrap();
    assert_eq!(removed, 1);
    assert!(
        cmd(&mut carl, &["PING"]).is_err(),
        "carl's connection is closed"
    );
    assert_eq!(
        err(&mut admin, &["ACL", "DELUSER", "default"]),
        "ERR The 'default' user cannot be removed"
    );
    drop((admin, plain));
    server.shutdown();
}

#[test]
fn bad_rules_change_nothing_and_name_the_rule() {
    let server = server_with(None, None);
    let mut con = client(&server);
    ok(&mut con, &["ACL", "SETUSER", "dan", "on", "+get"]);
    assert_eq!(
        err(&mut con, &["ACL", "SETUSER", "dan", "+set", "+nosuch"]),
        "ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL"
    );
    let list: Vec<String> = redis::cmd("ACL").arg("LIST").query(&mut con).unwrap();
    assert!(
        list.contains(&"user dan on resetchannels -@all +get".to_string()),
        "{list:?}"
    );
    assert_eq!(
        err(&mut con, &["ACL", "SETUSER", "has space"]),
        "ERR Usernames can't contain spaces or null characters"
    );
    assert_eq!(
        err(&mut con, &["ACL", "SAVE"]).split('.').next().unwrap(),
        "ERR This Redis instance is not configured to use an ACL file"
    );
    let dry: String = redis::cmd("ACL")
        .arg("DRYRUN")
        .arg("dan")
        .arg("set")
        .arg("k")
        .arg("v")
        .query(&mut con)
        .unwrap();
    assert_eq!(dry, "User dan has no permissions to run the 'set' command");
    drop(con);
    server.shutdown();
}

#[test]
fn the_acl_file_keeps_users_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users.acl");
    let server = server_with(None, Some(path.clone()));
    let mut con = client(&server);
    ok(
        &mut con,
        &["ACL", "SETUSER", "fay", "on", ">pw", "~f:*", "+@read"],
    );
    ok(&mut con, &["ACL", "SAVE"]);
    drop(con);
    server.shutdown();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("user fay on #"), "{text}");
    assert!(!text.contains("pw "), "passwords are stored hashed");
    let server = server_with(None, Some(path.clone()));
    let mut fay = login(&server, "fay", "pw");
    ok(&mut fay, &["GET", "f:1"]);
    // ACL LOAD: an edited file replaces the users (a bad one changes nothing).
    std::fs::write(
        &path,
        "user default on nopass ~* &* +@all\nuser gus on nopass +@all ~*\n",
    )
    .unwrap();
    let mut admin = client(&server);
    ok(&mut admin, &["ACL", "LOAD"]);
    let users: Vec<String> = redis::cmd("ACL").arg("USERS").query(&mut admin).unwrap();
    assert_eq!(users, ["default", "gus"]);
    assert!(cmd(&mut fay, &["PING"]).is_err(), "fay was removed: closed");
    std::fs::write(
        &path,
        "user default on nopass ~* &* +@all\nuser hal on +nosuch\n",
    )
    .unwrap();
    let e = err(&mut admin, &["ACL", "LOAD"]);
    assert!(e.contains("users.acl:2"), "{e}");
    let users: Vec<String> = redis::cmd("ACL").arg("USERS").query(&mut admin).unwrap();
    assert_eq!(users, ["default", "gus"]);
    drop(admin);
    server.shutdown();
}

#[test]
fn subscribers_whose_channels_are_revoked_are_disconnected() {
    use std::io::Read;
    let server = server_with(None, None);
    let mut admin = client(&server);
    ok(
        &mut admin,
        &[
            "ACL", "SETUSER", "reader", "on", ">pw", "~*", "+@all", "&news.*",
        ],
    );
    ok(
        &mut admin,
        &["ACL", "SETUSER", "fan", "on", ">pw", "~*", "+@all", "&*"],
    );
    let mut revoked = Raw::open(server.addr());
    revoked.send(&["AUTH", "reader", "pw"]);
    revoked.expect(b"+OK\r\n");
    revoked.send(&["SUBSCRIBE", "news.1"]);
    revoked.expect(b"*3\r\n$9\r\nsubscribe\r\n$6\r\nnews.1\r\n:1\r\n");
    let mut kept = Raw::open(server.addr());
    kept.send(&["AUTH", "fan", "pw"]);
    kept.expect(b"+OK\r\n");
    kept.send(&["PSUBSCRIBE", "news.*"]);
    kept.expect(b"*3\r\n$10\r\npsubscribe\r\n$6\r\nnews.*\r\n:1\r\n");
    // A change that still allows the channel keeps the subscriber.
    ok(&mut admin, &["ACL", "SETUSER", "reader", "&sports"]);
    assert!(revoked.silent_for(200), "still subscribed, nothing sent");
    // Revoking it closes the connection, as Redis does; the other subscriber stays.
    ok(
        &mut admin,
        &["ACL", "SETUSER", "reader", "resetchannels", "&sports"],
    );
    let mut rest = Vec::new();
    let _ = revoked.0.read_to_end(&mut rest);
    assert!(rest.is_empty(), "closed without a message: {rest:?}");
    let delivered: i64 = redis::cmd("PUBLISH")
        .arg("news.1")
        .arg("hello")
        .query(&mut admin)
        .unwrap();
    assert_eq!(delivered, 1);
    kept.expect(b"*4\r\n$8\r\npmessage\r\n$6\r\nnews.*\r\n$6\r\nnews.1\r\n$5\r\nhello\r\n");
    server.shutdown();
}
