//! memcached's text and meta protocols, sans-IO: one command at a time off the front of a read
//! buffer, with memcached's limits and error lines.

use bytes::Bytes;

/// Longest key memcached accepts.
pub(crate) const KEY_MAX: usize = 250;
/// Longest command line read before the connection is refused (memcached reads 2 KiB lines
/// and up to its read buffer for long `get`s).
pub(crate) const LINE_MAX: usize = 64 * 1024;

/// `set`'s family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreOp {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    Cas,
}

impl StoreOp {
    pub(crate) fn name(self) -> &'static [u8] {
        match self {
            Self::Set => b"set",
            Self::Add => b"add",
            Self::Replace => b"replace",
            Self::Append => b"append",
            Self::Prepend => b"prepend",
            Self::Cas => b"cas",
        }
    }
}

/// One meta flag: its letter and its token (`T30` → `(b'T', "30")`).
pub(crate) type MetaFlag = (u8, Bytes);

/// A parsed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    /// `get`, `gets` (`cas`), `gat`, `gats` (`touch`: the new exptime).
    Get {
        keys: Vec<Bytes>,
        cas: bool,
        touch: Option<i64>,
    },
    /// The storage commands.
    Store {
        op: StoreOp,
        key: Bytes,
        flags: u32,
        exptime: i64,
        data: Bytes,
        cas: u64,
        noreply: bool,
    },
    /// `incr` / `decr`.
    Delta {
        incr: bool,
        key: Bytes,
        delta: u64,
        noreply: bool,
    },
    Touch {
        key: Bytes,
        exptime: i64,
        noreply: bool,
    },
    Delete {
        key: Bytes,
        noreply: bool,
    },
    FlushAll {
        delay: i64,
        noreply: bool,
    },
    Version,
    Verbosity {
        noreply: bool,
    },
    Quit,
    Stats(Option<Bytes>),
    /// `mg key flags...`
    MetaGet {
        key: Bytes,
        flags: Vec<MetaFlag>,
    },
    /// `ms key datalen flags...` and its data.
    MetaSet {
        key: Bytes,
        data: Bytes,
        flags: Vec<MetaFlag>,
    },
    /// `md key flags...`
    MetaDelete {
        key: Bytes,
        flags: Vec<MetaFlag>,
    },
    /// `ma key flags...`
    MetaArithmetic {
        key: Bytes,
        flags: Vec<MetaFlag>,
    },
    /// `mn`
    MetaNoop,
    /// `me key`
    MetaDebug {
        key: Bytes,
    },
}

/// What a malformed command gets: its error line, the bytes it used, and data bytes to skip
/// after it (a storage command's block that is not read: memcached "swallows" it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The reply line (with `\r\n`).
    pub(crate) line: &'static [u8],
    /// Bytes of the buffer used.
    pub(crate) used: usize,
    /// Bytes still to skip after them.
    pub(crate) swallow: usize,
    /// The connection ends after the reply.
    pub(crate) close: bool,
}

pub(crate) const ERROR: &[u8] = b"ERROR\r\n";
pub(crate) const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";
pub(crate) const BAD_CHUNK: &[u8] = b"CLIENT_ERROR bad data chunk\r\n";
pub(crate) const TOO_LARGE: &[u8] = b"SERVER_ERROR object too large for cache\r\n";
pub(crate) const LINE_TOO_LONG: &[u8] = b"CLIENT_ERROR line too long\r\n";
pub(crate) const BAD_DELTA: &[u8] = b"CLIENT_ERROR invalid numeric delta argument\r\n";
pub(crate) const BAD_EXPTIME: &[u8] = b"CLIENT_ERROR invalid exptime argument\r\n";
pub(crate) const BAD_DELETE: &[u8] =
    b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n";
pub(crate) const BAD_FLAG: &[u8] = b"CLIENT_ERROR invalid or duplicate flag\r\n";
pub(crate) const KEY_TOO_LONG: &[u8] = b"CLIENT_ERROR bad command line format\r\n";

fn refuse(line: &'static [u8], used: usize) -> Refusal {
    Refusal {
        line,
        used,
        swallow: 0,
        close: false,
    }
}

fn number<T: std::str::FromStr>(token: &[u8]) -> Option<T> {
    std::str::from_utf8(token).ok()?.parse().ok()
}

fn key_ok(key: &[u8]) -> bool {
    !key.is_empty() && key.len() <= KEY_MAX && !key.iter().any(|&b| b <= b' ' || b == 0x7f)
}

/// Parses one command off the front of `buf` (`item_max`: the largest value accepted, as
/// memcached's `-I`): `Ok(None)` while incomplete.
///
/// # Errors
/// A [`Refusal`] to answer (and the bytes to skip).
pub(crate) fn parse(buf: &Bytes, item_max: usize) -> Result<Option<(Command, usize)>, Refusal> {
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() > LINE_MAX {
            return Err(Refusal {
                line: LINE_TOO_LONG,
                used: buf.len(),
                swallow: 0,
                close: true,
            });
        }
        return Ok(None);
    };
    let used = nl + 1;
    let line_end = if nl > 0 && buf[nl - 1] == b'\r' {
        nl - 1
    } else {
        nl
    };
    let line = buf.slice(..line_end);
    let tokens: Vec<Bytes> = line
        .split(|&b| b == b' ')
        .filter(|t| !t.is_empty())
        .map(|t| line.slice_ref(t))
        .collect();
    let Some(name) = tokens.first() else {
        return Err(refuse(ERROR, used));
    };
    let args = &tokens[1..];
    let noreply_at = |i: usize| args.get(i).is_some_and(|t| &t[..] == b"noreply");
    let command = match &name[..] {
        b"get" | b"gets" | b"gat" | b"gats" => {
            let touch = name.starts_with(b"gat");
            let (exptime, keys) = if touch {
                let Some(first) = args.first() else {
                    return Err(refuse(ERROR, used));
                };
                let Some(exptime) = number::<i64>(first) else {
                    return Err(refuse(BAD_EXPTIME, used));
                };
                (Some(exptime), &args[1..])
            } else {
                (None, args)
            };
            if keys.is_empty() {
                return Err(refuse(ERROR, used));
            }
            if keys.iter().any(|k| !key_ok(k)) {
                return Err(refuse(KEY_TOO_LONG, used));
            }
            Command::Get {
                keys: keys.to_vec(),
                cas: name.ends_with(b"s"),
                touch: exptime,
            }
        }
        b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas" => {
            let op = match &name[..] {
                b"set" => StoreOp::Set,
                b"add" => StoreOp::Add,
                b"replace" => StoreOp::Replace,
                b"append" => StoreOp::Append,
                b"prepend" => StoreOp::Prepend,
                _ => StoreOp::Cas,
            };
            let want = if op == StoreOp::Cas { 5 } else { 4 };
            if args.len() != want && !(args.len() == want + 1 && noreply_at(want)) {
                return Err(refuse(ERROR, used));
            }
            let key = &args[0];
            if !key_ok(key) {
                return Err(refuse(KEY_TOO_LONG, used));
            }
            let (Some(flags), Some(exptime), Some(len)) = (
                number::<u32>(&args[1]),
                number::<i64>(&args[2]),
                number::<i64>(&args[3]),
            ) else {
                return Err(refuse(BAD_FORMAT, used));
            };
            let cas = if op == StoreOp::Cas {
                match number::<u64>(&args[4]) {
                    Some(cas) => cas,
                    None => return Err(refuse(BAD_FORMAT, used)),
                }
            } else {
                0
            };
            let Ok(len) = usize::try_from(len) else {
                return Err(refuse(BAD_FORMAT, used));
            };
            let Some(data) = data_block(buf, used, len, item_max)? else {
                return Ok(None);
            };
            return Ok(Some((
                Command::Store {
                    op,
                    key: key.clone(),
                    flags,
                    exptime,
                    data,
                    cas,
                    noreply: noreply_at(want),
                },
                used + len + 2,
            )));
        }
        b"incr" | b"decr" => {
            if args.len() != 2 && !(args.len() == 3 && noreply_at(2)) {
                return Err(refuse(ERROR, used));
            }
            if !key_ok(&args[0]) {
                return Err(refuse(KEY_TOO_LONG, used));
            }
            let Some(delta) = number::<u64>(&args[1]) else {
                return Err(refuse(BAD_DELTA, used));
            };
            Command::Delta {
                incr: &name[..] == b"incr",
                key: args[0].clone(),
                delta,
                noreply: noreply_at(2),
            }
        }
        b"touch" => {
            if args.len() != 2 && !(args.len() == 3 && noreply_at(2)) {
                return Err(refuse(ERROR, used));
            }
            if !key_ok(&args[0]) {
                return Err(refuse(KEY_TOO_LONG, used));
            }
            let Some(exptime) = number::<i64>(&args[1]) else {
                return Err(refuse(BAD_EXPTIME, used));
            };
            Command::Touch {
                key: args[0].clone(),
                exptime,
                noreply: noreply_at(2),
            }
        }
        b"delete" => {
            let noreply = args.last().is_some_and(|t| &t[..] == b"noreply");
            let rest = args.len() - usize::from(noreply);
            if rest == 0 || rest > 2 {
                return Err(refuse(ERROR, used));
            }
            if rest == 2 && &args[1][..] != b"0" {
                return Err(refuse(BAD_DELETE, used));
            }
            if !key_ok(&args[0]) {
                return Err(refuse(KEY_TOO_LONG, used));
            }
            Command::Delete {
                key: args[0].clone(),
                noreply,
            }
        }
        b"flush_all" => {
            let noreply = args.last().is_some_and(|t| &t[..] == b"noreply");
            let rest = &args[..args.len() - usize::from(noreply)];
            let delay = match rest {
                [] => 0,
                [delay] => match number::<i64>(delay) {
                    Some(d) => d,
                    None => return Err(refuse(BAD_FORMAT, used)),
                },
                _ => return Err(refuse(ERROR, used)),
            };
            Command::FlushAll { delay, noreply }
        }
        b"version" => Command::Version,
        b"verbosity" => {
            if args.is_empty() || args.len() > 2 {
                return Err(refuse(ERROR, used));
            }
            Command::Verbosity {
                noreply: args.last().is_some_and(|t| &t[..] == b"noreply"),
            }
        }
        b"quit" => Command::Quit,
        b"stats" => Command::Stats(args.first().cloned()),
        b"mn" => Command::MetaNoop,
        b"mg" | b"md" | b"ma" | b"me" => {
            let Some(key) = args.first() else {
                return Err(refuse(BAD_FORMAT, used));
            };
            if !key_ok(key) {
                return Err(refuse(KEY_TOO_LONG, used));
            }
            let flags = meta_flags(&args[1..]).ok_or_else(|| refuse(BAD_FLAG, used))?;
            let key = key.clone();
            match &name[..] {
                b"mg" => Command::MetaGet { key, flags },
                b"md" => Command::MetaDelete { key, flags },
                b"ma" => Command::MetaArithmetic { key, flags },
                _ => Command::MetaDebug { key },
            }
        }
        b"ms" => {
            let (Some(key), Some(len)) = (args.first(), args.get(1)) else {
                return Err(refuse(BAD_FORMAT, used));
            };
            if !key_ok(key) {
                return Err(refuse(KEY_TOO_LONG, used));
            }
            let Some(len) = number::<usize>(len) else {
                return Err(refuse(BAD_FORMAT, used));
            };
            let flags = meta_flags(&args[2..]).ok_or_else(|| refuse(BAD_FLAG, used))?;
            let Some(data) = data_block(buf, used, len, item_max)? else {
                return Ok(None);
            };
            return Ok(Some((
                Command::MetaSet {
                    key: key.clone(),
                    data,
                    flags,
                },
                used + len + 2,
            )));
        }
        _ => return Err(refuse(ERROR, used)),
    };
    Ok(Some((command, used)))
}

/// A storage command's data block of `len` bytes after its line (`used` bytes): `None` until
/// it and its `\r\n` are all here.
///
/// # Errors
/// Over `item_max`: memcached's refusal, the block to be skipped; a block not followed by
/// `\r\n`: `bad data chunk`.
fn data_block(
    buf: &Bytes,
    used: usize,
    len: usize,
    item_max: usize,
) -> Result<Option<Bytes>, Refusal> {
    if len > item_max {
        return Err(Refusal {
            line: TOO_LARGE,
            used,
            swallow: len + 2,
            close: false,
        });
    }
    if buf.len() < used + len + 2 {
        return Ok(None);
    }
    if &buf[used + len..used + len + 2] != b"\r\n" {
        return Err(Refusal {
            line: BAD_CHUNK,
            used: used + len + 2,
            swallow: 0,
            close: false,
        });
    }
    Ok(Some(buf.slice(used..used + len)))
}

/// Meta flags: a letter, then its token (`T30`, `O123`, `v`); `None` for a token that does not
/// start with a letter.
fn meta_flags(tokens: &[Bytes]) -> Option<Vec<MetaFlag>> {
    tokens
        .iter()
        .map(|t| {
            let letter = *t.first()?;
            letter.is_ascii_alphabetic().then(|| (letter, t.slice(1..)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(input: &[u8]) -> Result<Option<(Command, usize)>, Refusal> {
        parse(&Bytes::copy_from_slice(input), 1 << 20)
    }

    #[test]
    fn text_commands_parse_with_memcacheds_rules() {
        let (cmd, used) = one(b"set k 5 100 3\r\nabc\r\nget k\r\n").unwrap().unwrap();
        assert_eq!(used, 20);
        assert!(matches!(
            cmd,
            Command::Store {
                op: StoreOp::Set,
                flags: 5,
                exptime: 100,
                noreply: false,
                ..
            }
        ));
        assert_eq!(
            one(b"set k 0 0 3\r\nab").unwrap(),
            None,
            "data not all here"
        );
        let (cmd, _) = one(b"gats 60 a b\n").unwrap().unwrap();
        assert_eq!(
            cmd,
            Command::Get {
                keys: vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")],
                cas: true,
                touch: Some(60)
            }
        );
        let (cmd, _) = one(b"cas k 0 0 1 77 noreply\r\nx\r\n").unwrap().unwrap();
        assert!(matches!(
            cmd,
            Command::Store {
                op: StoreOp::Cas,
                cas: 77,
                noreply: true,
                ..
            }
        ));
        assert!(matches!(
            one(b"incr n 18446744073709551615\r\n").unwrap().unwrap().0,
            Command::Delta {
                incr: true,
                delta: u64::MAX,
                ..
            }
        ));
        let (cmd, _) = one(b"mg foo s v t Oab\r\n").unwrap().unwrap();
        let Command::MetaGet { flags, .. } = cmd else {
            panic!()
        };
        assert_eq!(flags.iter().map(|f| f.0).collect::<Vec<_>>(), b"svtO");
        assert_eq!(&flags[3].1[..], b"ab");
    }

    #[test]
    fn refusals_carry_memcacheds_lines() {
        assert_eq!(one(b"bogus\r\n").unwrap_err().line, ERROR);
        assert_eq!(one(b"\r\n").unwrap_err().line, ERROR);
        assert_eq!(one(b"set k x 0 1\r\nx\r\n").unwrap_err().line, BAD_FORMAT);
        assert_eq!(
            one(b"set k 4294967296 0 1\r\nx\r\n").unwrap_err().line,
            BAD_FORMAT
        );
        assert_eq!(one(b"set k 0 0 1\r\nxyz\r\n").unwrap_err().line, BAD_CHUNK);
        assert_eq!(one(b"incr k -1\r\n").unwrap_err().line, BAD_DELTA);
        assert_eq!(one(b"touch k x\r\n").unwrap_err().line, BAD_EXPTIME);
        assert_eq!(one(b"delete k 5\r\n").unwrap_err().line, BAD_DELETE);
        let long = format!("get {}\r\n", "k".repeat(251));
        assert_eq!(one(long.as_bytes()).unwrap_err().line, KEY_TOO_LONG);
        let big = parse(&Bytes::from_static(b"set k 0 0 10\r\n"), 5).unwrap_err();
        assert_eq!((big.line, big.used, big.swallow), (TOO_LARGE, 14, 12));
        let endless = vec![b'a'; LINE_MAX + 1];
        assert!(one(&endless).unwrap_err().close);
    }
}
