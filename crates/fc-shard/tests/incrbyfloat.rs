//! `INCRBYFLOAT` and `HINCRBYFLOAT` against replies captured from redis-server 7.0.15 on x86-64.
//!
//! `fixtures/incrbyfloat/redis7.txt` (written by `fixtures/incrbyfloat/gen.py`, which documents
//! the format) holds sequences of increments from random starting values — short decimals,
//! integers near 2^63 and 2^64, exponents, many digits, hexadecimal, values near the ends of
//! the `long double` range, invalid texts — with the exact reply Redis gave to each. This test
//! replays them through the store API and requires every reply byte for byte, and the stored
//! value to be the reply.
//!
//! `INCRBYFLOAT_FIXTURE=path cargo test -p fc-shard --test incrbyfloat -- --ignored` replays
//! another capture (for example `gen.py PORT 11 200000 wide`).

use fc_shard::EmbeddedStore;

/// The error letters of the fixture and Redis's texts.
const ERRORS: [(&str, &str); 5] = [
    ("!F", "ERR value is not a valid float"),
    ("!N", "ERR increment would produce NaN or Infinity"),
    ("!I", "ERR value is NaN or Infinity"),
    ("!H", "ERR hash value is not a float"),
    (
        "!W",
        "WRONGTYPE Operation against a key holding the wrong kind of value",
    ),
];

/// Replays a capture; the number of replies compared.
fn replay(text: &str) -> usize {
    let store = EmbeddedStore::new(2);
    let mut checked = 0;
    let mut failures = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.split('\t');
        let kind = fields.next().expect("a kind");
        store.delete(b"k");
        store.delete(b"h");
        match kind {
            "s" | "x" => store.set(b"k", fields.next().expect("a start").as_bytes(), None),
            "h" => {
                let start = fields.next().expect("a start").as_bytes();
                store.hset(b"h", &[(b"f", start)]).expect("a hash");
            }
            "w" => {
                store.rpush(b"k", &[b"x"]).expect("a list");
            }
            "n" | "m" => {}
            other => panic!("line {}: unknown kind {other:?}", number + 1),
        }
        while let Some(increment) = fields.next() {
            let want = fields.next().expect("a reply after each increment");
            let increment = increment.as_bytes();
            let (got, stored) = match kind {
                "s" | "n" | "w" => (
                    store.incr_by_float(b"k", increment),
                    store.get(b"k").unwrap_or_default(),
                ),
                "h" | "m" => (
                    store.hincrbyfloat(b"h", b"f", increment),
                    store.hget(b"h", b"f").ok().flatten().unwrap_or_default(),
                ),
                _ => (store.hincrbyfloat(b"k", b"f", increment), Vec::new()),
            };
            let got = match got {
                Ok(value) => {
                    if value != stored {
                        failures.push(format!("line {}: stored differs from reply", number + 1));
                    }
                    String::from_utf8(value).expect("ASCII")
                }
                Err(e) => {
                    let text = e.to_string();
                    ERRORS
                        .iter()
                        .find(|(_, message)| *message == text)
                        .map_or(text, |(code, _)| (*code).to_owned())
                }
            };
            checked += 1;
            if got != want {
                failures.push(format!(
                    "line {}: {} {:?}: Redis {want:?}, here {got:?}",
                    number + 1,
                    kind,
                    String::from_utf8_lossy(increment)
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} replies differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    checked
}

#[test]
fn replies_match_redis_7_0() {
    let checked = replay(include_str!("fixtures/incrbyfloat/redis7.txt"));
    assert!(checked > 3000, "only {checked} replies");
}

#[test]
#[ignore = "needs INCRBYFLOAT_FIXTURE=path to a capture from fixtures/incrbyfloat/gen.py"]
fn replies_match_external_capture() {
    let path = std::env::var("INCRBYFLOAT_FIXTURE").expect("INCRBYFLOAT_FIXTURE");
    let text = std::fs::read_to_string(&path).expect("readable capture");
    let checked = replay(&text);
    eprintln!("{checked} replies from {path} match");
}
