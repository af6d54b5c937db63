//! Where PostgreSQL's and PgBouncer's programs are, or how to install them.
//!
//! Debian keeps the server's programs out of `$PATH`, in `/usr/lib/postgresql/<major>/bin`
//! (`/usr/bin` has only `pg_wrapper` links to the client tools), so they are looked up there,
//! newest major first. `$LOCKCHECK_PG_BIN` names another directory (a source build, another
//! distribution's layout).

use std::path::{Path, PathBuf};

use crate::real::servers::child::{find_program, is_executable};
use crate::real::RealError;

/// The server programs real mode runs, all from one installation (so `pg_basebackup` speaks
/// the server's replication protocol and `initdb` makes a data directory of its version).
#[derive(Clone, Debug)]
pub struct PgBinaries {
    /// `initdb`: makes a data directory.
    pub initdb: PathBuf,
    /// `postgres`: the server.
    pub postgres: PathBuf,
    /// `pg_basebackup`: copies a running primary into a standby's data directory.
    pub pg_basebackup: PathBuf,
}

impl PgBinaries {
    fn in_dir(dir: &Path) -> Option<PgBinaries> {
        let found = PgBinaries {
            initdb: dir.join("initdb"),
            postgres: dir.join("postgres"),
            pg_basebackup: dir.join("pg_basebackup"),
        };
        [&found.initdb, &found.postgres, &found.pg_basebackup]
            .iter()
            .all(|p| is_executable(p))
            .then_some(found)
    }
}

/// The major versions under `/usr/lib/postgresql`, newest first.
fn debian_bin_dirs() -> Vec<PathBuf> {
    let mut majors: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let major = e.file_name().to_string_lossy().parse::<u32>().ok()?;
                    Some((major, e.path().join("bin")))
                })
                .collect()
        })
        .unwrap_or_default();
    majors.sort_by_key(|m| std::cmp::Reverse(m.0));
    majors.into_iter().map(|(_, dir)| dir).collect()
}

/// Finds `initdb`, `postgres` and `pg_basebackup` (in `$LOCKCHECK_PG_BIN`, else the newest
/// `/usr/lib/postgresql/<major>/bin`, else `$PATH`), or says which package to install.
pub fn pg_binaries() -> Result<PgBinaries, RealError> {
    if let Some(dir) = std::env::var_os("LOCKCHECK_PG_BIN") {
        return PgBinaries::in_dir(Path::new(&dir)).ok_or_else(|| {
            RealError::missing(
                &format!(
                    "initdb, postgres and pg_basebackup in $LOCKCHECK_PG_BIN ({})",
                    Path::new(&dir).display()
                ),
                "postgresql",
            )
        });
    }
    if let Some(found) = debian_bin_dirs()
        .iter()
        .find_map(|dir| PgBinaries::in_dir(dir))
    {
        return Ok(found);
    }
    let on_path = find_program("postgres")
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .and_then(|dir| PgBinaries::in_dir(&dir));
    on_path.ok_or_else(|| {
        RealError::missing(
            "postgres (looked for in /usr/lib/postgresql/<version>/bin and $PATH)",
            "postgresql",
        )
    })
}

/// Finds `pgbouncer` (or `$LOCKCHECK_PGBOUNCER`), or says to install it.
pub fn pgbouncer_binary() -> Result<PathBuf, RealError> {
    let found = match std::env::var_os("LOCKCHECK_PGBOUNCER") {
        Some(p) => Some(PathBuf::from(p)).filter(|p| is_executable(p)),
        None => find_program("pgbouncer"),
    };
    found.ok_or_else(|| RealError::missing("pgbouncer", "pgbouncer"))
}
