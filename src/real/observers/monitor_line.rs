//! One line of a Redis `MONITOR` stream, parsed: the server's time, the connection that sent the
//! command (`127.0.0.1:port`, or `lua` for a script's own commands) and the command's arguments.
//! Kept apart from what the witness makes of the lines (`entry_model.rs`), so that the format's
//! quirks (RESP simple string, C-style escapes) live in one place.

/// One `MONITOR` line: the server's time (µs), the source (`127.0.0.1:port` or `lua`), the
/// command and its arguments.
#[derive(Debug, PartialEq)]
pub(super) struct Line {
    pub(super) at_us: i64,
    pub(super) source: String,
    pub(super) args: Vec<Vec<u8>>,
}

/// Parses `+1700000000.123456 [0 127.0.0.1:5555] "set" "k" "v"` (a RESP simple string).
pub(super) fn parse_line(raw: &[u8]) -> Option<Line> {
    let raw = raw.strip_prefix(b"+")?;
    let raw = raw
        .strip_suffix(b"\r\n")
        .or_else(|| raw.strip_suffix(b"\n"))?;
    let space = raw.iter().position(|&b| b == b' ')?;
    let ts = std::str::from_utf8(&raw[..space]).ok()?;
    let (secs, micros) = ts.split_once('.')?;
    let at_us = secs.parse::<i64>().ok()? * 1_000_000 + micros.parse::<i64>().ok()?;
    let rest = &raw[space + 1..];
    let rest = rest.strip_prefix(b"[")?;
    let close = rest.iter().position(|&b| b == b']')?;
    let inside = std::str::from_utf8(&rest[..close]).ok()?;
    let source = inside.split_once(' ')?.1.to_string();
    let mut args = Vec::new();
    let mut i = close + 1;
    while i < rest.len() {
        match rest[i] {
            b' ' => i += 1,
            b'"' => {
                let mut arg = Vec::new();
                i += 1;
                loop {
                    let b = *rest.get(i)?;
                    i += 1;
                    match b {
                        b'"' => break,
                        b'\\' => {
                            let e = *rest.get(i)?;
                            i += 1;
                            arg.push(match e {
                                b'n' => b'\n',
                                b'r' => b'\r',
                                b't' => b'\t',
                                b'a' => 7,
                                b'b' => 8,
                                b'x' => {
                                    let hex = std::str::from_utf8(rest.get(i..i + 2)?).ok()?;
                                    i += 2;
                                    u8::from_str_radix(hex, 16).ok()?
                                }
                                other => other,
                            });
                        }
                        b => arg.push(b),
                    }
                }
                args.push(arg);
            }
            _ => return None,
        }
    }
    Some(Line {
        at_us,
        source,
        args,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> Line {
        parse_line(format!("+{text}\r\n").as_bytes()).unwrap()
    }

    #[test]
    fn monitor_lines_parse_with_escapes() {
        let l = line(r#"1700000000.000250 [0 127.0.0.1:5555] "set" "k" "a\"b\\c\x01" "EX" "1""#);
        assert_eq!(l.at_us, 1_700_000_000_000_250);
        assert_eq!(l.source, "127.0.0.1:5555");
        assert_eq!(l.args[2], b"a\"b\\c\x01");
        assert_eq!(line(r#"1.000001 [0 lua] "del" "k""#).source, "lua");
    }
}
