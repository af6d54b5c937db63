//! Which user lockcheck's PostgreSQL and PgBouncer run as, and the commands that start them.
//!
//! Both refuse to run as root (`postgres`: "root" execution of the PostgreSQL server is not
//! permitted; `pgbouncer`: PgBouncer should not run as root). So when lockcheck runs as root
//! (CI, these machines) they run as the `postgres` system user that Debian's `postgresql`
//! package creates, and their temporary directory is handed to that user; otherwise they run as
//! lockcheck's own user. The uid is switched by the forked child before it `exec`s (std's
//! `CommandExt::uid`), before `PR_SET_PDEATHSIG` is set (a credential change would clear it).

use std::ffi::CStr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::real::RealError;

/// The uid and gid a server runs as: `None` to stay as lockcheck's own user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunAs(Option<(u32, u32)>);

fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The uid and gid of a system user, from the password database.
fn lookup_user(name: &CStr) -> Option<(u32, u32)> {
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwnam_r writes into `entry` and `buf`, both live and sized as passed; the
    // strings it points `entry` at live in `buf`, which we do not read.
    let rc = unsafe {
        libc::getpwnam_r(
            name.as_ptr(),
            &mut entry,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    (rc == 0 && !result.is_null()).then_some((entry.pw_uid, entry.pw_gid))
}

impl RunAs {
    /// `postgres` when lockcheck is root, lockcheck's own user otherwise.
    pub fn server_user() -> Result<RunAs, RealError> {
        if !running_as_root() {
            return Ok(RunAs(None));
        }
        lookup_user(c"postgres")
            .map(|ids| RunAs(Some(ids)))
            .ok_or_else(|| {
                RealError::missing(
                    "the `postgres` system user (PostgreSQL and PgBouncer refuse to run as root)",
                    "postgresql",
                )
            })
    }

    /// Hands `path` (a directory lockcheck just made) to the server's user.
    pub fn own(&self, path: &Path) -> Result<(), RealError> {
        if let RunAs(Some((uid, gid))) = *self {
            std::os::unix::fs::chown(path, Some(uid), Some(gid)).map_err(|e| {
                RealError::io(format!("handing {} to uid {uid}", path.display()), e)
            })?;
        }
        Ok(())
    }

    /// A command for `program` as the server's user, in `dir` (also its `$HOME`, so no tool
    /// reads the caller's `~/.pgpass` or `~/.psqlrc`), with every `PG*` variable of lockcheck's
    /// environment removed: a `PGHOST`, `PGPORT` or `PGSERVICE` would point `pg_basebackup` at
    /// another server, and never the machine's own is what lockcheck promises.
    pub fn command(&self, program: &Path, dir: &Path) -> Command {
        let mut command = Command::new(program);
        command
            .current_dir(dir)
            .env("HOME", dir)
            .stdin(Stdio::null());
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("PG") {
                command.env_remove(key);
            }
        }
        if let RunAs(Some((uid, gid))) = *self {
            // std also drops root's supplementary groups (setgroups(0)) when it sets a uid.
            command.uid(uid).gid(gid);
        }
        command
    }
}
