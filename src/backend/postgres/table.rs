//! The `[postgres]` table: the deployment a PostgreSQL lock runs on, and when the server and
//! the pooler end a session by themselves.
//!
//! ```toml
//! [postgres]
//! standby = true               # a streaming standby `pg-1`, which a `failover` promotes
//! pooler = "transaction"       # PgBouncer in front: "none" (default), "session", "transaction"
//! pool_size = 2                # PgBouncer's default_pool_size
//! server_lifetime_ms = 3600000 # PgBouncer closes a server connection this old when it is back
//! server_reset_query_always = false
//! idle_session_timeout_ms = 0  # the server ends a session idle this long (0: never)
//! idle_in_transaction_timeout_ms = 0
//! keepalive_idle_s = 7200      # TCP keepalive: how long a cut-off client's session lives on
//! keepalive_interval_s = 75
//! keepalive_count = 9
//! latency_ms = [1, 3]
//! request_timeout_ms = 5000    # how long a client waits for an answer
//! failover_detect_ms = 1000    # from the primary's death to the standby's promotion
//! app_transactions = [[100, 3000]] # the application's other traffic: [at_ms, for_ms] each
//! ```
//!
//! `app_transactions` is the rest of the application sharing the pool: each is a transaction
//! (`BEGIN` at `at_ms`, `COMMIT` `for_ms` later) from a connection that is not a lock client.
//! Behind PgBouncer in transaction mode it keeps one server connection lent for its whole
//! length, which decides which connection the lock clients are lent meanwhile: what makes a
//! lock stranded on an idle server connection, rather than inherited by the next client lent
//! it, a matter of construction instead of timing.

use crate::scenario::{Invalid, Scenario};

/// The primary's node name.
pub const PRIMARY: &str = "pg-0";
/// The standby's node name.
pub const STANDBY: &str = "pg-1";
/// The pooler's node name.
pub const BOUNCER: &str = "pgbouncer";
/// The scenario table this backend reads.
pub const TABLE: &str = "postgres";

/// The `[postgres]` table of a scenario on PostgreSQL (its defaults when the file has none).
pub fn of(s: &Scenario) -> PostgresTable {
    s.table::<PostgresTable>(TABLE).cloned().unwrap_or_default()
}

/// How PgBouncer lends server connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolMode {
    /// A server connection per client session: a session lock works as without a pooler.
    Session,
    /// A server connection per transaction: session state, session locks included, stays on
    /// the server connection, not with the client.
    Transaction,
}

/// Which pooler the clients go through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Pooler {
    /// Clients connect to the server.
    #[default]
    None,
    /// PgBouncer with `pool_mode = session`.
    Session,
    /// PgBouncer with `pool_mode = transaction`.
    Transaction,
}

impl Pooler {
    /// PgBouncer's `pool_mode`, when there is a pooler.
    pub fn mode(self) -> Option<PoolMode> {
        match self {
            Pooler::None => None,
            Pooler::Session => Some(PoolMode::Session),
            Pooler::Transaction => Some(PoolMode::Transaction),
        }
    }
}

/// The keys `[postgres]` takes.
pub const KEYS: &[&str] = &[
    "standby",
    "pooler",
    "pool_size",
    "server_lifetime_ms",
    "server_reset_query_always",
    "idle_session_timeout_ms",
    "idle_in_transaction_timeout_ms",
    "keepalive_idle_s",
    "keepalive_interval_s",
    "keepalive_count",
    "latency_ms",
    "request_timeout_ms",
    "failover_detect_ms",
    "app_transactions",
];

/// `[postgres]`, read by the backend itself (`BackendDecl::read_table`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostgresTable {
    /// A streaming standby `pg-1`, promoted by a `failover`.
    pub standby: bool,
    /// The pooler in front of the server.
    pub pooler: Pooler,
    /// PgBouncer's `default_pool_size`.
    pub pool_size: u32,
    /// PgBouncer's `server_lifetime`, in ms (PgBouncer takes seconds: real mode rounds up).
    pub server_lifetime_ms: u64,
    /// PgBouncer's `server_reset_query_always`.
    pub server_reset_query_always: bool,
    /// The server's `idle_session_timeout` (0: off).
    pub idle_session_timeout_ms: u64,
    /// The server's `idle_in_transaction_session_timeout` (0: off).
    pub idle_in_transaction_timeout_ms: u64,
    /// The server's `tcp_keepalives_idle` (s).
    pub keepalive_idle_s: u64,
    /// The server's `tcp_keepalives_interval` (s).
    pub keepalive_interval_s: u64,
    /// The server's `tcp_keepalives_count`.
    pub keepalive_count: u64,
    /// One-way latency of a simulated link, [low, high] ms.
    pub latency_ms: [u64; 2],
    /// How long a client waits for an answer before it hangs up.
    pub request_timeout_ms: u64,
    /// From the primary's death to the standby's promotion, in a `failover`.
    pub failover_detect_ms: u64,
    /// The application's other transactions through the pooler, `(at_ms, for_ms)` each, in
    /// the order written.
    pub app_transactions: Vec<(u64, u64)>,
}

impl Default for PostgresTable {
    fn default() -> PostgresTable {
        PostgresTable {
            standby: false,
            pooler: Pooler::None,
            pool_size: 2,
            server_lifetime_ms: 3_600_000,
            server_reset_query_always: false,
            idle_session_timeout_ms: 0,
            idle_in_transaction_timeout_ms: 0,
            // Linux's defaults: two hours, then nine probes 75 s apart.
            keepalive_idle_s: 7200,
            keepalive_interval_s: 75,
            keepalive_count: 9,
            latency_ms: [1, 3],
            request_timeout_ms: 5000,
            failover_detect_ms: 1000,
            app_transactions: Vec::new(),
        }
    }
}

impl PostgresTable {
    /// How long after a client's socket went quiet the server's TCP keepalive gives up on it.
    pub fn keepalive_ms(&self) -> u64 {
        (self.keepalive_idle_s + self.keepalive_interval_s * self.keepalive_count) * 1000
    }

    /// Reads the table as written (`None`: the defaults), key by key, so an error names the
    /// key it is about (and the format points at it) in plain words.
    pub fn read(table: Option<&toml::Value>) -> Result<PostgresTable, Invalid> {
        let mut t = PostgresTable::default();
        let Some(table) = table else {
            return Ok(t);
        };
        let Some(entries) = table.as_table() else {
            return Err((None, "`[postgres]` must be a table of keys".into()));
        };
        for (key, value) in entries {
            let Some(&known) = KEYS.iter().find(|k| **k == key.as_str()) else {
                return Err((
                    None,
                    format!(
                        "unknown key `{}` in `[postgres]`, expected one of {}",
                        crate::scenario::input::excerpt(key, 40),
                        KEYS.join(", ")
                    ),
                ));
            };
            t.set(known, value).map_err(|m| (Some(known), m))?;
        }
        t.check()?;
        Ok(t)
    }

    /// Sets key `key` from `value`, or says in plain words what it takes.
    fn set(&mut self, key: &'static str, value: &toml::Value) -> Result<(), String> {
        let number = || -> Result<u64, String> {
            value
                .as_integer()
                .and_then(|n| u64::try_from(n).ok())
                .ok_or_else(|| format!("`{key}` takes a whole number of 0 or more, got {value}"))
        };
        let flag = || -> Result<bool, String> {
            value
                .as_bool()
                .ok_or_else(|| format!("`{key}` takes true or false, got {value}"))
        };
        match key {
            "standby" => self.standby = flag()?,
            "server_reset_query_always" => self.server_reset_query_always = flag()?,
            "pooler" => {
                self.pooler = match value.as_str() {
                    Some("none") => Pooler::None,
                    Some("session") => Pooler::Session,
                    Some("transaction") => Pooler::Transaction,
                    _ => {
                        return Err(format!(
                            "`pooler` is \"none\", \"session\" or \"transaction\", got {value}"
                        ))
                    }
                }
            }
            "pool_size" => {
                self.pool_size = u32::try_from(number()?).map_err(|_| {
                    format!(
                    "`pool_size = {value}`: PgBouncer's pool here has 1 to 100 server connections"
                )
                })?
            }
            "server_lifetime_ms" => self.server_lifetime_ms = number()?,
            "idle_session_timeout_ms" => self.idle_session_timeout_ms = number()?,
            "idle_in_transaction_timeout_ms" => self.idle_in_transaction_timeout_ms = number()?,
            "keepalive_idle_s" => self.keepalive_idle_s = number()?,
            "keepalive_interval_s" => self.keepalive_interval_s = number()?,
            "keepalive_count" => self.keepalive_count = number()?,
            "request_timeout_ms" => self.request_timeout_ms = number()?,
            "failover_detect_ms" => self.failover_detect_ms = number()?,
            "latency_ms" => {
                let pair = value.as_array().filter(|a| a.len() == 2).and_then(|a| {
                    let lo = a[0].as_integer().and_then(|n| u64::try_from(n).ok())?;
                    let hi = a[1].as_integer().and_then(|n| u64::try_from(n).ok())?;
                    Some([lo, hi])
                });
                self.latency_ms = pair.ok_or_else(|| {
                    format!("`latency_ms` is a range [low, high] of whole ms, got {value}")
                })?;
            }
            "app_transactions" => {
                let windows = value.as_array().and_then(|a| {
                    a.iter()
                        .map(|w| {
                            let w = w.as_array().filter(|w| w.len() == 2)?;
                            let at = w[0].as_integer().and_then(|n| u64::try_from(n).ok())?;
                            let len = w[1].as_integer().and_then(|n| u64::try_from(n).ok())?;
                            Some((at, len))
                        })
                        .collect::<Option<Vec<_>>>()
                });
                self.app_transactions = windows.ok_or_else(|| {
                    format!(
                        "`app_transactions` is a list of [at_ms, for_ms] pairs of whole ms, got {}",
                        crate::scenario::input::excerpt(&value.to_string(), 60)
                    )
                })?;
            }
            _ => unreachable!("every key of KEYS is set above"),
        }
        Ok(())
    }

    fn check(&self) -> Result<(), Invalid> {
        if self.latency_ms[0] > self.latency_ms[1] {
            return Err((
                Some("latency_ms"),
                "`latency_ms` is a range [low, high] and needs low <= high".into(),
            ));
        }
        if self.request_timeout_ms == 0 {
            return Err((
                Some("request_timeout_ms"),
                "`request_timeout_ms` must be at least 1".into(),
            ));
        }
        if self.pooler != Pooler::None && !(1..=100).contains(&self.pool_size) {
            return Err((
                Some("pool_size"),
                format!(
                    "`pool_size = {}`: PgBouncer's pool here has 1 to 100 server connections",
                    self.pool_size
                ),
            ));
        }
        if self.pooler != Pooler::None && self.server_lifetime_ms == 0 {
            return Err((
                Some("server_lifetime_ms"),
                "`server_lifetime_ms` must be at least 1".into(),
            ));
        }
        if self.keepalive_idle_s == 0 || self.keepalive_interval_s == 0 || self.keepalive_count == 0
        {
            return Err((
                Some("keepalive_idle_s"),
                "`keepalive_idle_s`, `keepalive_interval_s` and `keepalive_count` must be at least 1 (the server's settings take whole seconds)".into(),
            ));
        }
        if self.pooler == Pooler::None && !self.app_transactions.is_empty() {
            return Err((
                Some("app_transactions"),
                "`app_transactions` share PgBouncer's pool with the lock clients: set `pooler = \"session\"` or `\"transaction\"` (without a pooler they take no connection from anyone)".into(),
            ));
        }
        if self.app_transactions.len() > 16 {
            return Err((
                Some("app_transactions"),
                "`app_transactions` takes at most 16 transactions".into(),
            ));
        }
        const DAY_MS: u64 = 86_400_000;
        if let Some((at, len)) = self
            .app_transactions
            .iter()
            .find(|(at, len)| *at > DAY_MS || *len > DAY_MS || *len == 0)
        {
            return Err((
                Some("app_transactions"),
                format!("`app_transactions`: [{at}, {len}] needs 0 <= at_ms <= a day and 1 <= for_ms <= a day"),
            ));
        }
        for (key, v) in [
            ("idle_session_timeout_ms", self.idle_session_timeout_ms),
            (
                "idle_in_transaction_timeout_ms",
                self.idle_in_transaction_timeout_ms,
            ),
            ("server_lifetime_ms", self.server_lifetime_ms),
            ("keepalive_idle_s", self.keepalive_idle_s * 1000),
            ("request_timeout_ms", self.request_timeout_ms),
            ("failover_detect_ms", self.failover_detect_ms),
        ] {
            if v > DAY_MS {
                return Err((Some(key), format!("`{key}` must be at most a day")));
            }
        }
        Ok(())
    }
}
