//! A lock kind as scenarios, checks and reports see it: its name, what it is, what it runs on and
//! what it can do. The lock declares these itself ([`Lock::ABOUT`], [`Lock::RENEWS`],
//! [`Lock::DEFAULT_LEASE`], [`Lock::POINTS`]); its registration adds the name and the backend
//! (`backend::<service>::locks`), so nothing outside the lock's own file enumerates the kinds.

use super::Lock;
use crate::env::NamedPoint;
use std::cmp::Ordering;

/// What a lock kind's clients talk to, which decides the worlds that can run it: a service
/// (each backend names its own, `backend::<service>::SERVICE`, as [`Backend::on`] it) or a
/// client program that lockcheck starts and drives over the client protocol (real mode only,
/// on the service its scenario configures). An open set: a backend added to
/// `backend::BACKENDS` needs no variant here.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Backend(&'static str);

#[allow(non_upper_case_globals)]
impl Backend {
    /// Redis servers (the name kept for code written before backends were open).
    pub const Redis: Backend = Backend("redis");
    /// A MySQL/MariaDB database (the same).
    pub const Database: Backend = Backend("mysql");
    /// An etcd cluster (the same).
    pub const Etcd: Backend = Backend("etcd");
    /// A client program in any language that lockcheck starts and drives over the client
    /// protocol: only real mode can start one.
    pub const ClientProgram: Backend = Backend("client-program");
    /// A ZooKeeper service (the same).
    pub const ZooKeeper: Backend = Backend("zookeeper");

    /// A lock on `service`.
    pub const fn on(service: Service) -> Backend {
        Backend(service.0)
    }
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// The service a scenario's clients talk to, which decides the world that runs it: a lock kind's
/// own, or, for a client program (which may speak to any of them), the service its scenario
/// configures (`scenario/service.rs`). Each backend names its own
/// (`backend::<service>::SERVICE`); the set is open.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Service(&'static str);

#[allow(non_upper_case_globals)]
impl Service {
    /// Redis servers (a client program's service unless its scenario names another).
    pub const Redis: Service = Service("redis");
    /// A MySQL/MariaDB database.
    pub const Database: Service = Service("mysql");
    /// An etcd cluster.
    pub const Etcd: Service = Service("etcd");
    /// A ZooKeeper service.
    pub const ZooKeeper: Service = Service("zookeeper");

    /// The service called `name` (its backend's folder name).
    pub const fn named(name: &'static str) -> Service {
        Service(name)
    }

    /// Its name (its backend's folder name).
    pub const fn name(self) -> &'static str {
        self.0
    }
}

/// Redis, the service of a client program whose scenario names none.
impl Default for Service {
    fn default() -> Self {
        Service::Redis
    }
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// Who registered a lock kind: a lock lockcheck ships takes no `[lock.params]` and its name is
/// reserved; a lock of the user's own is registered by the program that runs lockcheck.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// One of lockcheck's own locks ([`super::builtin`]).
    Builtin,
    /// A lock the program running lockcheck registered with the harness.
    Own,
}

/// One lock kind: what a scenario's `[lock] kind` resolves to. Two kinds are equal when their
/// names are.
#[derive(Clone, Copy, Debug)]
pub struct LockKind {
    name: &'static str,
    aliases: &'static [&'static str],
    about: &'static str,
    backend: Backend,
    origin: Origin,
    default_lease: bool,
    renews: bool,
    points: &'static [NamedPoint],
}

impl LockKind {
    /// The kind `name` of lock `L` on `backend`, with what `L` declares about itself.
    pub fn of<L: Lock>(name: &'static str, backend: Backend, origin: Origin) -> Self {
        LockKind {
            name,
            aliases: &[],
            about: L::ABOUT,
            backend,
            origin,
            default_lease: L::DEFAULT_LEASE,
            renews: L::RENEWS,
            points: L::POINTS,
        }
    }

    /// The client-program kind: its lock is a separate program, so it declares no lease of its
    /// own, no renewal and no named points; `aliases` are older names scenario files still use.
    pub fn client_program(
        name: &'static str,
        aliases: &'static [&'static str],
        about: &'static str,
    ) -> Self {
        LockKind {
            name,
            aliases,
            about,
            backend: Backend::ClientProgram,
            origin: Origin::Builtin,
            default_lease: false,
            renews: false,
            points: &[],
        }
    }

    /// The name scenario files and reports use (`set-nx-px`, ...).
    pub fn name(self) -> &'static str {
        self.name
    }

    /// Whether a scenario's `kind = "<name>"` means this kind: its name or one of its aliases.
    pub fn answers_to(self, name: &str) -> bool {
        self.name == name || self.aliases.contains(&name)
    }

    /// The older names this kind still answers to.
    pub fn aliases(self) -> &'static [&'static str] {
        self.aliases
    }

    /// One line about the design and where it comes from.
    pub fn about(self) -> &'static str {
        self.about
    }

    /// What its clients talk to.
    pub fn backend(self) -> Backend {
        self.backend
    }

    /// Whether lockcheck ships it or the running program registered it.
    pub fn origin(self) -> Origin {
        self.origin
    }

    /// Whether the kind is one of the MySQL locks (its own worlds: a database, not Redis).
    #[deprecated(
        note = "compare `backend()` with `lock::Backend`; lockcheck's own code asks the backend's declaration"
    )]
    pub fn is_mysql(self) -> bool {
        self.backend == Backend::Database
    }

    /// Whether the lock runs on etcd (`Backend::Etcd`).
    #[deprecated(
        note = "compare `backend()` with `lock::Backend`; lockcheck's own code asks the backend's declaration"
    )]
    pub fn is_etcd(self) -> bool {
        self.backend == Backend::Etcd
    }

    /// Whether the kind is one of the ZooKeeper locks (its own worlds: a ZooKeeper service).
    #[deprecated(
        note = "compare `backend()` with `lock::Backend`; lockcheck's own code asks the backend's declaration"
    )]
    pub fn is_zookeeper(self) -> bool {
        self.backend == Backend::ZooKeeper
    }

    /// The service the kind's clients talk to; `None` for a client program, whose scenario says
    /// which (`LockSpec::service`).
    pub fn service(self) -> Option<Service> {
        (self.backend != Backend::ClientProgram).then_some(Service(self.backend.0))
    }

    /// Whether the kind's lock is a client program (real mode only).
    pub fn is_client_program(self) -> bool {
        self.backend == Backend::ClientProgram
    }

    /// Whether the kind has a lease of its own when the scenario sets no `ttl_ms`.
    pub fn has_default_lease(self) -> bool {
        self.default_lease
    }

    /// Whether the kind's lock implements [`Lock::renew`], so the workload's `renew_every_ms`
    /// can renew its lease.
    pub fn renews(self) -> bool {
        self.renews
    }

    /// Named points inside the lock's protocol where a fault can fire (`on = "<point>"`).
    pub fn points(self) -> &'static [NamedPoint] {
        self.points
    }
}

impl PartialEq for LockKind {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for LockKind {}

impl PartialOrd for LockKind {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for LockKind {
    fn cmp(&self, other: &Self) -> Ordering {
        self.name.cmp(other.name)
    }
}
