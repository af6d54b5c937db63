//! Sorted-set commands: `ZADD` (NX/XX/GT/LT/CH/INCR), `ZINCRBY`, `ZRANGE` (by rank or BYSCORE, REV,
//! LIMIT, WITHSCORES), `ZRANGEBYSCORE`, `ZREM`, `ZREMRANGEBYSCORE`, `ZSCORE`, `ZCARD`.
//!
//! Why they exist: the Redisson article's fair lock keeps each waiter's timeout in a sorted
//! set next to its queue list. Replies and errors were measured on redis-server 7.0.15:
//! scores are answered with `%.17g` (`0.1` is `0.10000000000000001`, infinities `inf`/`-inf`),
//! a score argument is parsed like Redis's `strtod` check (hex integers accepted, a leading
//! space, NaN and overflow refused), and a write is replicated verbatim only if it changed
//! something. Ranges follow `zslParseRange`: `(` makes a bound exclusive and an empty bound
//! reads as 0 (a `strtod` quirk). BYLEX is not modelled: no lock library uses it.

use super::context::{Ctx, Db};
use super::keyspace::Data;
use super::num::{fmt_g17, parse_i64};
use super::reply::{self, bulk};
use super::sorted_set::ZSet;
use redis::Value;

/// Redis's `getDoubleFromObject`: strict `strtod` of a whole argument.
pub fn parse_score(s: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(s).ok()?;
    if text.is_empty() || text.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let v = strtod(text)?;
    let lower = text.to_ascii_lowercase();
    let mantissa = lower.split('e').next().unwrap_or("");
    let overflow = v.is_infinite() && !lower.contains("inf");
    let underflow = v == 0.0 && mantissa.bytes().any(|c| (b'1'..=b'9').contains(&c));
    (!v.is_nan() && !overflow && !underflow).then_some(v)
}

/// C's `strtod` on a whole string (no trailing garbage): decimal, `inf`/`infinity`, and the
/// integer form of hexadecimal (`0x10`).
fn strtod(text: &str) -> Option<f64> {
    let (neg, body) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let v = if let Some(hex) = body.strip_prefix("0x").or(body.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()? as f64
    } else if body.starts_with(['+', '-']) {
        return None;
    } else {
        body.parse::<f64>().ok()?
    };
    Some(if neg { -v } else { v })
}

/// One end of a score range (`zslParseRange`).
#[derive(Clone, Copy, Debug)]
struct Bound {
    value: f64,
    exclusive: bool,
}

fn parse_bound(s: &[u8]) -> Option<Bound> {
    let (exclusive, rest) = match s.first() {
        Some(b'(') => (true, &s[1..]),
        _ => (false, s),
    };
    let text = std::str::from_utf8(rest).ok()?.trim_start();
    let value = if text.is_empty() { 0.0 } else { strtod(text)? };
    (!value.is_nan()).then_some(Bound { value, exclusive })
}

/// A score range; `contains` is Redis's `zslValueGteMin && zslValueLteMax`.
#[derive(Clone, Copy, Debug)]
struct Range {
    min: Bound,
    max: Bound,
}

impl Range {
    fn parse(min: &[u8], max: &[u8]) -> Result<Range, Value> {
        match (parse_bound(min), parse_bound(max)) {
            (Some(min), Some(max)) => Ok(Range { min, max }),
            _ => Err(reply::error("ERR min or max is not a float")),
        }
    }

    fn contains(&self, v: f64) -> bool {
        let above = if self.min.exclusive {
            v > self.min.value
        } else {
            v >= self.min.value
        };
        let below = if self.max.exclusive {
            v < self.max.value
        } else {
            v <= self.max.value
        };
        above && below
    }
}

/// The live sorted set at `key`: Ok(None) if missing, Err(WRONGTYPE) if another type.
fn zset_at<'a>(db: &'a mut Db, ctx: &mut Ctx, key: &[u8]) -> Result<Option<&'a mut ZSet>, Value> {
    match ctx.lookup(&mut db.keys, key) {
        None => Ok(None),
        Some(Data::ZSet(z)) => Ok(Some(z)),
        Some(_) => Err(reply::wrongtype()),
    }
}

fn score_reply(v: f64) -> Value {
    bulk(fmt_g17(v).as_bytes())
}

#[derive(Default)]
struct ZaddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

pub fn zadd(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let mut f = ZaddFlags::default();
    let mut i = 2;
    while i < a.len() {
        let flag = match a[i].to_ascii_lowercase().as_slice() {
            b"nx" => &mut f.nx,
            b"xx" => &mut f.xx,
            b"gt" => &mut f.gt,
            b"lt" => &mut f.lt,
            b"ch" => &mut f.ch,
            b"incr" => &mut f.incr,
            _ => break,
        };
        *flag = true;
        i += 1;
    }
    zadd_pairs(db, ctx, a, &f, i)
}

/// `ZINCRBY key increment member`: `ZADD key INCR increment member`, replicated as itself.
pub fn zincrby(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let f = ZaddFlags {
        incr: true,
        ..ZaddFlags::default()
    };
    zadd_pairs(db, ctx, a, &f, 2)
}

/// Redis's `zaddGenericCommand` after the flags: the score/member pairs start at `a[i]`.
fn zadd_pairs(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>], f: &ZaddFlags, i: usize) -> Value {
    let pairs = &a[i..];
    if pairs.is_empty() || pairs.len() % 2 == 1 {
        return reply::syntax();
    }
    if f.nx && f.xx {
        return reply::error("ERR XX and NX options at the same time are not compatible");
    }
    if ((f.gt || f.lt) && f.nx) || (f.gt && f.lt) {
        return reply::error("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if f.incr && pairs.len() > 2 {
        return reply::error("ERR INCR option supports a single increment-element pair");
    }
    let mut scores = Vec::with_capacity(pairs.len() / 2);
    for p in pairs.chunks(2) {
        match parse_score(&p[0]) {
            Some(s) => scores.push(s),
            None => return reply::error("ERR value is not a valid float"),
        }
    }
    let z = match zset_at(db, ctx, &a[1]) {
        Err(e) => return e,
        Ok(Some(z)) => z,
        Ok(None) if f.xx => return if f.incr { Value::Nil } else { Value::Int(0) },
        Ok(None) => {
            db.keys.set(&a[1], Data::ZSet(ZSet::default()), false);
            match db.keys.get_mut(&a[1]) {
                Some(Data::ZSet(z)) => z,
                _ => unreachable!("just created"),
            }
        }
    };
    let (mut added, mut updated, mut processed) = (0, 0, 0);
    let mut last = 0.0;
    let mut nan = false;
    for (p, &score) in pairs.chunks(2).zip(&scores) {
        let member = &p[1];
        match z.score(member) {
            Some(_) if f.nx => {}
            Some(cur) => {
                let new = if f.incr { score + cur } else { score };
                if new.is_nan() {
                    nan = true;
                    break;
                }
                if (f.lt && new >= cur) || (f.gt && new <= cur) {
                    continue;
                }
                if new != cur {
                    z.insert(member, new);
                    updated += 1;
                }
                processed += 1;
                last = new;
            }
            None if f.xx => {}
            None => {
                z.insert(member, score);
                added += 1;
                processed += 1;
                last = score;
            }
        }
    }
    if added + updated > 0 {
        ctx.propagate_args(a);
    }
    if nan {
        return reply::error("ERR resulting score is not a number (NaN)");
    }
    match (f.incr, processed > 0) {
        (true, true) => score_reply(last),
        (true, false) => Value::Nil,
        (false, _) => Value::Int(if f.ch { added + updated } else { added }),
    }
}

pub fn zscore(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    match zset_at(db, ctx, &a[1]) {
        Err(e) => e,
        Ok(z) => z
            .and_then(|z| z.score(&a[2]))
            .map_or(Value::Nil, score_reply),
    }
}

pub fn zcard(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    match zset_at(db, ctx, &a[1]) {
        Err(e) => e,
        Ok(z) => Value::Int(z.map_or(0, |z| z.len() as i64)),
    }
}

/// Removes members (or a whole range of them); deletes an emptied key and replicates the
/// command verbatim if anything went.
fn remove_members(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>], range: Option<Range>) -> Value {
    let (removed, empty) = match zset_at(db, ctx, &a[1]) {
        Err(e) => return e,
        Ok(None) => return Value::Int(0),
        Ok(Some(z)) => {
            let doomed: Vec<Vec<u8>> = match range {
                Some(r) => z
                    .iter()
                    .filter(|(_, s)| r.contains(*s))
                    .map(|(m, _)| m.to_vec())
                    .collect(),
                None => a[2..].to_vec(),
            };
            let n = doomed.iter().filter(|m| z.remove(m)).count();
            (n, z.is_empty())
        }
    };
    if empty {
        db.keys.remove(&a[1]);
    }
    if removed > 0 {
        ctx.propagate_args(a);
    }
    Value::Int(removed as i64)
}

pub fn zrem(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    remove_members(db, ctx, a, None)
}

pub fn zremrangebyscore(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    match Range::parse(&a[2], &a[3]) {
        Ok(r) => remove_members(db, ctx, a, Some(r)),
        Err(e) => e,
    }
}

/// What a range query selects.
enum Select {
    Rank(i64, i64),
    Score(Range),
}

/// The options of a range query after its key and bounds.
struct RangeQuery {
    select: Select,
    rev: bool,
    /// (offset, count); a negative count means no limit.
    limit: Option<(i64, i64)>,
    withscores: bool,
}

fn run_range(db: &mut Db, ctx: &mut Ctx, key: &[u8], q: &RangeQuery) -> Value {
    let z = match zset_at(db, ctx, key) {
        Err(e) => return e,
        Ok(None) => return Value::Array(Vec::new()),
        Ok(Some(z)) => z,
    };
    let items: Vec<(&[u8], f64)> = match q.select {
        Select::Rank(start, stop) => {
            let len = z.len() as i64;
            let start = if start < 0 {
                (start + len).max(0)
            } else {
                start
            };
            let stop = if stop < 0 {
                stop + len
            } else {
                stop.min(len - 1)
            };
            if start > stop || start >= len {
                return Value::Array(Vec::new());
            }
            let n = (stop - start + 1) as usize;
            if q.rev {
                z.iter().rev().skip(start as usize).take(n).collect()
            } else {
                z.iter().skip(start as usize).take(n).collect()
            }
        }
        Select::Score(r) => {
            let (offset, count) = q.limit.unwrap_or((0, -1));
            if offset < 0 {
                return Value::Array(Vec::new());
            }
            let count = usize::try_from(count).unwrap_or(usize::MAX);
            let hits = |&(_, s): &(&[u8], f64)| r.contains(s);
            if q.rev {
                let it = z.iter().rev().filter(hits);
                it.skip(offset as usize).take(count).collect()
            } else {
                let it = z.iter().filter(hits);
                it.skip(offset as usize).take(count).collect()
            }
        }
    };
    let mut out = Vec::with_capacity(items.len() * if q.withscores { 2 } else { 1 });
    for (m, s) in items {
        out.push(bulk(m));
        if q.withscores {
            out.push(score_reply(s));
        }
    }
    Value::Array(out)
}

/// Parses `LIMIT offset count` at `a[i]`; returns the pair.
fn parse_limit(a: &[Vec<u8>], i: usize) -> Result<(i64, i64), Value> {
    match (parse_i64(&a[i + 1]), parse_i64(&a[i + 2])) {
        (Some(o), Some(c)) => Ok((o, c)),
        _ => Err(reply::not_integer()),
    }
}

pub fn zrange(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let (mut byscore, mut bylex, mut rev, mut withscores, mut limit) =
        (false, false, false, false, None);
    let mut i = 4;
    while i < a.len() {
        match a[i].to_ascii_lowercase().as_slice() {
            b"withscores" => withscores = true,
            b"limit" if i + 2 < a.len() => {
                match parse_limit(a, i) {
                    Ok(l) => limit = Some(l),
                    Err(e) => return e,
                }
                i += 2;
            }
            b"byscore" => byscore = true,
            b"bylex" => bylex = true,
            b"rev" => rev = true,
            _ => return reply::syntax(),
        }
        i += 1;
    }
    if limit.is_some() && !byscore && !bylex {
        return reply::error(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    if bylex {
        return reply::error("ERR BYLEX is not supported by the simulated Redis");
    }
    let select = if byscore {
        // REV takes the bounds as (max, min).
        let (min, max) = if rev { (&a[3], &a[2]) } else { (&a[2], &a[3]) };
        match Range::parse(min, max) {
            Ok(r) => Select::Score(r),
            Err(e) => return e,
        }
    } else {
        match (parse_i64(&a[2]), parse_i64(&a[3])) {
            (Some(s), Some(e)) => Select::Rank(s, e),
            _ => return reply::not_integer(),
        }
    };
    let q = RangeQuery {
        select,
        rev,
        limit,
        withscores,
    };
    run_range(db, ctx, &a[1], &q)
}

pub fn zrangebyscore(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let (mut withscores, mut limit) = (false, None);
    let mut i = 4;
    while i < a.len() {
        match a[i].to_ascii_lowercase().as_slice() {
            b"withscores" => withscores = true,
            b"limit" if i + 2 < a.len() => {
                match parse_limit(a, i) {
                    Ok(l) => limit = Some(l),
                    Err(e) => return e,
                }
                i += 2;
            }
            _ => return reply::syntax(),
        }
        i += 1;
    }
    let select = match Range::parse(&a[2], &a[3]) {
        Ok(r) => Select::Score(r),
        Err(e) => return e,
    };
    let q = RangeQuery {
        select,
        rev: false,
        limit,
        withscores,
    };
    run_range(db, ctx, &a[1], &q)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_parse_like_redis() {
        assert_eq!(parse_score(b"0x10"), Some(16.0));
        assert_eq!(parse_score(b"1e3"), Some(1000.0));
        assert_eq!(parse_score(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_score(b" 5"), None);
        assert_eq!(parse_score(b"nan"), None);
        assert_eq!(parse_score(b"1e400"), None);
        assert_eq!(parse_score(b"1e-400"), None);
        assert_eq!(parse_score(b"abc"), None);
    }
}
