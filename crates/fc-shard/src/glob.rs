//! Redis's glob patterns (`KEYS`, `SCAN ... MATCH`, `HSCAN`, `CONFIG GET`, `COMMAND LIST`,
//! ...), as `stringmatchlen` reads them: `*` any run, `?` one byte, `[abc]`, `[^abc]`, `[a-z]`
//! (reversed ranges allowed), `\x` a literal `x`, everything else itself. Matching is on bytes.
//!
//! A pattern is compiled once ([`GlobPattern`]) into the fixed-width segments between its
//! stars. A subject matches when the first segment matches at its start, the last at its end,
//! and every segment in between at its leftmost place after the previous one: taking the
//! leftmost place never loses a match, because each segment spans a fixed number of bytes and
//! what follows a star can start anywhere later. So nothing backtracks: a segment of literal
//! bytes is found with a linear substring search (the whole match is linear in the subject
//! and the pattern), and a segment with `?` or classes costs at most its length per subject
//! position. Thousands of stars cost what one does.

use memchr::memmem;

/// One pattern element that matches exactly one subject byte.
#[derive(Debug, Clone)]
enum Elem {
    /// This byte (lowercased when the pattern is case-insensitive).
    Byte(u8),
    /// `?`.
    Any,
    /// A class, as the set of bytes it matches.
    Class(Box<[bool; 256]>),
}

/// A compiled glob pattern.
#[derive(Debug, Clone)]
pub struct GlobPattern {
    /// The runs of elements between stars, in order.
    segments: Vec<Vec<Elem>>,
    /// Whether the pattern starts / ends with a star (else the first / last segment is
    /// anchored there).
    star_first: bool,
    star_last: bool,
    nocase: bool,
    /// Per segment: its bytes, when it is literal bytes only and the match is case-sensitive
    /// (found with a substring search).
    literal: Vec<Option<Vec<u8>>>,
}

impl GlobPattern {
    /// Compiles `pattern` (ASCII case-insensitive matching when `nocase`).
    #[must_use]
    pub fn new(pattern: &[u8], nocase: bool) -> Self {
        let fold = |b: u8| if nocase { b.to_ascii_lowercase() } else { b };
        let mut segments = vec![Vec::new()];
        // Whether the first element read was a star, and whether the last one was.
        let (mut star_first, mut star_last) = (false, false);
        let mut p = 0;
        while p < pattern.len() {
            star_last = pattern[p] == b'*';
            match pattern[p] {
                b'*' => {
                    star_first |= p == 0;
                    if !segments.last().is_some_and(Vec::is_empty) || segments.len() == 1 {
                        segments.push(Vec::new());
                    }
                    p += 1;
                }
                b'?' => {
                    push(&mut segments, Elem::Any);
                    p += 1;
                }
                b'[' => {
                    let (set, next) = class(pattern, p, nocase);
                    push(&mut segments, Elem::Class(set));
                    p = next;
                }
                b'\\' if p + 1 < pattern.len() => {
                    push(&mut segments, Elem::Byte(fold(pattern[p + 1])));
                    p += 2;
                }
                c => {
                    push(&mut segments, Elem::Byte(fold(c)));
                    p += 1;
                }
            }
        }
        // `a*` splits into ["a", ""]: the empty runs carry no elements.
        if star_first && segments.first().is_some_and(Vec::is_empty) {
            segments.remove(0);
        }
        if star_last && segments.last().is_some_and(Vec::is_empty) {
            segments.pop();
        }
        let literal = segments
            .iter()
            .map(|seg| {
                if nocase {
                    return None;
                }
                seg.iter()
                    .map(|e| match e {
                        Elem::Byte(b) => Some(*b),
                        _ => None,
                    })
                    .collect()
            })
            .collect();
        Self {
            segments,
            star_first,
            star_last,
            nocase,
            literal,
        }
    }

    /// Whether `subject` matches.
    #[must_use]
    pub fn matches(&self, subject: &[u8]) -> bool {
        let stars = self.star_first || self.star_last || self.segments.len() > 1;
        if !stars {
            let seg = self.segments.first().map_or(&[][..], Vec::as_slice);
            return seg.len() == subject.len() && self.at(seg, subject, 0);
        }
        let mut segs = &self.segments[..];
        let mut literal = &self.literal[..];
        let (mut from, mut to) = (0, subject.len());
        if !self.star_first {
            let Some((first, rest)) = segs.split_first() else {
                return true;
            };
            if first.len() > to || !self.at(first, subject, 0) {
                return false;
            }
            from = first.len();
            segs = rest;
            literal = &literal[1..];
        }
        if !self.star_last {
            let Some((last, rest)) = segs.split_last() else {
                return true;
            };
            if last.len() > to - from || !self.at(last, subject, to - last.len()) {
                return false;
            }
            to -= last.len();
            segs = rest;
            literal = &literal[..literal.len() - 1];
        }
        for (seg, lit) in segs.iter().zip(literal) {
            match self.find(seg, lit.as_deref(), &subject[..to], from) {
                Some(at) => from = at + seg.len(),
                None => return false,
            }
        }
        true
    }

    /// Whether `seg` matches `subject` at `at` (the caller checked the length).
    fn at(&self, seg: &[Elem], subject: &[u8], at: usize) -> bool {
        seg.iter().zip(&subject[at..]).all(|(e, &b)| match e {
            Elem::Byte(c) => {
                *c == if self.nocase {
                    b.to_ascii_lowercase()
                } else {
                    b
                }
            }
            Elem::Any => true,
            Elem::Class(set) => set[usize::from(b)],
        })
    }

    /// The leftmost place at or after `from` where `seg` matches within `subject`.
    fn find(
        &self,
        seg: &[Elem],
        literal: Option<&[u8]>,
        subject: &[u8],
        from: usize,
    ) -> Option<usize> {
        if seg.len() > subject.len().saturating_sub(from) {
            return None;
        }
        if let Some(bytes) = literal {
            return memmem::find(&subject[from..], bytes).map(|i| from + i);
        }
        (from..=subject.len() - seg.len()).find(|&at| self.at(seg, subject, at))
    }
}

fn push(segments: &mut [Vec<Elem>], elem: Elem) {
    if let Some(last) = segments.last_mut() {
        last.push(elem);
    }
}

/// The class starting at `p` (a `[`): the bytes it matches and the position after it. An
/// unclosed class ends with the pattern (as Redis).
fn class(pattern: &[u8], p: usize, nocase: bool) -> (Box<[bool; 256]>, usize) {
    let mut set = Box::new([false; 256]);
    let mut i = p + 1;
    let negate = pattern.get(i) == Some(&b'^');
    if negate {
        i += 1;
    }
    let mut add = |lo: u8, hi: u8| {
        for b in lo..=hi {
            set[usize::from(b)] = true;
            if nocase {
                set[usize::from(b.to_ascii_lowercase())] = true;
                set[usize::from(b.to_ascii_uppercase())] = true;
            }
        }
    };
    loop {
        match pattern.get(i) {
            None => break,
            Some(b']') => {
                i += 1;
                break;
            }
            Some(b'\\') if i + 1 < pattern.len() => {
                add(pattern[i + 1], pattern[i + 1]);
                i += 2;
            }
            Some(&lo) if pattern.get(i + 1) == Some(&b'-') && i + 2 < pattern.len() => {
                let hi = pattern[i + 2];
                let (lo, hi) = if lo > hi { (hi, lo) } else { (lo, hi) };
                if nocase {
                    // Redis compares the lowercased byte with the lowercased bounds.
                    let (lo, hi) = (lo.to_ascii_lowercase(), hi.to_ascii_lowercase());
                    for b in 0..=255u8 {
                        let l = b.to_ascii_lowercase();
                        if lo <= l && l <= hi {
                            add(b, b);
                        }
                    }
                } else {
                    add(lo, hi);
                }
                i += 3;
            }
            Some(&c) => {
                add(c, c);
                i += 1;
            }
        }
    }
    if negate {
        set.iter_mut().for_each(|b| *b = !*b);
    }
    (set, i)
}

/// Whether `subject` matches `pattern` (ASCII case-insensitively when `nocase`). Compiles the
/// pattern each call: compile a [`GlobPattern`] once to match many subjects.
#[must_use]
pub fn glob_match(pattern: &[u8], subject: &[u8], nocase: bool) -> bool {
    GlobPattern::new(pattern, nocase).matches(subject)
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

    #[test]
    fn adversarial_patterns_of_thousands_of_stars() {
        // CONFIG GET ****************Z once stalled a worker for more than 30 s.
        let stars = "*".repeat(16) + "Z";
        assert!(!glob_match(
            stars.as_bytes(),
            b"client-output-buffer-limit",
            true
        ));
        let many = "*".repeat(5_000) + "Z";
        assert!(!glob_match(many.as_bytes(), &[b'a'; 5_000], false));
        assert!(glob_match(many.as_bytes(), b"aaaaZ", false));
        // Thousands of one-byte segments against a subject that almost matches.
        let alternating = "*a".repeat(3_000) + "*b";
        assert!(!glob_match(alternating.as_bytes(), &[b'a'; 10_000], false));
        let classes = "*[a-c]?".repeat(2_000) + "*z";
        assert!(!glob_match(classes.as_bytes(), &[b'b'; 10_000], true));
        let mut subject = vec![b'a'; 6_000];
        subject.push(b'b');
        assert!(glob_match(alternating.as_bytes(), &subject, false));
    }

    /// The backtracking matcher the compiled one replaced: the reference for the proptest.
    fn reference(pattern: &[u8], subject: &[u8], nocase: bool) -> bool {
        let eq = |a: u8, b: u8| {
            if nocase {
                a.eq_ignore_ascii_case(&b)
            } else {
                a == b
            }
        };
        let one = |p: usize, byte: u8| -> Option<usize> {
            match pattern[p] {
                b'?' => Some(p + 1),
                b'[' => {
                    let (set, next) = super::class(pattern, p, nocase);
                    set[usize::from(byte)].then_some(next)
                }
                b'\\' if p + 1 < pattern.len() => eq(pattern[p + 1], byte).then_some(p + 2),
                c => eq(c, byte).then_some(p + 1),
            }
        };
        let (mut p, mut s) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while s < subject.len() {
            if p < pattern.len() {
                if pattern[p] == b'*' {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, s));
                    continue;
                }
                if let Some(next) = one(p, subject[s]) {
                    p = next;
                    s += 1;
                    continue;
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

    proptest::proptest! {
        #[test]
        fn agrees_with_the_backtracking_matcher(
            pattern in proptest::collection::vec(proptest::sample::select(b"ab*?[]^-\\A".to_vec()), 0..12),
            subject in proptest::collection::vec(proptest::sample::select(b"abAB*-".to_vec()), 0..14),
            nocase in proptest::bool::ANY,
        ) {
            proptest::prop_assert_eq!(
                glob_match(&pattern, &subject, nocase),
                reference(&pattern, &subject, nocase),
                "{:?} ~ {:?}", String::from_utf8_lossy(&pattern), String::from_utf8_lossy(&subject)
            );
        }
    }
}
