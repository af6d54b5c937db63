//! Redis's glob-style pattern matching (`stringmatchlen` in util.c).
//!
//! Why it exists: `FUNCTION LIST LIBRARYNAME <pattern>` filters libraries by a Redis glob,
//! matched case-insensitively; a filter that only compared names would list nothing where
//! Redis lists something (`my*`), and the differential test would catch it.

/// Whether `s` matches the Redis glob `pattern` (`*`, `?`, `[a-z]`, `[^x]`, `\x`), comparing
/// ASCII letters case-insensitively when `nocase` is set.
pub fn matches(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    let (mut p, mut i) = (0, 0);
    while p < pattern.len() {
        match pattern[p] {
            b'*' => {
                while p + 1 < pattern.len() && pattern[p + 1] == b'*' {
                    p += 1;
                }
                if p + 1 == pattern.len() {
                    return true;
                }
                return (i..=s.len()).any(|j| matches(&pattern[p + 1..], &s[j..], nocase));
            }
            b'?' => {
                if i >= s.len() {
                    return false;
                }
                i += 1;
            }
            b'[' => {
                if i >= s.len() {
                    return false;
                }
                p += 1;
                let not = pattern.get(p) == Some(&b'^');
                if not {
                    p += 1;
                }
                let mut hit = false;
                while p < pattern.len() && pattern[p] != b']' {
                    if pattern[p] == b'\\' && p + 1 < pattern.len() {
                        p += 1;
                        hit |= eq(pattern[p], s[i]);
                    } else if p + 2 < pattern.len() && pattern[p + 1] == b'-' {
                        let (mut lo, mut hi) = (pattern[p], pattern[p + 2]);
                        if lo > hi {
                            std::mem::swap(&mut lo, &mut hi);
                        }
                        let c = s[i];
                        let folded = |c: u8| if nocase { c.to_ascii_lowercase() } else { c };
                        hit |= (lo..=hi).contains(&c)
                            || (nocase && (folded(lo)..=folded(hi)).contains(&folded(c)));
                        p += 2;
                    } else {
                        hit |= eq(pattern[p], s[i]);
                    }
                    p += 1;
                }
                if p >= pattern.len() {
                    // An unterminated class ends the pattern (Redis steps back onto the last byte).
                    p = pattern.len() - 1;
                }
                if hit == not {
                    return false;
                }
                i += 1;
            }
            b'\\' if p + 1 < pattern.len() => {
                p += 1;
                if i >= s.len() || !eq(pattern[p], s[i]) {
                    return false;
                }
                i += 1;
            }
            c => {
                if i >= s.len() || !eq(c, s[i]) {
                    return false;
                }
                i += 1;
            }
        }
        p += 1;
    }
    i == s.len()
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn globs_as_redis_matches_them() {
        assert!(matches(b"my*", b"mylib", true));
        assert!(!matches(b"my", b"mylib", true));
        assert!(matches(b"l", b"L", true));
        assert!(!matches(b"l", b"L", false));
        assert!(matches(b"m?l[a-z]b", b"mylib", false));
        assert!(!matches(b"m[^y]*", b"mylib", false));
        assert!(matches(b"*", b"", false));
        assert!(matches(b"a\\*", b"a*", false));
        assert!(!matches(b"a\\*", b"ab", false));
    }
}
