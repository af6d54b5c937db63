//! The one error type of real mode.

use std::time::Duration;

/// Everything that can go wrong while lockcheck runs, faults or stops its own
/// `redis-server` processes.
///
/// [`RealError::MissingDependency`] is separate from the rest because it is the
/// user's environment, not lockcheck, that must change: the CLI maps it to exit
/// code 2 and prints the install command it carries.
#[derive(Debug, thiserror::Error)]
pub enum RealError {
    /// A program or library that real mode needs is not installed.
    #[error(
        "{program} not found: real mode needs the Debian package `{package}` \
         (install it with `apt-get install {package}`)"
    )]
    MissingDependency {
        /// What was looked for, e.g. `redis-server` or `libfaketime.so.1`.
        program: String,
        /// The Debian package that provides it.
        package: String,
    },

    /// An operating-system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What lockcheck was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A spawned `redis-server` exited before it answered `PING`.
    #[error("redis-server on port {port} exited during start-up ({status}); its log ends with:\n{log_tail}")]
    ExitedEarly {
        /// The port it was told to listen on.
        port: u16,
        /// Its exit status, as text.
        status: String,
        /// The last lines of its log and stderr.
        log_tail: String,
    },

    /// A spawned `redis-server` did not answer `PING` in time.
    #[error("redis-server (pid {pid}) on port {port} did not answer PING within {waited:?}; its log ends with:\n{log_tail}")]
    StartTimeout {
        /// Its pid.
        pid: u32,
        /// The port it was told to listen on.
        port: u16,
        /// How long lockcheck waited.
        waited: Duration,
        /// The last lines of its log and stderr.
        log_tail: String,
    },

    /// Something answered on the port lockcheck chose, but it is not the process
    /// lockcheck started (another program took the port first).
    #[error("port {port} is answered by pid {found}, not by the redis-server lockcheck started (pid {expected})")]
    PortHijacked {
        /// The port.
        port: u16,
        /// The pid lockcheck started.
        expected: u32,
        /// The pid `INFO server` reported.
        found: u32,
    },

    /// A Redis command of the control plane failed.
    #[error("{context}: {source}")]
    Redis {
        /// What lockcheck was doing.
        context: String,
        /// The redis crate's error.
        #[source]
        source: redis::RedisError,
    },

    /// A condition lockcheck waits for (replication link up, role change, process
    /// stop) did not happen in time.
    #[error("timed out after {waited:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long lockcheck waited.
        waited: Duration,
    },

    /// A signal was to be sent to a server that lockcheck already killed.
    #[error("redis-server pid {pid} (port {port}) was already killed")]
    ServerGone {
        /// Its pid.
        pid: u32,
        /// Its port.
        port: u16,
    },

    /// A failover step was called in a phase where it makes no sense.
    #[error("failover step `{step}` is not possible in phase {phase:?}")]
    InvalidStep {
        /// The step that was called.
        step: &'static str,
        /// The phase the rig was in.
        phase: FailoverPhase,
    },

    /// `jump_clock` on a server that was not started with [`crate::real::FakeTime::Jumpable`].
    #[error("redis-server on port {port} was not started with FakeTime::Jumpable, so its clock cannot jump")]
    NotJumpable {
        /// Its port.
        port: u16,
    },

    /// Compiling the allocator shim that lets libfaketime work with jemalloc failed.
    #[error(
        "compiling the libfaketime allocator shim with `{compiler}` failed ({status}):\n{stderr}"
    )]
    ShimBuild {
        /// The compiler that was run.
        compiler: String,
        /// Its exit status.
        status: String,
        /// What it printed.
        stderr: String,
    },

    /// An option that cannot work (e.g. a clock rate of 0).
    /// The scenario asks for something real mode has no recipe for.
    #[error("cannot run on real processes: {0}")]
    Unsupported(String),

    /// A Redis lockcheck did not start (`--redis`) cannot be used: unreachable, wrong
    /// credentials, or a scenario it must not run there. The text is the whole message.
    #[error("{0}")]
    External(String),

    /// A real-mode setting cannot be used as given (an empty client `command`, say): caught
    /// before anything is spawned, so no half-started deployment is left behind.
    #[error("invalid option: {what}")]
    InvalidOption {
        /// What is wrong with it.
        what: String,
    },

    /// More children (servers and client programs) are alive at once than the
    /// async-signal-safe registry can track.
    #[error(
        "too many live child processes at once (the servers and client programs lockcheck spawned: the \
         cleanup registry holds {capacity}); run fewer deployments at once (--jobs) or fewer \
         clients (`workload.clients`)"
    )]
    TooManyChildren {
        /// The registry's capacity.
        capacity: usize,
    },
}

impl RealError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        RealError::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn redis(context: impl Into<String>, source: redis::RedisError) -> Self {
        RealError::Redis {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn missing(program: &str, package: &str) -> Self {
        RealError::MissingDependency {
            program: program.to_string(),
            package: package.to_string(),
        }
    }
}

/// Where the Redis failover rig (`backend::redis::real::FailoverRig`) is in its recipe: the
/// phase a [`RealError`] names when a step of it fails. It sits here, with the error, because
/// the error is every real world's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailoverPhase {
    /// Master and replica are up and the replica streams the master's writes.
    Replicating,
    /// The replica is stopped and cut off; writes land on the master only.
    Isolated,
    /// The master is dead and the former replica is the master clients use.
    FailedOver,
}
