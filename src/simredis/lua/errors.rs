//! Script errors as Redis 7.0 shapes them: error tables, the message handler's
//! `ERR ... script: <sha>, on @user_script:<line>.` text, and errors raised from Rust.

use super::state::RunState;
use crate::simredis::num::fmt_g14;
use mlua::{Lua, Value as LuaValue};
use std::fmt;

/// A script is stopped after this many million Lua instructions. Real Redis would keep
/// running it (answering BUSY to everyone else) until SCRIPT KILL; in a simulation an endless
/// script would freeze simulated time for every node, so it is cut off with an error instead.
/// Lock scripts run a few hundred instructions.
pub const INSTRUCTION_BUDGET: u32 = 200;

/// An error raised from Rust into a running script.
#[derive(Debug, Clone)]
pub(super) enum Raised {
    /// A Redis error table's message, `CODE msg` (from `redis.call` and friends).
    Reply(String),
    /// A plain Lua error string (e.g. `user_script:1: Attempt to modify a readonly table`).
    Text(String),
}

impl fmt::Display for Raised {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Raised::Reply(s) | Raised::Text(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for Raised {}

pub(super) fn find_raised(e: &mlua::Error) -> Option<&Raised> {
    match e {
        mlua::Error::ExternalError(ext) => ext.downcast_ref::<Raised>(),
        mlua::Error::CallbackError { cause, .. } => find_raised(cause),
        mlua::Error::WithContext { cause, .. } => find_raised(cause),
        _ => None,
    }
}

pub(super) fn raise<T>(r: Raised) -> mlua::Result<T> {
    Err(mlua::Error::external(r))
}

/// Redis's `luaPushErrorBuff`: the message of an error table. `-CODE msg` keeps its code
/// (a `-WORD` without a space becomes `ERR WORD`), a bare message gets `ERR`.
pub(super) fn error_table_text(buf: &str) -> String {
    let trim = |m: &str| m.trim_matches(['\r', '\n']).to_string();
    match buf.strip_prefix('-') {
        Some(rest) => match rest.split_once(' ') {
            Some((code, msg)) => format!("{code} {}", trim(msg)),
            None => format!("ERR {}", trim(rest)),
        },
        None => format!("ERR {}", trim(buf)),
    }
}

/// The error-table message for an error reply of a command.
pub(super) fn reply_error_table_text(reply_text: &str) -> String {
    error_table_text(&format!("-{reply_text}"))
}

pub(super) fn err_table(lua: &Lua, text: &str) -> mlua::Result<LuaValue> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set("err", text)?;
    Ok(LuaValue::Table(t))
}

pub(super) fn ok_table(lua: &Lua, text: &[u8]) -> mlua::Result<LuaValue> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set("ok", lua.create_string(text)?)?;
    Ok(LuaValue::Table(t))
}

/// `luaL_where(L, level)`: `source:line: ` of a Lua function at that stack level, or "".
pub(super) fn where_(lua: &Lua, level: usize) -> String {
    lua.inspect_stack(level, |d| {
        let src = d.source();
        match (src.what, src.short_src, d.current_line()) {
            ("C", _, _) => String::new(),
            (_, Some(s), Some(l)) => format!("{s}:{l}: "),
            _ => String::new(),
        }
    })
    .unwrap_or_default()
}

/// Lua's `tostring` for the values an error or a global name can be.
pub(super) fn lua_tostring(v: &LuaValue) -> String {
    match v {
        LuaValue::Nil => "nil".into(),
        LuaValue::Boolean(b) => b.to_string(),
        LuaValue::Integer(i) => fmt_g14(*i as f64),
        LuaValue::Number(n) => fmt_g14(*n),
        LuaValue::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
        other => other.type_name().to_string(),
    }
}

/// The xpcall message handler (Redis's `__redis__err__handler` plus the formatting of
/// `luaCallFunction`): returns the final error reply text.
pub(super) fn message_handler(lua: &Lua, err: LuaValue) -> mlua::Result<mlua::String> {
    let msg = match &err {
        LuaValue::Error(e) => match find_raised(e) {
            Some(Raised::Reply(m)) => m.clone(),
            Some(Raised::Text(t)) => format!("ERR {t}"),
            None => format!("ERR {e}"),
        },
        LuaValue::Table(t) => match t.raw_get::<LuaValue>("err")? {
            LuaValue::String(s) => s.to_string_lossy(),
            LuaValue::Number(n) => fmt_g14(n),
            LuaValue::Integer(i) => fmt_g14(i as f64),
            _ => "ERR unknown error".into(),
        },
        other => format!("ERR {}", lua_tostring(other)),
    };
    // Level 0 is this handler, level 1 raised the error; if that is a C function (redis.call,
    // error, a metamethod) the script line is one level further up.
    let frame = |level: usize| {
        lua.inspect_stack(level, |d| {
            let src = d.source();
            (
                src.what,
                src.source.map(|s| s.into_owned()),
                d.current_line().map_or(-1, |l| l as i64),
            )
        })
    };
    let mut info = frame(1);
    if matches!(info, Some(("C", _, _))) {
        info = frame(2);
    }
    let sha = {
        let st = lua.app_data_ref::<RunState>().expect("run state");
        match &st.function {
            Some(name) => name.clone(),
            None => String::from_utf8_lossy(&st.sha).into_owned(),
        }
    };
    let text = match info {
        Some((_, Some(source), line)) => format!("{msg} script: {sha}, on {source}:{line}."),
        _ => msg,
    };
    lua.create_string(text)
}
