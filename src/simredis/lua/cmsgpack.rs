//! lua_cmsgpack (`cmsgpack`), the MessagePack library Redis bundles for scripts: `pack`,
//! `unpack`, `unpack_one`, `unpack_limit`.
//!
//! Why it exists: scripts that store compact binary records use it, and a simulator without
//! it fails them. Behaviour follows lua_cmsgpack 0.4.0 as Redis 7.0.15 ships it (measured):
//! a number that is an exact int64 packs as the smallest integer format, other numbers as
//! float32 when exact and float64 otherwise; a table packs as an array only when its keys are
//! exactly 1..n (an empty table is an empty array), otherwise as a map in `next` order;
//! tables nested deeper than 16 and values of other types pack as nil. Hand-written rather
//! than on `rmp`: the format choices above are lua_cmsgpack's, not a serializer's.

use super::bit::argerror_n;
use super::convert::lua_number;
use super::errors::{raise, where_, Raised};
use crate::simredis::num::fmt_g14;
use mlua::{Lua, MultiValue, Table, Value as LuaValue};

const MAX_NESTING: usize = 16;

/// Builds the `cmsgpack` table.
pub(super) fn cmsgpack_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            if args.is_empty() {
                return argerror_n(lua, 0, "MessagePack pack needs input.");
            }
            let mut out = Vec::new();
            for v in args.iter() {
                pack(v, 0, &mut out)?;
            }
            lua.create_string(out)
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, args: MultiValue| unpack_full(lua, &args, 0, 0))?,
    )?;
    t.raw_set(
        "unpack_one",
        lua.create_function(|lua, args: MultiValue| {
            let offset = opt_int(lua, &args, 1)?;
            unpack_full(lua, &args, 1, offset)
        })?,
    )?;
    t.raw_set(
        "unpack_limit",
        lua.create_function(|lua, args: MultiValue| {
            let limit = opt_int(lua, &args, 1)?;
            let offset = opt_int(lua, &args, 2)?;
            unpack_full(lua, &args, limit, offset)
        })?,
    )?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    Ok(t)
}

/// `luaL_optinteger(L, i + 1, 0)`.
fn opt_int(lua: &Lua, args: &MultiValue, i: usize) -> mlua::Result<i64> {
    match args.get(i) {
        None | Some(LuaValue::Nil) => Ok(0),
        Some(_) => Ok(super::bit::check_number(lua, args, i, "")? as i64),
    }
}

fn pack_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        let u = n as u64;
        match u {
            0..=127 => out.push(u as u8),
            128..=0xff => out.extend([0xcc, u as u8]),
            0x100..=0xffff => {
                out.push(0xcd);
                out.extend((u as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                out.push(0xce);
                out.extend((u as u32).to_be_bytes());
            }
            _ => {
                out.push(0xcf);
                out.extend(u.to_be_bytes());
            }
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend([0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend((n as i16).to_be_bytes());
    } else if n >= -(1 << 31) {
        out.push(0xd2);
        out.extend((n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend(n.to_be_bytes());
    }
}

fn pack_number(out: &mut Vec<u8>, n: f64) {
    // IS_INT64_EQUIVALENT: finite and equal to its int64 conversion (x86 gives i64::MIN
    // for out-of-range casts, so only that value can alias).
    if n.is_finite()
        && (n as i64) as f64 == n
        && !(n as i64 == i64::MIN && n != -9.223372036854776e18)
    {
        return pack_int(out, n as i64);
    }
    let f = n as f32;
    if f64::from(f) == n {
        out.push(0xca);
        out.extend(f.to_bits().to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend(n.to_bits().to_be_bytes());
    }
}

fn pack_len(out: &mut Vec<u8>, len: usize, fix: u8, fix_max: usize, codes: [u8; 3]) {
    if len <= fix_max {
        out.push(fix | len as u8);
    } else if codes[0] != 0 && len <= 0xff {
        out.extend([codes[0], len as u8]);
    } else if len <= 0xffff {
        out.push(codes[1]);
        out.extend((len as u16).to_be_bytes());
    } else {
        out.push(codes[2]);
        out.extend((len as u32).to_be_bytes());
    }
}

/// lua_cmsgpack's table_is_an_array: numeric keys only (numeric strings count, as
/// `lua_isnumber` says), all positive integers, and as many as the largest.
fn array_len(t: &Table) -> mlua::Result<Option<usize>> {
    let (mut max, mut count) = (0f64, 0usize);
    for pair in t.clone().pairs::<LuaValue, LuaValue>() {
        let (k, _) = pair?;
        match lua_number(&k) {
            Some(n) if n > 0.0 && n.floor() == n => {
                max = max.max(n);
                count += 1;
            }
            _ => return Ok(None),
        }
    }
    Ok((max == count as f64).then_some(count))
}

fn pack(v: &LuaValue, depth: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        LuaValue::String(s) => {
            let b = s.as_bytes();
            pack_len(out, b.len(), 0xa0, 31, [0xd9, 0xda, 0xdb]);
            out.extend_from_slice(&b);
        }
        LuaValue::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        LuaValue::Integer(i) => pack_int(out, *i),
        LuaValue::Number(n) => pack_number(out, *n),
        LuaValue::Table(t) if depth < MAX_NESTING => match array_len(t)? {
            Some(len) => {
                pack_len(out, len, 0x90, 15, [0, 0xdc, 0xdd]);
                for i in 1..=len {
                    pack(&t.raw_get::<LuaValue>(i)?, depth + 1, out)?;
                }
            }
            None => {
                let pairs: Vec<(LuaValue, LuaValue)> = t
                    .clone()
                    .pairs::<LuaValue, LuaValue>()
                    .collect::<mlua::Result<_>>()?;
                pack_len(out, pairs.len(), 0x80, 15, [0, 0xde, 0xdf]);
                for (k, v) in &pairs {
                    pack(k, depth + 1, out)?;
                    pack(v, depth + 1, out)?;
                }
            }
        },
        _ => out.push(0xc0),
    }
    Ok(())
}

enum Bad {
    Eof,
    Format,
}

struct Cur<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Cur<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], Bad> {
        let b = self.s.get(self.pos..self.pos + n).ok_or(Bad::Eof)?;
        self.pos += n;
        Ok(b)
    }

    fn uint(&mut self, n: usize) -> Result<u64, Bad> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |a, &b| (a << 8) | u64::from(b)))
    }

    fn value(&mut self, lua: &Lua) -> Result<LuaValue, Bad> {
        let c = self.take(1)?[0];
        let num = |n: f64| Ok(LuaValue::Number(n));
        match c {
            0x00..=0x7f => num(f64::from(c)),
            0xe0..=0xff => num(f64::from(c as i8)),
            0x80..=0x8f => self.map(lua, usize::from(c & 0x0f)),
            0x90..=0x9f => self.array(lua, usize::from(c & 0x0f)),
            0xa0..=0xbf => self.string(lua, usize::from(c & 0x1f)),
            0xc0 => Ok(LuaValue::Nil),
            0xc2 => Ok(LuaValue::Boolean(false)),
            0xc3 => Ok(LuaValue::Boolean(true)),
            0xc4 | 0xd9 => {
                let n = self.uint(1)? as usize;
                self.string(lua, n)
            }
            0xc5 | 0xda => {
                let n = self.uint(2)? as usize;
                self.string(lua, n)
            }
            0xc6 | 0xdb => {
                let n = self.uint(4)? as usize;
                self.string(lua, n)
            }
            0xca => num(f64::from(f32::from_bits(self.uint(4)? as u32))),
            0xcb => num(f64::from_bits(self.uint(8)?)),
            0xcc => num(self.uint(1)? as f64),
            0xcd => num(self.uint(2)? as f64),
            0xce => num(self.uint(4)? as f64),
            0xcf => num(self.uint(8)? as f64),
            0xd0 => num(f64::from(self.uint(1)? as u8 as i8)),
            0xd1 => num(f64::from(self.uint(2)? as u16 as i16)),
            0xd2 => num(f64::from(self.uint(4)? as u32 as i32)),
            0xd3 => num(self.uint(8)? as i64 as f64),
            0xdc => {
                let n = self.uint(2)? as usize;
                self.array(lua, n)
            }
            0xdd => {
                let n = self.uint(4)? as usize;
                self.array(lua, n)
            }
            0xde => {
                let n = self.uint(2)? as usize;
                self.map(lua, n)
            }
            0xdf => {
                let n = self.uint(4)? as usize;
                self.map(lua, n)
            }
            _ => Err(Bad::Format),
        }
    }

    fn string(&mut self, lua: &Lua, n: usize) -> Result<LuaValue, Bad> {
        let b = self.take(n)?;
        lua.create_string(b)
            .map(LuaValue::String)
            .map_err(|_| Bad::Format)
    }

    fn array(&mut self, lua: &Lua, n: usize) -> Result<LuaValue, Bad> {
        let t = lua.create_table().map_err(|_| Bad::Format)?;
        for i in 1..=n {
            let v = self.value(lua)?;
            t.raw_set(i, v).map_err(|_| Bad::Format)?;
        }
        Ok(LuaValue::Table(t))
    }

    fn map(&mut self, lua: &Lua, n: usize) -> Result<LuaValue, Bad> {
        let t = lua.create_table().map_err(|_| Bad::Format)?;
        for _ in 0..n {
            let k = self.value(lua)?;
            let v = self.value(lua)?;
            if !matches!(k, LuaValue::Nil) {
                t.raw_set(k, v).map_err(|_| Bad::Format)?;
            }
        }
        Ok(LuaValue::Table(t))
    }
}

/// mp_unpack_full: every value (limit and offset both 0), or up to `limit` values from
/// `offset` preceded by the next offset (-1 once the input is used up).
fn unpack_full(lua: &Lua, args: &MultiValue, limit: i64, offset: i64) -> mlua::Result<MultiValue> {
    let s = match args.front() {
        Some(LuaValue::String(s)) => s.as_bytes().to_vec(),
        Some(v @ (LuaValue::Integer(_) | LuaValue::Number(_))) => {
            fmt_g14(lua_number(v).unwrap_or(0.0)).into_bytes()
        }
        other => {
            let got = other.map_or("no value", |v| v.type_name());
            return argerror_n(lua, 1, &format!("string expected, got {got}"));
        }
    };
    let len = s.len() as i64;
    if offset < 0 || limit < 0 {
        return fail(
            lua,
            format!("Invalid request to unpack with offset of {offset} and limit of {len}."),
        );
    }
    if offset > len {
        return fail(
            lua,
            format!("Start offset {offset} greater than input length {len}."),
        );
    }
    let decode_all = limit == 0 && offset == 0;
    let limit = if decode_all { i64::MAX } else { limit };
    let mut cur = Cur {
        s: &s,
        pos: offset as usize,
    };
    let mut out = Vec::new();
    while cur.pos < s.len() && (out.len() as i64) < limit {
        match cur.value(lua) {
            Ok(v) => out.push(v),
            Err(Bad::Eof) => return fail(lua, "Missing bytes in input.".into()),
            Err(Bad::Format) => return fail(lua, "Bad data format in input.".into()),
        }
    }
    if !decode_all {
        let next = if cur.pos >= s.len() {
            -1
        } else {
            cur.pos as i64
        };
        out.insert(0, LuaValue::Integer(next));
    }
    Ok(MultiValue::from_iter(out))
}

fn fail<T>(lua: &Lua, msg: String) -> mlua::Result<T> {
    raise(Raised::Text(format!("{}{msg}", where_(lua, 1))))
}
