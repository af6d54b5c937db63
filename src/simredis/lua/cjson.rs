//! lua-cjson (`cjson`), the JSON library Redis bundles for scripts: `encode`, `decode`, `null`.
//!
//! Why it exists: scripts that keep structured lock metadata (owner, fencing token, expiry)
//! in one string use `cjson.encode`/`cjson.decode`; a simulator without them fails those
//! scripts, and one with a different JSON dialect passes scripts that fail on Redis. This is
//! lua-cjson 2.1.0 with Redis's defaults, measured on 7.0.15: numbers as `%.14g`, an empty
//! table encodes as `{}`, `/` escapes as `\/`, arrays may have holes up to index 10 or half
//! full, nesting is limited to 1000, and decoding errors read `Expected <what> but found
//! <token> at character <n>`. A hand-written parser rather than serde_json: the error texts,
//! the leniency (`01`, `-inf`, a string stopping at a NUL) and the number tokens must be
//! lua-cjson's, which serde_json's are not. Not provided: the configuration functions
//! (`cjson.encode_max_depth` and friends) and `cjson.new`.

use super::bit::arg_error;
use super::convert::lua_number;
use super::errors::{raise, where_, Raised};
use crate::simredis::num::fmt_g14;
use mlua::{LightUserData, Lua, MultiValue, Table, Value as LuaValue};

const MAX_DEPTH: usize = 1000;

/// `cjson.null`: lua-cjson's NULL light userdata.
fn null() -> LuaValue {
    LuaValue::LightUserData(LightUserData(std::ptr::null_mut()))
}

fn fail<T>(lua: &Lua, msg: String) -> mlua::Result<T> {
    raise(Raised::Text(format!("{}{msg}", where_(lua, 1))))
}

/// Builds the `cjson` table.
pub(super) fn cjson_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "encode",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return arg_error(lua, 0, "encode", "expected 1 argument");
            }
            let mut out = Vec::new();
            encode(lua, &args[0], 0, &mut out)?;
            lua.create_string(out)
        })?,
    )?;
    t.raw_set(
        "decode",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return arg_error(lua, 0, "decode", "expected 1 argument");
            }
            let text = match &args[0] {
                LuaValue::String(s) => s.as_bytes().to_vec(),
                LuaValue::Integer(i) => fmt_g14(*i as f64).into_bytes(),
                LuaValue::Number(n) => fmt_g14(*n).into_bytes(),
                other => {
                    let got = other.type_name();
                    return arg_error(lua, 0, "decode", &format!("string expected, got {got}"));
                }
            };
            if text.len() >= 2 && (text[0] == 0 || text[1] == 0) {
                return fail(lua, "JSON parser does not support UTF-16 or UTF-32".into());
            }
            let mut p = Parser {
                s: &text,
                pos: 0,
                depth: 0,
            };
            let tok = p.next_token();
            let v = p.value(lua, tok)?;
            let end = p.next_token();
            if !matches!(end.kind, Tok::End) {
                return p.expected(lua, "the end", &end);
            }
            Ok(v)
        })?,
    )?;
    t.raw_set("null", null())?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

fn encode_exception<T>(lua: &Lua, v: &LuaValue, reason: &str) -> mlua::Result<T> {
    fail(lua, format!("Cannot serialise {}: {reason}", v.type_name()))
}

fn encode_number(lua: &Lua, v: &LuaValue, n: f64, out: &mut Vec<u8>) -> mlua::Result<()> {
    if !n.is_finite() {
        return encode_exception(lua, v, "must not be NaN or Inf");
    }
    out.extend_from_slice(fmt_g14(n).as_bytes());
    Ok(())
}

fn encode_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            c if c < 0x20 || c == 0x7f => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            c => out.push(c),
        }
    }
    out.push(b'"');
}

/// lua_array_length: the array length if every key is an integer >= 1 and the array is not
/// excessively sparse (more than 10 and more than twice the number of items); None for an
/// object.
fn array_length(lua: &Lua, t: &Table, v: &LuaValue) -> mlua::Result<Option<usize>> {
    let (mut max, mut items) = (0f64, 0usize);
    for pair in t.clone().pairs::<LuaValue, LuaValue>() {
        let (k, _) = pair?;
        let k = match k {
            LuaValue::Integer(i) => i as f64,
            LuaValue::Number(n) => n,
            _ => return Ok(None),
        };
        if k.floor() != k || k < 1.0 {
            return Ok(None);
        }
        max = max.max(k);
        items += 1;
    }
    if max > items as f64 * 2.0 && max > 10.0 {
        return encode_exception(lua, v, "excessively sparse array");
    }
    Ok((max > 0.0).then_some(max as usize))
}

fn encode(lua: &Lua, v: &LuaValue, depth: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        LuaValue::String(s) => encode_string(&s.as_bytes(), out),
        LuaValue::Integer(i) => encode_number(lua, v, *i as f64, out)?,
        LuaValue::Number(n) => encode_number(lua, v, *n, out)?,
        LuaValue::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        LuaValue::Nil => out.extend_from_slice(b"null"),
        LuaValue::LightUserData(u) if u.0.is_null() => out.extend_from_slice(b"null"),
        LuaValue::Table(t) => {
            let depth = depth + 1;
            if depth > MAX_DEPTH {
                return fail(
                    lua,
                    format!("Cannot serialise, excessive nesting ({depth})"),
                );
            }
            match array_length(lua, t, v)? {
                Some(len) => {
                    out.push(b'[');
                    for i in 1..=len {
                        if i > 1 {
                            out.push(b',');
                        }
                        encode(lua, &t.raw_get::<LuaValue>(i)?, depth, out)?;
                    }
                    out.push(b']');
                }
                None => {
                    out.push(b'{');
                    let mut first = true;
                    for pair in t.clone().pairs::<LuaValue, LuaValue>() {
                        let (k, val) = pair?;
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        match &k {
                            LuaValue::Integer(_) | LuaValue::Number(_) => {
                                out.push(b'"');
                                let n = lua_number(&k).unwrap_or(0.0);
                                encode_number(lua, &k, n, out)?;
                                out.extend_from_slice(b"\":");
                            }
                            LuaValue::String(s) => {
                                encode_string(&s.as_bytes(), out);
                                out.push(b':');
                            }
                            other => {
                                return encode_exception(
                                    lua,
                                    other,
                                    "table key must be a number or string",
                                )
                            }
                        }
                        encode(lua, &val, depth, out)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => return encode_exception(lua, other, "type not supported"),
    }
    Ok(())
}

#[derive(Debug)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str(Vec<u8>),
    Num(f64),
    Bool(bool),
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

struct Token {
    kind: Tok,
    /// 0-based byte position (errors say `index + 1`).
    index: usize,
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    /// The byte at `i`, NUL past the end (lua-cjson reads a C string).
    fn at(&self, i: usize) -> u8 {
        self.s.get(i).copied().unwrap_or(0)
    }

    fn next_token(&mut self) -> Token {
        while matches!(self.at(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let index = self.pos;
        let single = |k| Token { kind: k, index };
        let c = self.at(self.pos);
        let kind = match c {
            0 => return single(Tok::End),
            b'{' => Tok::ObjBegin,
            b'}' => Tok::ObjEnd,
            b'[' => Tok::ArrBegin,
            b']' => Tok::ArrEnd,
            b':' => Tok::Colon,
            b',' => Tok::Comma,
            b'"' => return self.string(),
            b'-' | b'0'..=b'9' | b'i' | b'I' | b'n' | b'N' | b't' | b'f' => {
                return self.word(index);
            }
            _ => return single(Tok::Error("invalid token")),
        };
        self.pos += 1;
        single(kind)
    }

    fn word(&mut self, index: usize) -> Token {
        let rest = &self.s[self.pos..];
        let fixed: [(&[u8], Tok); 3] = [
            (b"true", Tok::Bool(true)),
            (b"false", Tok::Bool(false)),
            (b"null", Tok::Null),
        ];
        let c = self.at(self.pos);
        if c == b'-' || c.is_ascii_digit() {
            return self.number(index);
        }
        for (w, k) in fixed {
            if rest.starts_with(w) {
                self.pos += w.len();
                return Token { kind: k, index };
            }
        }
        let lower: Vec<u8> = rest.iter().take(3).map(u8::to_ascii_lowercase).collect();
        if lower == b"inf" || lower == b"nan" {
            return self.number(index);
        }
        Token {
            kind: Tok::Error("invalid token"),
            index,
        }
    }

    /// strtod on the longest prefix it accepts.
    fn number(&mut self, index: usize) -> Token {
        let start = self.pos;
        let mut i = start;
        if matches!(self.at(i), b'-' | b'+') {
            i += 1;
        }
        let word: Vec<u8> = self.s[i.min(self.s.len())..]
            .iter()
            .take(8)
            .map(u8::to_ascii_lowercase)
            .collect();
        let neg = self.at(start) == b'-';
        let sign = if neg { -1.0 } else { 1.0 };
        let special = if word.starts_with(b"infinity") {
            Some((8, f64::INFINITY))
        } else if word.starts_with(b"inf") {
            Some((3, f64::INFINITY))
        } else if word.starts_with(b"nan") {
            Some((3, f64::NAN))
        } else {
            None
        };
        if let Some((len, v)) = special {
            self.pos = i + len;
            return Token {
                kind: Tok::Num(sign * v),
                index,
            };
        }
        if self.at(i) == b'0'
            && (self.at(i + 1) | 0x20) == b'x'
            && self.at(i + 2).is_ascii_hexdigit()
        {
            let mut j = i + 2;
            let mut v = 0f64;
            while self.at(j).is_ascii_hexdigit() {
                v = v * 16.0 + f64::from((self.at(j) as char).to_digit(16).unwrap_or(0));
                j += 1;
            }
            self.pos = j;
            return Token {
                kind: Tok::Num(sign * v),
                index,
            };
        }
        let digits = |p: &Self, mut j: usize| {
            while p.at(j).is_ascii_digit() {
                j += 1;
            }
            j
        };
        let int_end = digits(self, i);
        let mut end = int_end;
        if self.at(end) == b'.' {
            end = digits(self, end + 1);
        }
        if end == i || (end == i + 1 && self.at(i) == b'.') {
            return Token {
                kind: Tok::Error("invalid number"),
                index,
            };
        }
        if (self.at(end) | 0x20) == b'e' {
            let mut j = end + 1;
            if matches!(self.at(j), b'-' | b'+') {
                j += 1;
            }
            if self.at(j).is_ascii_digit() {
                end = digits(self, j);
            }
        }
        let text = String::from_utf8_lossy(&self.s[start..end]).into_owned();
        self.pos = end;
        let v = text.trim_start_matches('+').parse::<f64>().unwrap_or(0.0);
        Token {
            kind: Tok::Num(v),
            index,
        }
    }

    fn string(&mut self) -> Token {
        let index = self.pos;
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let c = self.at(self.pos);
            match c {
                b'"' => break,
                0 => {
                    return Token {
                        kind: Tok::Error("unexpected end of string"),
                        index: self.pos,
                    }
                }
                b'\\' => {
                    let e = self.at(self.pos + 1);
                    let ch = match e {
                        b'"' | b'\\' | b'/' => e,
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => match self.unicode_escape(&mut out) {
                            true => continue,
                            false => {
                                return Token {
                                    kind: Tok::Error("invalid unicode escape code"),
                                    index: self.pos,
                                }
                            }
                        },
                        _ => {
                            return Token {
                                kind: Tok::Error("invalid escape code"),
                                index: self.pos,
                            }
                        }
                    };
                    out.push(ch);
                    self.pos += 2;
                }
                c => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
        self.pos += 1;
        Token {
            kind: Tok::Str(out),
            index,
        }
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        (0..4).try_fold(0u32, |acc, k| {
            Some(acc * 16 + (self.at(at + k) as char).to_digit(16)?)
        })
    }

    /// `\uXXXX`, with a surrogate pair as one code point; false if invalid.
    fn unicode_escape(&mut self, out: &mut Vec<u8>) -> bool {
        let Some(mut cp) = self.hex4(self.pos + 2) else {
            return false;
        };
        let mut len = 6;
        if (0xDC00..=0xDFFF).contains(&cp) {
            return false;
        }
        if (0xD800..=0xDBFF).contains(&cp) {
            if self.at(self.pos + 6) != b'\\' || self.at(self.pos + 7) != b'u' {
                return false;
            }
            let Some(low) = self.hex4(self.pos + 8) else {
                return false;
            };
            if !(0xDC00..=0xDFFF).contains(&low) {
                return false;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        let ch = char::from_u32(cp).unwrap_or('\u{FFFD}');
        let mut buf = [0u8; 4];
        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
        self.pos += len;
        true
    }

    fn expected<T>(&self, lua: &Lua, what: &str, t: &Token) -> mlua::Result<T> {
        let found = match &t.kind {
            Tok::Error(e) => e,
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str(_) => "T_STRING",
            Tok::Num(_) => "T_NUMBER",
            Tok::Bool(_) => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
        };
        fail(
            lua,
            format!(
                "Expected {what} but found {found} at character {}",
                t.index + 1
            ),
        )
    }

    fn descend(&mut self, lua: &Lua, t: &Token) -> mlua::Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return fail(
                lua,
                format!(
                    "Found too many nested data structures ({}) at character {}",
                    self.depth,
                    t.index + 1
                ),
            );
        }
        Ok(())
    }

    fn value(&mut self, lua: &Lua, t: Token) -> mlua::Result<LuaValue> {
        Ok(match t.kind {
            Tok::Str(s) => LuaValue::String(lua.create_string(s)?),
            Tok::Num(n) => LuaValue::Number(n),
            Tok::Bool(b) => LuaValue::Boolean(b),
            Tok::Null => null(),
            Tok::ObjBegin => {
                self.descend(lua, &t)?;
                let table = lua.create_table()?;
                let mut tok = self.next_token();
                if !matches!(tok.kind, Tok::ObjEnd) {
                    loop {
                        let Tok::Str(key) = &tok.kind else {
                            return self.expected(lua, "object key string", &tok);
                        };
                        let key = lua.create_string(key)?;
                        let colon = self.next_token();
                        if !matches!(colon.kind, Tok::Colon) {
                            return self.expected(lua, "colon", &colon);
                        }
                        let vt = self.next_token();
                        let v = self.value(lua, vt)?;
                        table.raw_set(key, v)?;
                        tok = self.next_token();
                        match tok.kind {
                            Tok::ObjEnd => break,
                            Tok::Comma => tok = self.next_token(),
                            _ => return self.expected(lua, "comma or object end", &tok),
                        }
                    }
                }
                self.depth -= 1;
                LuaValue::Table(table)
            }
            Tok::ArrBegin => {
                self.descend(lua, &t)?;
                let table = lua.create_table()?;
                let mut tok = self.next_token();
                if !matches!(tok.kind, Tok::ArrEnd) {
                    let mut i = 1;
                    loop {
                        let v = self.value(lua, tok)?;
                        table.raw_set(i, v)?;
                        i += 1;
                        tok = self.next_token();
                        match tok.kind {
                            Tok::ArrEnd => break,
                            Tok::Comma => tok = self.next_token(),
                            _ => return self.expected(lua, "comma or array end", &tok),
                        }
                    }
                }
                self.depth -= 1;
                LuaValue::Table(table)
            }
            _ => return self.expected(lua, "value", &t),
        })
    }
}
