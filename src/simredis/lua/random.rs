//! `math.random`/`math.randomseed`: Redis's rand48, so the same script gives the same
//! numbers on every server and in the simulation.

use super::convert::lua_number;
use super::errors::{raise, where_, Raised};
use super::state::RunState;
use mlua::{Lua, MultiValue};

pub(super) const RAND48_MASK: u64 = (1 << 48) - 1;
/// The static initial state of Redis's rand.c (x = {0x330E, 0xABCD, 0x1234}).
pub(super) const RAND48_INIT: u64 = 0x1234_ABCD_330E;

pub(super) fn srand48(seed: i32) -> u64 {
    (u64::from(seed as u32) << 16) | 0x330E
}

pub(super) fn lrand48(state: &mut u64) -> i32 {
    *state = (0x5_DEEC_E66D_u64.wrapping_mul(*state).wrapping_add(0xB)) & RAND48_MASK;
    (*state >> 17) as i32
}

pub(super) fn check_int(lua: &Lua, args: &MultiValue, i: usize, fname: &str) -> mlua::Result<i64> {
    match args.get(i).and_then(lua_number) {
        Some(n) => Ok(n as i64),
        None => {
            let got = args.get(i).map_or("no value", |v| v.type_name());
            raise(Raised::Text(format!(
                "{}bad argument #{} to '{fname}' (number expected, got {got})",
                where_(lua, 1),
                i + 1
            )))
        }
    }
}

pub(super) fn math_random(lua: &Lua, args: MultiValue) -> mlua::Result<f64> {
    let x = {
        let mut st = lua.app_data_mut::<RunState>().expect("run state");
        lrand48(&mut st.rand48)
    };
    const MAX: i32 = i32::MAX;
    let r = f64::from(x % MAX) / f64::from(MAX);
    let empty = |n: usize| {
        raise(Raised::Text(format!(
            "{}bad argument #{n} to 'random' (interval is empty)",
            where_(lua, 1)
        )))
    };
    match args.len() {
        0 => Ok(r),
        1 => {
            let u = check_int(lua, &args, 0, "random")?;
            if u < 1 {
                return empty(1);
            }
            Ok((r * u as f64).floor() + 1.0)
        }
        2 => {
            let l = check_int(lua, &args, 0, "random")?;
            let u = check_int(lua, &args, 1, "random")?;
            if l > u {
                return empty(2);
            }
            Ok((r * (u - l + 1) as f64).floor() + l as f64)
        }
        _ => raise(Raised::Text(format!(
            "{}wrong number of arguments",
            where_(lua, 1)
        ))),
    }
}

pub(super) fn math_randomseed(lua: &Lua, args: MultiValue) -> mlua::Result<()> {
    let seed = check_int(lua, &args, 0, "randomseed")?;
    let mut st = lua.app_data_mut::<RunState>().expect("run state");
    st.rand48 = srand48(seed as i32);
    Ok(())
}
