//! Roberto Ierusalimschy's `struct` library, which Redis bundles for scripts: `pack`,
//! `unpack`, `size` over a format string.
//!
//! Why it exists: scripts that read or write fixed binary layouts (a packed timestamp and
//! counter in one value) call `struct.pack`; without it they fail in simulation only.
//! Formats as in Redis 7.0.15's lua_struct.c: `<` `>` endianness (native is little), `!n`
//! alignment, `x` padding, `b B h H l L T i[n] I[n]` integers (long and size_t are 8 bytes,
//! int 4, at most 32), `f` `d` floats, `s` zero-terminated and `c[n]` fixed strings (`c0`
//! takes its length from the argument, or when unpacking from the previous number). Error
//! texts, including lua_struct's off-by-one argument number in `string too short`, are the
//! library's.

use super::bit::{argerror_n, check_number};
use super::convert::lua_number;
use super::errors::{raise, where_, Raised};
use crate::simredis::num::fmt_g14;
use mlua::{Lua, MultiValue, Table, Value as LuaValue};

const MAXINTSIZE: usize = 32;
const MAXALIGN: usize = 8;

struct Header {
    big: bool,
    align: usize,
}

fn fail<T>(lua: &Lua, msg: String) -> mlua::Result<T> {
    raise(Raised::Text(format!("{}{msg}", where_(lua, 1))))
}

/// `getnum`: digits at `fmt[*i..]`, or `default`.
fn getnum(lua: &Lua, fmt: &[u8], i: &mut usize, default: usize) -> mlua::Result<usize> {
    if !fmt.get(*i).is_some_and(u8::is_ascii_digit) {
        return Ok(default);
    }
    let mut a: usize = 0;
    while let Some(d) = fmt.get(*i).filter(|c| c.is_ascii_digit()) {
        a = match a
            .checked_mul(10)
            .and_then(|x| x.checked_add(usize::from(d - b'0')))
        {
            Some(v) if v <= i32::MAX as usize => v,
            _ => return fail(lua, "integral size overflow".into()),
        };
        *i += 1;
    }
    Ok(a)
}

fn optsize(lua: &Lua, opt: u8, fmt: &[u8], i: &mut usize) -> mlua::Result<usize> {
    Ok(match opt {
        b'B' | b'b' => 1,
        b'H' | b'h' => 2,
        b'L' | b'l' | b'T' | b'd' => 8,
        b'f' | b'x' => {
            if opt == b'f' {
                4
            } else {
                1
            }
        }
        b'c' => getnum(lua, fmt, i, 1)?,
        b'i' | b'I' => {
            let sz = getnum(lua, fmt, i, 4)?;
            if sz > MAXINTSIZE {
                return fail(
                    lua,
                    format!("integral size {sz} is larger than limit of {MAXINTSIZE}"),
                );
            }
            sz
        }
        _ => 0,
    })
}

fn gettoalign(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size - (len & (size - 1))) & (size - 1)
}

fn controloptions(
    lua: &Lua,
    opt: u8,
    fmt: &[u8],
    i: &mut usize,
    h: &mut Header,
) -> mlua::Result<()> {
    match opt {
        b' ' => {}
        b'>' => h.big = true,
        b'<' => h.big = false,
        b'!' => {
            let a = getnum(lua, fmt, i, MAXALIGN)?;
            if !a.is_power_of_two() {
                return fail(lua, format!("alignment {a} is not a power of 2"));
            }
            h.align = a;
        }
        _ => {
            return argerror_n(lua, 1, &format!("invalid format option '{}'", opt as char));
        }
    }
    Ok(())
}

fn format_arg(lua: &Lua, args: &MultiValue, i: usize) -> mlua::Result<Vec<u8>> {
    match args.get(i) {
        Some(LuaValue::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(v @ (LuaValue::Integer(_) | LuaValue::Number(_))) => {
            Ok(fmt_g14(lua_number(v).unwrap_or(0.0)).into_bytes())
        }
        other => {
            let got = other.map_or("no value", |v| v.type_name());
            argerror_n(lua, i as i64 + 1, &format!("string expected, got {got}"))
        }
    }
}

fn put(out: &mut Vec<u8>, bytes: &[u8], big: bool) {
    if big {
        out.extend(bytes.iter().rev());
    } else {
        out.extend_from_slice(bytes);
    }
}

fn pack(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::String> {
    let fmt = format_arg(lua, &args, 0)?;
    let mut h = Header {
        big: false,
        align: 1,
    };
    let (mut arg, mut total, mut i) = (1usize, 0usize, 0usize);
    let mut out = Vec::new();
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let mut size = optsize(lua, opt, &fmt, &mut i)?;
        let toalign = gettoalign(total, &h, opt, size);
        total += toalign;
        out.extend(std::iter::repeat_n(0u8, toalign));
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = check_number(lua, &args, arg, "pack")?;
                arg += 1;
                let mut value: u64 = if n < 0.0 { cvt(n) as u64 } else { c_u64(n) };
                let mut le = Vec::with_capacity(size);
                for _ in 0..size {
                    le.push((value & 0xff) as u8);
                    value = value.checked_shr(8).unwrap_or(0);
                }
                put(&mut out, &le, h.big);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = check_number(lua, &args, arg, "pack")? as f32;
                arg += 1;
                put(&mut out, &f.to_le_bytes(), h.big);
            }
            b'd' => {
                let d = check_number(lua, &args, arg, "pack")?;
                arg += 1;
                put(&mut out, &d.to_le_bytes(), h.big);
            }
            b'c' | b's' => {
                let s = match args.get(arg) {
                    Some(LuaValue::String(s)) => s.as_bytes().to_vec(),
                    Some(v @ (LuaValue::Integer(_) | LuaValue::Number(_))) => {
                        fmt_g14(lua_number(v).unwrap_or(0.0)).into_bytes()
                    }
                    other => {
                        let got = other.map_or("no value", |v| v.type_name());
                        return argerror_n(
                            lua,
                            arg as i64 + 1,
                            &format!("string expected, got {got}"),
                        );
                    }
                };
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    // lua_struct checks after moving to the next argument: its number is one more.
                    return argerror_n(lua, arg as i64 + 1, "string too short");
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                    size += 1;
                }
            }
            _ => controloptions(lua, opt, &fmt, &mut i, &mut h)?,
        }
        total += size;
    }
    lua.create_string(out)
}

/// x86-64's double → int64 conversion (cvttsd2si): out of range is i64::MIN.
fn cvt(n: f64) -> i64 {
    if (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&n) {
        n as i64
    } else {
        i64::MIN
    }
}

/// C's `(unsigned long long)n` as gcc compiles it on x86-64 (what redis-server does with a
/// number too large for it: 1e20 packs as 0, not as all ones).
fn c_u64(n: f64) -> u64 {
    const TWO63: f64 = 9.223_372_036_854_776e18;
    if n < TWO63 {
        cvt(n) as u64
    } else {
        (cvt(n - TWO63) as u64) ^ (1 << 63)
    }
}

fn getinteger(b: &[u8], big: bool, signed: bool) -> f64 {
    let mut l: u64 = 0;
    let bytes: Box<dyn Iterator<Item = &u8>> = if big {
        Box::new(b.iter())
    } else {
        Box::new(b.iter().rev())
    };
    for &c in bytes {
        l = (l << 8) | u64::from(c);
    }
    if !signed {
        return l as f64;
    }
    let shift = (b.len() * 8).saturating_sub(1);
    if shift < 64 {
        let mask = u64::MAX << shift;
        if l & mask != 0 {
            l |= mask;
        }
    }
    l as i64 as f64
}

fn unpack(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let fmt = format_arg(lua, &args, 0)?;
    let data = format_arg(lua, &args, 1)?;
    let pos = match args.get(2) {
        None | Some(LuaValue::Nil) => 1i64,
        Some(_) => check_number(lua, &args, 2, "unpack")? as i64,
    };
    if pos <= 0 {
        return argerror_n(lua, 3, "offset must be 1 or greater");
    }
    let mut pos = (pos - 1) as usize;
    let ld = data.len();
    let mut h = Header {
        big: false,
        align: 1,
    };
    let mut out: Vec<LuaValue> = Vec::new();
    let mut i = 0;
    let short = |lua: &Lua| argerror_n::<()>(lua, 2, "data string too short");
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let mut size = optsize(lua, opt, &fmt, &mut i)?;
        pos += gettoalign(pos, &h, opt, size);
        if !(size <= ld && pos <= ld - size) {
            short(lua)?;
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let v = getinteger(&data[pos..pos + size], h.big, opt.is_ascii_lowercase());
                out.push(LuaValue::Number(v));
            }
            b'x' => {}
            b'f' | b'd' => {
                let mut b = data[pos..pos + size].to_vec();
                if h.big {
                    b.reverse();
                }
                let v = if opt == b'f' {
                    f64::from(f32::from_le_bytes(b.try_into().unwrap_or([0; 4])))
                } else {
                    f64::from_le_bytes(b.try_into().unwrap_or([0; 8]))
                };
                out.push(LuaValue::Number(v));
            }
            b'c' => {
                if size == 0 {
                    let n = out.last().and_then(lua_number);
                    let Some(n) = n else {
                        return fail(lua, "format 'c0' needs a previous size".into());
                    };
                    out.pop();
                    size = n as usize;
                    if !(size <= ld && pos <= ld - size) {
                        short(lua)?;
                    }
                }
                out.push(LuaValue::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(e) = data[pos..].iter().position(|&c| c == 0) else {
                    return fail(lua, "unfinished string in data".into());
                };
                out.push(LuaValue::String(lua.create_string(&data[pos..pos + e])?));
                size = e + 1;
            }
            _ => controloptions(lua, opt, &fmt, &mut i, &mut h)?,
        }
        pos += size;
    }
    out.push(LuaValue::Number((pos + 1) as f64));
    Ok(MultiValue::from_iter(out))
}

fn size(lua: &Lua, args: MultiValue) -> mlua::Result<f64> {
    let fmt = format_arg(lua, &args, 0)?;
    let mut h = Header {
        big: false,
        align: 1,
    };
    let (mut pos, mut i) = (0usize, 0usize);
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let size = optsize(lua, opt, &fmt, &mut i)?;
        pos += gettoalign(pos, &h, opt, size);
        if opt == b's' {
            return argerror_n(lua, 1, "option 's' has no fixed size");
        } else if opt == b'c' && size == 0 {
            return argerror_n(lua, 1, "option 'c0' has no fixed size");
        }
        if !opt.is_ascii_alphanumeric() {
            controloptions(lua, opt, &fmt, &mut i, &mut h)?;
        }
        pos += size;
    }
    Ok(pos as f64)
}

/// Builds the `struct` table.
pub(super) fn struct_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("pack", lua.create_function(pack)?)?;
    t.raw_set("unpack", lua.create_function(unpack)?)?;
    t.raw_set("size", lua.create_function(size)?)?;
    Ok(t)
}
