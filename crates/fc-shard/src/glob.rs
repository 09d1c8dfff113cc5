//! Redis's glob patterns (`KEYS`, `SCAN ... MATCH`, `HSCAN`, ...), as `stringmatchlen` reads
//! them: `*` any run, `?` one byte, `[abc]`, `[^abc]`, `[a-z]` (reversed ranges allowed), `\x`
//! a literal `x`, everything else itself. Matching is on bytes.
//!
//! The matcher backtracks only to the last `*` (two pointers), so it runs in
//! O(pattern × subject) at worst, never exponentially.

/// Whether `subject` matches `pattern` (ASCII case-insensitively when `nocase`).
pub fn glob_match(pattern: &[u8], subject: &[u8], nocase: bool) -> bool {
    let (mut p, mut s) = (0, 0);
    // Where to resume after the last `*`: the pattern after it and the subject position it
    // currently swallows up to.
    let mut star: Option<(usize, usize)> = None;
    while s < subject.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, s));
                    continue;
                }
                _ => {
                    if let Some(next) = match_one(pattern, p, subject[s], nocase) {
                        p = next;
                        s += 1;
                        continue;
                    }
                }
            }
        }
        match &mut star {
            Some((resume, swallowed)) => {
                *swallowed += 1;
                p = *resume;
                s = *swallowed;
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches one subject byte against the pattern element at `p` (not `*`); the position after
/// the element when it matches.
fn match_one(pattern: &[u8], p: usize, byte: u8, nocase: bool) -> Option<usize> {
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    match pattern[p] {
        b'?' => Some(p + 1),
        b'[' => {
            let mut i = p + 1;
            let negate = pattern.get(i) == Some(&b'^');
            if negate {
                i += 1;
            }
            let mut matched = false;
            loop {
                match pattern.get(i) {
                    // An unclosed class ends with the pattern (as Redis).
                    None => break,
                    Some(b']') => {
                        i += 1;
                        break;
                    }
                    Some(b'\\') if i + 1 < pattern.len() => {
                        matched |= eq(pattern[i + 1], byte);
                        i += 2;
                    }
                    Some(&lo) if pattern.get(i + 1) == Some(&b'-') && i + 2 < pattern.len() => {
                        let hi = pattern[i + 2];
                        let (lo, hi) = if lo > hi { (hi, lo) } else { (lo, hi) };
                        let (b, lo, hi) = if nocase {
                            (
                                byte.to_ascii_lowercase(),
                                lo.to_ascii_lowercase(),
                                hi.to_ascii_lowercase(),
                            )
                        } else {
                            (byte, lo, hi)
                        };
                        matched |= (lo..=hi).contains(&b);
                        i += 3;
                    }
                    Some(&c) => {
                        matched |= eq(c, byte);
                        i += 1;
                    }
                }
            }
            (matched != negate).then_some(i)
        }
        b'\\' if p + 1 < pattern.len() => eq(pattern[p + 1], byte).then_some(p + 2),
        c => eq(c, byte).then_some(p + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn redis_glob_cases() {
        let cases: &[(&str, &str, bool)] = &[
            ("*", "", true),
            ("*", "anything", true),
            ("h?llo", "hello", true),
            ("h?llo", "hllo", false),
            ("h*llo", "hllo", true),
            ("h*llo", "heeeello", true),
            ("h[ae]llo", "hallo", true),
            ("h[ae]llo", "hillo", false),
            ("h[^e]llo", "hallo", true),
            ("h[^e]llo", "hello", false),
            ("h[a-b]llo", "hbllo", true),
            ("h[b-a]llo", "hallo", true),
            ("h[a-b]llo", "hcllo", false),
            ("h\\*llo", "h*llo", true),
            ("h\\*llo", "hello", false),
            ("user:*:name", "user:42:name", true),
            ("user:*:name", "user:42:age", false),
            ("a*b*c", "abbbc", true),
            ("a*b*c", "acb", false),
            ("*a", "bbba", true),
            ("[abc", "a", true),
            ("", "", true),
            ("", "a", false),
            ("a**", "a", true),
        ];
        for &(pattern, subject, want) in cases {
            assert_eq!(
                glob_match(pattern.as_bytes(), subject.as_bytes(), false),
                want,
                "{pattern:?} ~ {subject:?}"
            );
        }
        assert!(glob_match(b"HELLO*", b"hello world", true));
        assert!(!glob_match(b"HELLO*", b"hello world", false));
    }

    #[test]
    fn no_exponential_blowup() {
        let subject = vec![b'a'; 10_000];
        let pattern = b"*a*a*a*a*a*a*a*a*a*a*b";
        assert!(!glob_match(pattern, &subject, false));
    }
}
