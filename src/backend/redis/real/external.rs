//! `--redis URL`: a scenario's workload against a Redis that lockcheck did not start.
//!
//! The user's servers are used as they are. lockcheck never faults them, so a scenario with
//! server faults is refused (with the reason); it never runs `FLUSHALL`, `FLUSHDB`,
//! `CONFIG SET` or `DEBUG` on them; every key the lock writes starts with the run's key prefix
//! (by default a fresh `lockcheck:<uuid>:`), and afterwards lockcheck deletes the keys under that
//! prefix and nothing else (`SCAN MATCH <prefix>*`, then `DEL` of what it found). The protected
//! resource the workload writes to is still lockcheck's own `redis-server`, not the user's.

use crate::backend::redis::real::recipes::ExternalServers;
use crate::backend::redis::table;
use crate::fault::Refused;
use crate::real::nemesis::recipes::ask;
use crate::real::RealError;
use crate::scenario::Scenario;
use std::time::Duration;

/// How long lockcheck waits for a user's server to accept a connection and answer `PING`.
const REACH_TIMEOUT: Duration = Duration::from_secs(3);

pub use crate::real::external_redis::{redact, ExternalRedis};

/// Why `--redis` cannot run `s`, or `None`. Checked before anything connects.
pub fn refusal(s: &Scenario, ext: &ExternalRedis) -> Option<String> {
    if table::cluster(s).is_some() {
        return Some(cluster_refusal(s));
    }
    let mut faults = Vec::new();
    for f in &s.faults {
        if let Err(Refused::Because(what)) = ask(&ExternalServers, f) {
            faults.push(what);
        }
    }
    if s.redis.sentinels > 0 {
        faults.push(
            "Redis Sentinel (lockcheck's sentinels watch and fail over its own servers)"
                .to_string(),
        );
    }
    if !s.clocks.is_perfect() {
        let masters: Vec<String> = s
            .clocks
            .applies_to(&s.node_names())
            .into_iter()
            .filter(|n| !n.starts_with("client-"))
            .collect();
        if !masters.is_empty() {
            faults.push(format!("[clocks] on {}", masters.join(", ")));
        }
    }
    if !faults.is_empty() {
        return Some(format!(
            "`{}` has server faults ({}): --redis runs the workload against your Redis as it is \
             and never faults a server lockcheck did not start; run it with --real instead \
             (lockcheck's own servers) or pick a scenario whose faults are on clients only",
            s.name,
            faults.join(", ")
        ));
    }
    let masters = s.redis.masters as usize;
    if ext.urls.len() != masters {
        return Some(format!(
            "`{}` has {masters} master(s) but --redis gave {} URL(s): give one URL per master, \
             comma-separated (--redis redis://host:port,redis://host:port,...)",
            s.name,
            ext.urls.len()
        ));
    }
    None
}

/// Why `--redis` does not run a scenario with `[redis.cluster]`.
pub fn cluster_refusal(s: &Scenario) -> String {
    format!(
        "`{}` has `[redis.cluster]`: --redis runs against one server per master group, and real \
         mode runs a Redis Cluster only on nodes it spawns (it crashes, partitions and watches \
         them); run it with --real instead",
        s.name
    )
}

/// Connects to `url` and checks that it answers `PING`: one line saying what is wrong if not.
pub fn reach(url: &str) -> Result<(), RealError> {
    let shown = redact(url);
    let fail = |e: redis::RedisError| {
        let text = e.to_string();
        let auth = e.kind() == redis::ErrorKind::AuthenticationFailed
            || [
                "NOAUTH",
                "WRONGPASS",
                "invalid password",
                "invalid username-password",
            ]
            .iter()
            .any(|m| text.contains(m));
        RealError::External(if auth {
            format!(
                "Redis at {shown} refused authentication ({}); put the user and password in the \
                 URL: redis://user:password@host:port",
                one_line(&text)
            )
        } else {
            format!("cannot reach Redis at {shown}: {}", one_line(&text))
        })
    };
    let client = redis::Client::open(url).map_err(fail)?;
    let mut conn = client
        .get_connection_with_timeout(REACH_TIMEOUT)
        .map_err(fail)?;
    conn.set_read_timeout(Some(REACH_TIMEOUT)).map_err(fail)?;
    conn.set_write_timeout(Some(REACH_TIMEOUT)).map_err(fail)?;
    redis::cmd("PING")
        .query::<String>(&mut conn)
        .map_err(fail)?;
    Ok(())
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A `SCAN MATCH` pattern that matches exactly the keys starting with `prefix`.
pub fn match_pattern(prefix: &str) -> String {
    let mut p = String::new();
    for ch in prefix.chars() {
        if matches!(ch, '*' | '?' | '[' | ']' | '\\') {
            p.push('\\');
        }
        p.push(ch);
    }
    p.push('*');
    p
}

/// Deletes the keys under `prefix` on `url` (and only those); returns how many it deleted.
pub fn remove_keys(url: &str, prefix: &str) -> Result<usize, RealError> {
    let shown = redact(url);
    let ctx = |what: &str| format!("{what} on {shown} (keys under `{prefix}`)");
    let client = redis::Client::open(url)
        .map_err(|e| RealError::redis(ctx("removing lockcheck's keys"), e))?;
    let mut conn = client
        .get_connection_with_timeout(REACH_TIMEOUT)
        .map_err(|e| RealError::redis(ctx("connecting to remove lockcheck's keys"), e))?;
    let keys: Vec<Vec<u8>> = {
        let iter = redis::cmd("SCAN")
            .cursor_arg(0)
            .arg("MATCH")
            .arg(match_pattern(prefix))
            .arg("COUNT")
            .arg(1000)
            .clone()
            .iter::<Vec<u8>>(&mut conn)
            .map_err(|e| RealError::redis(ctx("SCAN"), e))?;
        iter.collect::<Result<_, _>>()
            .map_err(|e| RealError::redis(ctx("SCAN"), e))?
    };
    // SCAN's pattern is exact (escaped); the prefix test is a second guard.
    let ours: Vec<&Vec<u8>> = keys
        .iter()
        .filter(|k| k.starts_with(prefix.as_bytes()))
        .collect();
    for chunk in ours.chunks(500) {
        redis::cmd("DEL")
            .arg(chunk)
            .query::<u64>(&mut conn)
            .map_err(|e| RealError::redis(ctx("DEL"), e))?;
    }
    Ok(ours.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact("redis://u:secret@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact("redis://:secret@h:1"), "redis://:***@h:1");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
    }

    #[test]
    fn glob_characters_of_the_prefix_are_escaped() {
        assert_eq!(match_pattern("lockcheck:a:"), "lockcheck:a:*");
        assert_eq!(match_pattern("x*[y]?\\"), "x\\*\\[y\\]\\?\\\\*");
    }

    /// Every clock fault on a server is refused, the wall clock alone included: lockcheck
    /// cannot step the clock of a server it did not start. A client's clock is lockcheck's own.
    #[test]
    fn a_server_clock_fault_is_refused_a_client_one_is_not() {
        let ext = ExternalRedis::parse("redis://127.0.0.1:1", None).unwrap();
        let scenario = |node: &str| {
            let text = format!(
                "name = \"t\"\nexpect = \"safe\"\nduration_ms = 1000\n\
                 [lock]\nkind = \"set-nx-px\"\nttl_ms = 100\n\
                 [workload]\nclients = 2\ncycles = 1\n\
                 [[faults]]\nkind = \"wall_clock_jump\"\nnode = \"{node}\"\nat_ms = 10\nby_ms = 5000\n"
            );
            Scenario::parse("t.toml", &text).unwrap()
        };
        let why = refusal(&scenario("redis-0"), &ext).expect("refused");
        assert!(why.contains("a wall-clock jump on redis-0"), "{why}");
        assert_eq!(refusal(&scenario("client-1"), &ext), None);
    }

    #[test]
    fn urls_and_prefix_are_checked() {
        let e = ExternalRedis::parse("redis://127.0.0.1:1,redis://127.0.0.1:2", None).unwrap();
        assert_eq!(e.urls.len(), 2);
        assert!(e.prefix_for_run().starts_with("lockcheck:"));
        assert_ne!(e.prefix_for_run(), e.prefix_for_run());
        assert!(ExternalRedis::parse("", None).is_err());
        assert!(ExternalRedis::parse("http://x", None).is_err());
        assert!(ExternalRedis::parse("redis://h:1", Some(String::new())).is_err());
    }
}
