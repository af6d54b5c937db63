//! Building `redis::Value` replies, above all errors.
//!
//! `redis::Value::ServerError` has no public constructor, so an error reply is made the way
//! the client itself makes one: by parsing the RESP line `-CODE detail\r\n`. That also
//! guarantees the client's error-kind mapping (for example `NOSCRIPT` becoming
//! `ServerErrorKind::NoScript`, which is what makes `redis::Script::invoke_async` fall back
//! to `SCRIPT LOAD`) is the same for simulated and real servers. The fixed errors are parsed
//! once and cloned afterwards (a clone is a reference-count bump).

use redis::Value;
use std::sync::LazyLock;

/// An error reply with the given text (without the leading `-`), e.g. `ERR syntax error`.
///
/// The text is sanitised as Redis does for error replies: surrounding CR/LF trimmed, inner
/// CR/LF replaced by spaces (a raw newline would break the protocol).
pub fn error(text: &str) -> Value {
    let mut line = Vec::with_capacity(text.len() + 3);
    line.push(b'-');
    line.extend(sanitize(text.trim_matches(['\r', '\n'])).bytes());
    line.extend_from_slice(b"\r\n");
    match redis::parse_redis_value(&line) {
        Ok(v) => v,
        Err(_) => redis::parse_redis_value(b"-ERR unparsable error reply\r\n").expect("static"),
    }
}

/// A status reply: `OK` becomes `Value::Okay` exactly as the client's parser does.
pub fn status(text: &str) -> Value {
    let text = sanitize(text);
    if text == "OK" {
        Value::Okay
    } else {
        Value::SimpleString(text)
    }
}

fn sanitize(text: &str) -> String {
    text.replace(['\r', '\n'], " ")
}

/// The text of an error reply as Redis would have sent it, without the leading `-`:
/// `CODE detail`. `None` if `v` is not an error.
pub fn error_text(v: &Value) -> Option<String> {
    match v {
        Value::ServerError(e) => Some(match e.details() {
            Some(d) => format!("{} {}", e.code(), d),
            None => e.code().to_string(),
        }),
        _ => None,
    }
}

macro_rules! fixed_errors {
    ($($(#[$doc:meta])* $name:ident = $text:expr;)*) => {
        $(
            $(#[$doc])*
            pub fn $name() -> Value {
                static V: LazyLock<Value> = LazyLock::new(|| error($text));
                V.clone()
            }
        )*
    };
}

fixed_errors! {
    wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    syntax = "ERR syntax error";
    not_integer = "ERR value is not an integer or out of range";
    overflow = "ERR increment or decrement would overflow";
    hash_not_integer = "ERR hash value is not an integer";
    noscript = "NOSCRIPT No matching script. Please use EVAL.";
    readonly = "READONLY You can't write against a read only replica.";
    noreplicas = "NOREPLICAS Not enough good replicas to write.";
    numkeys_too_big = "ERR Number of keys can't be greater than number of args";
    numkeys_negative = "ERR Number of keys can't be negative";
}

/// `ERR wrong number of arguments for 'name' command` (name is the lowercase full name,
/// e.g. `script|load`).
pub fn arity(name: &str) -> Value {
    error(&format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

/// `ERR invalid expire time in 'name' command`.
pub fn invalid_expire(name: &str) -> Value {
    error(&format!("ERR invalid expire time in '{name}' command"))
}

/// Redis's reply to an unknown command: the name as typed and the first arguments, each
/// quoted, up to about 128 bytes of them.
pub fn unknown_command(args: &[Vec<u8>]) -> Value {
    let name = c_str(&args[0], 128);
    let mut listed = String::new();
    for a in &args[1..] {
        if listed.len() >= 128 {
            break;
        }
        let room = 128 - listed.len();
        listed.push('\'');
        listed.push_str(&c_str(a, room));
        listed.push_str("' ");
    }
    error(&format!(
        "ERR unknown command '{name}', with args beginning with: {listed}"
    ))
}

/// Redis's reply to an unknown subcommand of a container command such as SCRIPT.
pub fn unknown_subcommand(cmd: &[u8], sub: &[u8]) -> Value {
    let cmd = String::from_utf8_lossy(cmd).to_uppercase();
    error(&format!(
        "ERR unknown subcommand '{}'. Try {cmd} HELP.",
        c_str(sub, 128)
    ))
}

/// An argument printed with C's `%.*s`: cut at the first NUL and at `max` bytes.
fn c_str(b: &[u8], max: usize) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len()).min(max);
    String::from_utf8_lossy(&b[..end]).into_owned()
}

pub fn bulk(b: &[u8]) -> Value {
    Value::BulkString(b.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noscript_maps_to_the_client_kind() {
        match noscript() {
            Value::ServerError(e) => {
                assert_eq!(e.kind(), Some(redis::ServerErrorKind::NoScript));
                assert_eq!(e.details(), Some("No matching script. Please use EVAL."));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn error_text_round_trips() {
        assert_eq!(error_text(&syntax()).unwrap(), "ERR syntax error");
        assert_eq!(error_text(&error("x")).unwrap(), "x");
    }
}
