//! Keeps the caller's frame under `return redis.call(...)`.
//!
//! Redis's `redis.call` is a C function, so a Lua function that returns its result keeps its
//! own frame and an error names its line (`... on @user_script:7.`). fast-cache's
//! `redis.call` is a small Lua function (a Rust callback cannot raise Redis's `{err = ...}`
//! tables), and Lua 5.1 replaces the caller's frame on a tail call: the line would be lost.
//! Written `return (redis.call(...))` the call is not a tail call, and returns the same one
//! value. This module finds those calls in the source (outside strings and comments) and adds
//! the parentheses; no line moves.

/// `code` with `return redis.call(...)` written `return (redis.call(...))`; `None` when it has
/// none (or the source is not what this scanner understands: then it is left alone).
pub(crate) fn keep_callers(code: &[u8]) -> Option<Vec<u8>> {
    let mut inserts = Vec::new();
    let mut i = 0;
    while i < code.len() {
        if let Some(end) = skip_literal(code, i) {
            i = end?;
            continue;
        }
        if code[i..].starts_with(b"return") && boundary(code, i, 6) {
            let mut j = i + 6;
            while j < code.len() && code[j].is_ascii_whitespace() {
                j += 1;
            }
            if code[j..].starts_with(b"redis.call") && !word(code.get(j + 10).copied()) {
                let mut k = j + 10;
                while k < code.len() && code[k].is_ascii_whitespace() {
                    k += 1;
                }
                if code.get(k) == Some(&b'(') {
                    let close = matching(code, k)?;
                    inserts.push((j, close + 1));
                    i = j;
                    continue;
                }
            }
            i += 6;
            continue;
        }
        i += 1;
    }
    if inserts.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(code.len() + 2 * inserts.len());
    let mut at = 0;
    // Calls never nest inside one another's argument list here: each insert is after the last.
    for (open, close) in inserts {
        out.extend_from_slice(&code[at..open]);
        out.push(b'(');
        out.extend_from_slice(&code[open..close]);
        out.push(b')');
        at = close;
    }
    out.extend_from_slice(&code[at..]);
    Some(out)
}

fn word(b: Option<u8>) -> bool {
    b.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Whether `code[at..at + len]` is a whole word.
fn boundary(code: &[u8], at: usize, len: usize) -> bool {
    !word(at.checked_sub(1).map(|p| code[p])) && !word(code.get(at + len).copied())
}

/// The index after the closing parenthesis matching the one at `open`, skipping strings and
/// comments (`None`: unbalanced).
fn matching(code: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = open;
    while i < code.len() {
        if let Some(end) = skip_literal(code, i) {
            i = end?;
            continue;
        }
        match code[i] {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// A string or comment starting at `i`: `Some(Some(end))` past it, `Some(None)` when it does
/// not end, `None` when none starts here.
fn skip_literal(code: &[u8], i: usize) -> Option<Option<usize>> {
    let rest = &code[i..];
    if rest.starts_with(b"--") {
        if let Some(level) = long_bracket(&rest[2..]) {
            return Some(close_long(code, i + 2 + level + 2, level));
        }
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .map_or(code.len(), |p| i + p);
        return Some(Some(end));
    }
    match rest.first() {
        Some(&quote @ (b'"' | b'\'')) => {
            let mut j = i + 1;
            while j < code.len() {
                match code[j] {
                    b'\\' => j += 2,
                    b if b == quote => return Some(Some(j + 1)),
                    b'\n' => return Some(None),
                    _ => j += 1,
                }
            }
            Some(None)
        }
        Some(b'[') => long_bracket(rest).map(|level| close_long(code, i + level + 2, level)),
        _ => None,
    }
}

/// The level of a long bracket `[==[` at the start of `s` (`None`: not one).
fn long_bracket(s: &[u8]) -> Option<usize> {
    if s.first() != Some(&b'[') {
        return None;
    }
    let level = s[1..].iter().take_while(|&&b| b == b'=').count();
    (s.get(1 + level) == Some(&b'[')).then_some(level)
}

/// The index after the `]==]` of `level` closing a long string or comment whose text starts
/// at `from`.
fn close_long(code: &[u8], from: usize, level: usize) -> Option<usize> {
    let mut close = vec![b']'];
    close.extend(std::iter::repeat_n(b'=', level));
    close.push(b']');
    code.get(from..)?
        .windows(close.len())
        .position(|w| w == close.as_slice())
        .map(|p| from + p + close.len())
}

#[cfg(test)]
mod tests {
    use super::keep_callers;

    fn fix(code: &str) -> Option<String> {
        keep_callers(code.as_bytes()).map(|c| String::from_utf8(c).unwrap())
    }

    #[test]
    fn wraps_returned_calls_and_nothing_else() {
        assert_eq!(
            fix("return redis.call('get', KEYS[1])").as_deref(),
            Some("return (redis.call('get', KEYS[1]))")
        );
        assert_eq!(
            fix("local a = 1\nreturn redis.call('incr', f(x), ')')\n").as_deref(),
            Some("local a = 1\nreturn (redis.call('incr', f(x), ')'))\n")
        );
        assert_eq!(
            fix("if x then return redis.call('a') else return redis.call ( \"b(\" ) end")
                .as_deref(),
            Some("if x then return (redis.call('a')) else return (redis.call ( \"b(\" )) end")
        );
        // Not a tail call, a pcall, strings and comments: unchanged.
        assert_eq!(fix("local v = redis.call('get', 'k') return v"), None);
        assert_eq!(fix("return redis.pcall('get', 'k')"), None);
        assert_eq!(fix("-- return redis.call('x')\nreturn 1"), None);
        assert_eq!(fix("--[==[ return redis.call('x') ]==] return 1"), None);
        assert_eq!(fix("local s = [[ return redis.call('x') ]] return s"), None);
        assert_eq!(fix("local s = 'return redis.call(1)' return s"), None);
        assert_eq!(fix("return redis.callx('x')"), None);
        assert_eq!(fix("xreturn redis.call('x')"), None);
        // Unbalanced: left alone.
        assert_eq!(fix("return redis.call('x'"), None);
    }
}
