//! PostgreSQL's declaration: the `[postgres]` table (read by the backend itself), its servers
//! (`pg-0`, the primary; `pg-1`, a streaming standby; `pgbouncer`, the pooler), and the faults
//! its worlds carry out: client pauses, crashes and partitions, a session terminated, the
//! primary's crash and a failover to the standby. No clock faults: an advisory lock has no
//! lease, the server's session keeps it.

use crate::backend::postgres::table::{of as table, Pooler, PostgresTable};
use crate::backend::postgres::table::{BOUNCER, PRIMARY, STANDBY, TABLE};
use crate::fault::FaultKind;
use crate::history::Role;
use crate::lock::Service;
use crate::scenario::{BackendDecl, FailoverShape, Fault, Invalid, Scenario};
use std::any::Any;
use std::sync::Arc;

/// The service this backend is: what its locks' kinds and its scenarios' clients talk to.
pub const SERVICE: Service = Service::named("postgres");

/// The PostgreSQL backend.
#[derive(Debug)]
pub struct Postgres;

/// Measured real-mode spawn cost per server (`BackendDecl::real_spawn_ms`), rounded up.
const PG_SPAWN_MS: u64 = 1_500;

impl BackendDecl for Postgres {
    fn service(&self) -> Service {
        SERVICE
    }

    fn name(&self) -> &'static str {
        "PostgreSQL"
    }

    fn table(&self) -> &'static str {
        TABLE
    }

    fn client_programs_select_by_table(&self) -> bool {
        true
    }

    fn servers(&self, s: &Scenario) -> Vec<(String, Role)> {
        let t = table(s);
        let mut v = vec![(PRIMARY.to_string(), Role::Master)];
        if t.standby {
            v.push((STANDBY.to_string(), Role::Replica));
        }
        if t.pooler != Pooler::None {
            v.push((BOUNCER.to_string(), Role::Standalone));
        }
        v
    }

    fn validate(&self, s: &Scenario, has_table: bool) -> Result<(), Invalid> {
        if s.lock.service != SERVICE {
            if has_table {
                return Err((
                    Some(TABLE),
                    format!(
                        "`[postgres]` configures the server of the PostgreSQL locks and client programs; lock kind `{}` does not use it",
                        s.lock.kind.name()
                    ),
                ));
            }
            return Ok(());
        }
        if s.lock.ttl_ms.is_some() {
            return Err((
                Some("ttl_ms"),
                format!(
                    "lock kind `{}` has no lease: the server session holds it until it is released or the session ends",
                    s.lock.kind.name()
                ),
            ));
        }
        // A client program may keep time of its own (its clock is libfaketime's in real mode).
        if !s.clocks.is_perfect() && !s.lock.kind.is_client_program() {
            return Err((
                Some("clocks"),
                "the PostgreSQL locks keep no time of their own (the server's session holds the lock): `[clocks]` is not supported with them".into(),
            ));
        }
        Ok(())
    }

    /// The time scale the liveness bound is three of: how long a client waits to acquire.
    fn request_timeout_ms(&self, s: &Scenario) -> u64 {
        table(s).request_timeout_ms
    }

    /// `initdb` and the server's start; a standby's base backup and start besides.
    fn real_spawn_ms(&self, s: &Scenario) -> u64 {
        PG_SPAWN_MS + if table(s).standby { PG_SPAWN_MS } else { 0 }
    }

    fn lease_ms(&self, s: &Scenario) -> Option<u64> {
        Some(s.lock.wait_ms.max(1))
    }

    fn check_fault(&self, s: &Scenario, f: &Fault) -> Result<(), String> {
        let t = table(s);
        let server = |n: &str| n == PRIMARY || (t.standby && n == STANDBY) || n == BOUNCER;
        match &f.kind {
            FaultKind::Pause { .. } | FaultKind::ClientCrash { .. } => Ok(()),
            FaultKind::Terminate { .. } => Ok(()),
            FaultKind::Partition { .. } => Ok(()),
            FaultKind::Crash { node, .. } if server(node) => Ok(()),
            FaultKind::Failover { .. } if t.standby => Ok(()),
            FaultKind::Failover { .. } => Err(
                "a `failover` promotes the standby: set `[postgres] standby = true`".into(),
            ),
            // A client program's own clock (libfaketime in the program, real mode): a lock
            // program that judges a lease on it meets the fault its design depends on.
            FaultKind::ClockJump { node, .. }
            | FaultKind::WallClockJump { node, .. }
            | FaultKind::ClockDrift { node, .. }
                if s.lock.kind.is_client_program() && node.starts_with("client-") =>
            {
                Ok(())
            }
            _ => Err(format!(
                "`kind = \"{}\"` is not modelled for the PostgreSQL locks; they take client `pause`, client `crash`, `terminate`, `partition`, `crash` of `{PRIMARY}`, `{STANDBY}` or `{BOUNCER}` (with `restart_after_ms`), `failover` (with a standby) and, for client programs, clock faults on clients",
                f.kind.name()
            )),
        }
    }

    fn pauses_servers(&self) -> bool {
        false
    }

    fn failover(&self) -> FailoverShape {
        FailoverShape::Leader
    }

    fn not_drawable(&self, kind: &str, s: &Scenario) -> Option<String> {
        match kind {
            "failover" if !table(s).standby => Some(
                "`failover` promotes the standby, and this scenario has none (`[postgres] standby = true`): drop it".into(),
            ),
            "server_pause" => Some(
                "`server_pause` is not modelled on PostgreSQL: drop it (`crash` stops the primary)".into(),
            ),
            "clock_jump" | "clock_drift" | "wall_clock_jump" => Some(format!(
                "`{kind}` is not modelled for the PostgreSQL locks (they keep no time: the server's session holds the lock): drop it"
            )),
            _ => None,
        }
    }

    fn ends_sessions(&self) -> bool {
        true
    }

    fn reads_own_table(&self) -> bool {
        true
    }

    fn read_table(
        &self,
        table: Option<&toml::Value>,
    ) -> Result<Arc<dyn Any + Send + Sync>, Invalid> {
        Ok(Arc::new(PostgresTable::read(table)?))
    }
}
