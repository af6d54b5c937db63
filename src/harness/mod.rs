//! The harness: the whole of lockcheck for a lock of your own, from a few lines in your crate.
//!
//! ```no_run
//! # use lockcheck::{Env, Guard, Lock, LockConfig, LockError};
//! # struct CheckThenSet<C, E> { conn: C, env: E, config: LockConfig }
//! # impl<C, E> CheckThenSet<C, E> {
//! #     fn new(config: LockConfig, mut conns: Vec<C>, env: E) -> Self {
//! #         CheckThenSet { conn: conns.remove(0), env, config }
//! #     }
//! # }
//! # impl<C: redis::aio::ConnectionLike + Send + Sync + 'static, E: Env> Lock for CheckThenSet<C, E> {
//! #     async fn acquire(&mut self) -> Result<Option<Guard>, LockError> { Ok(None) }
//! #     async fn release(&mut self, _: &Guard) -> Result<bool, LockError> { Ok(true) }
//! # }
//! fn main() -> std::process::ExitCode {
//!     lockcheck::Harness::new()
//!         .lock("check-then-set", CheckThenSet::new)
//!         .main()
//! }
//! ```
//!
//! The binary then has every command of `lockcheck` (`run`, `explore`, `table`, `list`, with
//! `--real`, `--seeds`, `--jobs`, `--shard`, `--junit`, `--report`), with the same output, exit
//! codes and found files, and its scenarios may say `[lock] kind = "check-then-set"`. The
//! constructor is written once: it gets [`Conn`](crate::registry::Conn) connections and a
//! [`NodeEnv`](crate::registry::NodeEnv), simulated ones in simulation and real ones with
//! `--real`. It may take its own settings from the scenario's `[lock.params]` table: declare it
//! as taking `LockConfig<MyParams>` (any `serde::Deserialize` type) and read `config.params`.
//!
//! The `lockcheck` binary is this harness with no lock of its own. Inside `cargo test`,
//! [`Harness::explore`] runs the search and returns what it found ([`regressions`]).

pub mod regressions;

use crate::lock::{Lock, LockConfig};
use crate::registry::{Conn, NodeEnv, Registry};
use clap::{CommandFactory, FromArgMatches};
use serde::de::DeserializeOwned;
use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

pub use regressions::{ExploreTest, Finding};

/// A command line (and a test helper) for the locks registered with it, and lockcheck's own.
#[derive(Clone, Debug, Default)]
pub struct Harness {
    locks: Registry,
}

impl Harness {
    /// A harness that knows lockcheck's lock kinds only (what the `lockcheck` binary is).
    pub fn new() -> Self {
        Harness::default()
    }

    /// Registers a lock of your own as `[lock] kind = "<name>"`: `make` builds one client's lock
    /// from the scenario's `[lock]` (`LockConfig<P>`: its `[lock.params]` read into `P` with
    /// serde; `LockConfig` takes none), one connection per master group, and the client's
    /// environment. See [`Registry::register`] (which panics on a name used twice).
    pub fn lock<P, L, F>(mut self, name: &'static str, make: F) -> Self
    where
        P: DeserializeOwned + Clone + Send + Sync + 'static,
        L: Lock + 'static,
        F: Fn(LockConfig<P>, Vec<Conn>, NodeEnv) -> L + Send + Sync + 'static,
    {
        self.locks.register(name, make);
        self
    }

    /// The lock kinds this harness runs.
    pub fn registry(&self) -> &Registry {
        &self.locks
    }

    /// Runs the command line of this process: the `main` of a harness binary.
    pub fn main(self) -> ExitCode {
        self.main_with(std::env::args_os())
    }

    /// Runs the command line `args` (the program's name first, as `std::env::args_os` gives it).
    pub fn main_with<I, T>(self, args: I) -> ExitCode
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        ExitCode::from(u8::try_from(self.run(args)).unwrap_or(u8::MAX))
    }

    /// Runs the command line `args` and returns its exit code: 0 every outcome as expected
    /// (`explore`: nothing found), 1 not (`explore`: a violation found), 2 bad input.
    pub fn run<I, T>(&self, args: I) -> i32
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        // A panic or Ctrl-C anywhere kills every server and client program this run started.
        crate::real::install_cleanup_handlers();
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        // The program replays name: this binary, as it was called (`lockcheck`, `check_then_set`).
        let program = args
            .first()
            .and_then(|a| Path::new(a).file_name())
            .map_or_else(
                || "lockcheck".to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
        crate::judge::set_program(program.clone());
        let command = crate::cli::args::Cli::command()
            .bin_name(program.clone())
            .display_name(program);
        let cli = match command
            .try_get_matches_from(args)
            .and_then(|m| crate::cli::args::Cli::from_arg_matches(&m))
        {
            Ok(cli) => cli,
            Err(e) => {
                // --help and --version end here with 0; a usage error with clap's 2.
                let _ = e.print();
                return e.exit_code();
            }
        };
        crate::cli::args::run(cli, &self.locks)
    }

    /// A search of `scenario`'s space for a violation of this harness's lock, for a `#[test]`:
    /// it replays the findings saved by earlier runs first, and saves a new one beside the
    /// scenario ([`regressions`]).
    pub fn explore(&self, scenario: impl AsRef<Path>) -> ExploreTest {
        ExploreTest::new(self.locks.clone(), scenario.as_ref())
    }
}
