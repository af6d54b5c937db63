//! The server settings a lock's behaviour depends on, as one spawned `postgres` is started
//! with them.

/// `postgres -c` settings that decide when a session (and so every advisory lock it holds)
/// ends behind the client's back. `0` everywhere means what it means to PostgreSQL: the
/// timeout is off, the keepalive value is the operating system's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSettings {
    /// `idle_session_timeout` (PostgreSQL 14+): a session idle outside a transaction this long
    /// is ended with `FATAL 57P05`, and its session locks with it.
    pub idle_session_timeout_ms: u64,
    /// `idle_in_transaction_session_timeout`: a session idle inside an open transaction this
    /// long is ended with `FATAL 25P03`.
    pub idle_in_transaction_session_timeout_ms: u64,
    /// `tcp_keepalives_idle`: seconds of silence before the server probes a client, the one
    /// way it learns of a client that vanished without a FIN (the OS default is two hours:
    /// liquibase#872's lock held for as long).
    pub tcp_keepalives_idle_s: u32,
    /// `tcp_keepalives_interval`: seconds between unanswered probes.
    pub tcp_keepalives_interval_s: u32,
    /// `tcp_keepalives_count`: unanswered probes before the connection (and its session) is
    /// dropped.
    pub tcp_keepalives_count: u32,
    /// `max_connections`: sessions at once (a few go to a standby's WAL sender).
    pub max_connections: u32,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            idle_session_timeout_ms: 0,
            idle_in_transaction_session_timeout_ms: 0,
            tcp_keepalives_idle_s: 0,
            tcp_keepalives_interval_s: 0,
            tcp_keepalives_count: 0,
            max_connections: 100,
        }
    }
}

impl ServerSettings {
    /// The `-c name=value` pairs for these settings, plus the fixed ones every spawned server
    /// gets: streaming replication (`wal_level=replica`, WAL senders, `hot_standby`) so a
    /// standby can be cloned from it and read from, and nothing a lock does not need (no
    /// `fsync`, no autovacuum, small shared buffers: a throw-away server on a 2-core machine).
    pub(crate) fn args(&self) -> Vec<(String, String)> {
        let mut args: Vec<(String, String)> = [
            (
                "idle_session_timeout",
                self.idle_session_timeout_ms.to_string(),
            ),
            (
                "idle_in_transaction_session_timeout",
                self.idle_in_transaction_session_timeout_ms.to_string(),
            ),
            (
                "tcp_keepalives_idle",
                self.tcp_keepalives_idle_s.to_string(),
            ),
            (
                "tcp_keepalives_interval",
                self.tcp_keepalives_interval_s.to_string(),
            ),
            (
                "tcp_keepalives_count",
                self.tcp_keepalives_count.to_string(),
            ),
            ("max_connections", self.max_connections.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        for (k, v) in [
            ("wal_level", "replica"),
            ("max_wal_senders", "5"),
            ("hot_standby", "on"),
            // A process crash (`SIGKILL`, the only crash lockcheck makes) keeps what was written
            // without `fsync`, so committed rows survive a restart. `synchronous_commit=off`
            // would not do: a commit then answers before its WAL is written at all, and a
            // `SIGKILL` within the WAL writer's 200 ms lost a committed table in a test.
            ("fsync", "off"),
            ("autovacuum", "off"),
            ("shared_buffers", "16MB"),
            // Dynamic shared memory as files in the data directory, removed with it: POSIX
            // segments in /dev/shm outlive a SIGKILLed server.
            ("dynamic_shared_memory_type", "mmap"),
            ("logging_collector", "off"),
            ("log_min_messages", "warning"),
        ] {
            args.push((k.to_string(), v.to_string()));
        }
        args
    }
}
