//! LuaBitOp (`bit`), the bit-operations library Redis bundles for scripts.
//!
//! Why it exists: scripts written for Redis may use `bit.band`, `bit.tohex` and friends (a
//! lock that packs a fencing token, a rate limiter's bitmap); without them a script passes
//! on a real server and fails in simulation with "nonexistent global variable 'bit'".
//! Semantics follow LuaBitOp 1.0.2 as Redis 7.0.15 ships it: numbers are normalised to
//! signed 32 bits by adding 2^52+2^51 and keeping the low word (round half to even), shift
//! counts use their low 5 bits, and argument errors are Lua's `bad argument` texts.

use super::convert::lua_number;
use super::errors::{raise, where_, Raised};
use mlua::{Lua, MultiValue, Table, Value as LuaValue};

/// Lua's `luaL_checknumber` for argument `i` (0-based) of `fname`, with Lua's error text.
pub(super) fn check_number(
    lua: &Lua,
    args: &MultiValue,
    i: usize,
    fname: &str,
) -> mlua::Result<f64> {
    let v = args.get(i).unwrap_or(&LuaValue::Nil);
    if let Some(n) = lua_number(v) {
        return Ok(n);
    }
    let got = if i >= args.len() {
        "no value"
    } else {
        v.type_name()
    };
    arg_error(lua, i, fname, &format!("number expected, got {got}"))
}

/// `luaL_argerror` for argument `i` (0-based): `<where>bad argument #<n> to '<name>' (<msg>)`,
/// where the name is the one the caller used (`'?'` when called through `pcall`, as in Lua).
pub(super) fn arg_error<T>(lua: &Lua, i: usize, _fname: &str, msg: &str) -> mlua::Result<T> {
    argerror_n(lua, i as i64 + 1, msg)
}

/// `luaL_argerror` with Lua's 1-based argument number (0 is allowed, as lua_cmsgpack uses it).
pub(super) fn argerror_n<T>(lua: &Lua, n: i64, msg: &str) -> mlua::Result<T> {
    let (name, method) = lua
        .inspect_stack(0, |d| {
            let names = d.names();
            (
                names.name.map(|n| n.into_owned()),
                names.name_what == Some("method"),
            )
        })
        .unwrap_or((None, false));
    let name = name.unwrap_or_else(|| "?".into());
    let text = match (method, n - i64::from(method)) {
        (true, 0) => format!("calling '{name}' on bad self ({msg})"),
        (_, n) => format!("bad argument #{n} to '{name}' ({msg})"),
    };
    raise(Raised::Text(format!("{}{text}", where_(lua, 1))))
}

/// LuaBitOp's `barg`: the number's low 32 bits after adding 2^52+2^51 (round half to even).
fn tobit(n: f64) -> i32 {
    let b = n + 6_755_399_441_055_744.0;
    b.to_bits() as u32 as i32
}

fn int(lua: &Lua, args: &MultiValue, i: usize, fname: &str) -> mlua::Result<i32> {
    check_number(lua, args, i, fname).map(tobit)
}

fn ret(v: i32) -> LuaValue {
    LuaValue::Number(f64::from(v))
}

/// Named operations of the library, by arity.
type Unary = (&'static str, fn(i32) -> i32);
type Binary = (&'static str, fn(i32, i32) -> i32);
type Shift = (&'static str, fn(i32, u32) -> i32);

/// Builds the `bit` table.
pub(super) fn bit_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let unary: [Unary; 3] = [
        ("tobit", |x| x),
        ("bnot", |x| !x),
        ("bswap", |x| x.swap_bytes()),
    ];
    for (name, op) in unary {
        t.raw_set(
            name,
            lua.create_function(move |lua, args: MultiValue| {
                Ok(ret(op(int(lua, &args, 0, name)?)))
            })?,
        )?;
    }
    let folds: [Binary; 3] = [
        ("band", |a, b| a & b),
        ("bor", |a, b| a | b),
        ("bxor", |a, b| a ^ b),
    ];
    for (name, op) in folds {
        t.raw_set(
            name,
            lua.create_function(move |lua, args: MultiValue| {
                let mut acc = int(lua, &args, 0, name)?;
                for i in 1..args.len() {
                    acc = op(acc, int(lua, &args, i, name)?);
                }
                Ok(ret(acc))
            })?,
        )?;
    }
    let shifts: [Shift; 5] = [
        ("lshift", |x, n| ((x as u32) << n) as i32),
        ("rshift", |x, n| ((x as u32) >> n) as i32),
        ("arshift", |x, n| x >> n),
        ("rol", |x, n| (x as u32).rotate_left(n) as i32),
        ("ror", |x, n| (x as u32).rotate_right(n) as i32),
    ];
    for (name, op) in shifts {
        t.raw_set(
            name,
            lua.create_function(move |lua, args: MultiValue| {
                let x = int(lua, &args, 0, name)?;
                let n = int(lua, &args, 1, name)? as u32 & 31;
                Ok(ret(op(x, n)))
            })?,
        )?;
    }
    t.raw_set(
        "tohex",
        lua.create_function(|lua, args: MultiValue| {
            let x = int(lua, &args, 0, "tohex")? as u32;
            let n = match args.get(1) {
                None | Some(LuaValue::Nil) => 8,
                Some(_) => int(lua, &args, 1, "tohex")?,
            };
            let (upper, n) = if n < 0 {
                (true, n.unsigned_abs())
            } else {
                (false, n as u32)
            };
            let n = n.min(8) as usize;
            let full = if upper {
                format!("{x:08X}")
            } else {
                format!("{x:08x}")
            };
            lua.create_string(&full[8 - n..])
        })?,
    )?;
    Ok(t)
}
