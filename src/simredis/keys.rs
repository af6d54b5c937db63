//! Commands on a key of any type: `DEL`/`UNLINK`, `EXISTS`, `TYPE`.
//!
//! Why they are apart from the type families: they look only at whether a key is live (after
//! lazy expiry) and at its type, never at its value. `DEL` counts only keys that were live,
//! and is replicated only if it removed one (a `DEL` of nothing is not, as on 7.0.15).

use super::context::{Ctx, Db};
use redis::Value;

pub fn del(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let mut n = 0;
    for k in &a[1..] {
        if ctx.expire_if_needed(&mut db.keys, k) {
            continue;
        }
        if db.keys.remove(k) {
            n += 1;
        }
    }
    if n > 0 {
        ctx.propagate_args(a);
    }
    Value::Int(n)
}

pub fn exists(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let mut n = 0;
    for k in &a[1..] {
        if ctx.lookup(&mut db.keys, k).is_some() {
            n += 1;
        }
    }
    Value::Int(n)
}

pub fn type_(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let name = ctx
        .lookup(&mut db.keys, &a[1])
        .map_or("none", |d| d.type_name());
    Value::SimpleString(name.to_string())
}
