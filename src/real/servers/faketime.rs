//! Clock faults on real servers with libfaketime.
//!
//! Redis computes key expiry from `CLOCK_REALTIME` (`gettimeofday`), so running a
//! server under libfaketime (Debian package `faketime`) moves its notion of "when
//! does this lease end" without touching the machine's clock. Two modes:
//!
//! * [`FakeTime::Rate`]: the clock runs at a constant multiple of real time
//!   (`FAKETIME='+0 xR'`), a drifting clock.
//! * [`FakeTime::Jumpable`]: the clock starts true and can be stepped at any
//!   moment with [`crate::real::RedisServer::jump_clock`] (an NTP step, an
//!   operator fixing the time): libfaketime reads the offset from a file
//!   (`FAKETIME_TIMESTAMP_FILE`) on every clock read (`FAKETIME_NO_CACHE=1`).
//!
//! Both set `FAKETIME_DONT_FAKE_MONOTONIC=1`: real clock faults hit the wall clock
//! only, the kernel's monotonic clock stays honest, and so do Redis's event-loop
//! timers (cron, client timeouts), which are not what is being tested.
//!
//! Two practical problems are solved here rather than left to the user:
//!
//! * Debian's `redis-server` is linked against jemalloc, and libfaketime then hangs
//!   at start-up: libfaketime's initialisation allocates, jemalloc's
//!   initialisation reads the clock, which re-enters libfaketime before it is ready
//!   (libfaketime issues 130 and 478). The cure is a tiny shared object, preloaded
//!   *before* libfaketime, that sends every allocation to glibc's own allocator
//!   (`__libc_malloc` and friends) and stubs the jemalloc-only entry points Redis
//!   imports (`mallctl`, `nallocx`, `malloc_stats_print`). lockcheck compiles it
//!   once with the system C compiler and caches it by a hash of its source.
//! * The `faketime` wrapper program forks, so the pid lockcheck would hold is not
//!   the server's. lockcheck sets `LD_PRELOAD` and the `FAKETIME*` variables itself
//!   and executes `redis-server` directly.
//!
//! A frozen clock (`FAKETIME` without `+`/`@`, or a rate of 0) wedges Redis, so
//! rates must be positive.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use super::child::find_program;
use crate::real::RealError;

/// How a server's wall clock is faked.
#[derive(Debug, Clone, PartialEq)]
pub enum FakeTime {
    /// The clock runs `rate` times as fast as real time, starting at the true time
    /// (`FAKETIME='+0 x<rate>'`). `Rate(10.0)`: a `PX 10000` key lives 1 real second.
    Rate(f64),
    /// The clock starts off the true time and runs at its own rate
    /// (`FAKETIME='<+|-><seconds> x<rate>'`): a wrong and drifting clock. It cannot jump.
    Skewed {
        /// How far the clock starts from the true time (ms; negative: behind).
        offset_ms: i64,
        /// How many times as fast as real time the clock runs (1.0: no drift).
        rate: f64,
    },
    /// The clock starts at the true time and jumps by
    /// [`crate::real::RedisServer::jump_clock`].
    Jumpable,
}

/// Where Debian (and a `make install` of libfaketime) put the library.
const LIBFAKETIME_CANDIDATES: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
    "/usr/lib64/faketime/libfaketime.so.1",
];

/// The allocator shim. It must not depend on anything lockcheck-specific: its
/// SHA-1 names the cached `.so`, so any edit here triggers a rebuild.
const SHIM_SOURCE: &str = r#"/* lockcheck: lets libfaketime wrap a jemalloc-linked redis-server.
 * Every allocation goes to glibc's allocator, so jemalloc is never entered
 * (its initialisation reads the clock and re-enters libfaketime, which hangs);
 * the jemalloc-only functions redis imports are stubbed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

void *malloc(size_t size) { return __libc_malloc(size); }
void *calloc(size_t count, size_t size) { return __libc_calloc(count, size); }
void *realloc(void *ptr, size_t size) { return __libc_realloc(ptr, size); }
void free(void *ptr) { __libc_free(ptr); }
void *memalign(size_t align, size_t size) { return __libc_memalign(align, size); }
void *aligned_alloc(size_t align, size_t size) { return __libc_memalign(align, size); }
void *valloc(size_t size) { return __libc_valloc(size); }
void *pvalloc(size_t size) { return __libc_pvalloc(size); }

int posix_memalign(void **out, size_t align, size_t size) {
    if (align < sizeof(void *) || (align & (align - 1)) != 0) return EINVAL;
    void *ptr = __libc_memalign(align, size);
    if (ptr == NULL && size != 0) return ENOMEM;
    *out = ptr;
    return 0;
}

/* glibc exports no __libc_ alias for this one; ask libc.so.6 itself, since
 * RTLD_NEXT could find jemalloc's first. */
size_t malloc_usable_size(void *ptr) {
    static size_t (*glibc_usable)(void *);
    size_t (*fn)(void *) = __atomic_load_n(&glibc_usable, __ATOMIC_ACQUIRE);
    if (fn == NULL) {
        void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
        if (libc != NULL) fn = (size_t (*)(void *))dlsym(libc, "malloc_usable_size");
        if (fn == NULL || fn == malloc_usable_size) return 0;
        __atomic_store_n(&glibc_usable, fn, __ATOMIC_RELEASE);
    }
    return fn(ptr);
}

/* jemalloc's control interface: report "no such setting" with zeroed output. */
int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
    (void)name; (void)newp; (void)newlen;
    if (oldp != NULL && oldlenp != NULL) memset(oldp, 0, *oldlenp);
    return ENOENT;
}

size_t nallocx(size_t size, int flags) { (void)flags; return size; }

void malloc_stats_print(void (*write_cb)(void *, const char *), void *opaque, const char *opts) {
    (void)opts;
    if (write_cb != NULL) write_cb(opaque, "jemalloc statistics are unavailable under lockcheck's faketime shim\n");
}
"#;

/// Finds libfaketime and the allocator shim (building it if needed) and returns the
/// `LD_PRELOAD` value, shim first.
pub(crate) fn preload_libraries() -> Result<String, RealError> {
    let libfaketime = libfaketime_path()?;
    let shim = allocator_shim()?;
    Ok(format!("{}:{}", shim.display(), libfaketime.display()))
}

fn libfaketime_path() -> Result<PathBuf, RealError> {
    if let Some(explicit) = std::env::var_os("LOCKCHECK_LIBFAKETIME") {
        let path = PathBuf::from(explicit);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(RealError::missing(
                &format!("libfaketime (LOCKCHECK_LIBFAKETIME={})", path.display()),
                "faketime",
            ))
        };
    }
    LIBFAKETIME_CANDIDATES
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .ok_or_else(|| RealError::missing("libfaketime.so.1", "faketime"))
}

/// The per-user cache directory for the compiled shim.
fn cache_dir() -> PathBuf {
    if let Some(xdg) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(xdg).join("lockcheck");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home).join(".cache").join("lockcheck");
    }
    std::env::temp_dir().join("lockcheck-cache")
}

/// Returns the path of the compiled shim, compiling it on first use.
///
/// Concurrent builders (parallel tests, two lockcheck runs) each compile to a
/// private file and `rename` it into place, which is atomic: nobody ever preloads
/// a half-written object.
fn allocator_shim() -> Result<PathBuf, RealError> {
    let hash = sha1_smol::Sha1::from(SHIM_SOURCE).digest().to_string();
    let dir = cache_dir();
    let target = dir.join(format!("faketime-alloc-shim-{}.so", &hash[..16]));
    if target.is_file() {
        return Ok(target);
    }
    let compiler = match std::env::var_os("CC").filter(|v| !v.is_empty()) {
        Some(cc) => PathBuf::from(cc),
        None => find_program("cc")
            .or_else(|| find_program("gcc"))
            .ok_or_else(|| RealError::missing("cc (a C compiler)", "gcc"))?,
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| RealError::io(format!("creating {}", dir.display()), e))?;
    let unique = format!("{}-{:?}", std::process::id(), std::thread::current().id())
        .replace(|c: char| !c.is_ascii_alphanumeric(), "");
    let source = dir.join(format!("shim-{}-{unique}.c", &hash[..16]));
    let partial = dir.join(format!("shim-{}-{unique}.so.partial", &hash[..16]));
    std::fs::write(&source, SHIM_SOURCE)
        .map_err(|e| RealError::io(format!("writing {}", source.display()), e))?;
    let output = Command::new(&compiler)
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&partial)
        .arg(&source)
        .arg("-ldl")
        .output();
    let _ = std::fs::remove_file(&source);
    let output = match output {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(RealError::missing(
                &format!("{} (a C compiler)", compiler.display()),
                "gcc",
            ))
        }
        Err(e) => return Err(RealError::io(format!("running {}", compiler.display()), e)),
    };
    if !output.status.success() {
        let _ = std::fs::remove_file(&partial);
        return Err(RealError::ShimBuild {
            compiler: compiler.display().to_string(),
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    std::fs::rename(&partial, &target)
        .map_err(|e| RealError::io(format!("installing {}", target.display()), e))?;
    Ok(target)
}

/// Adds the libfaketime environment for `fake` to `command`. Returns the clock
/// handle of a jumpable server.
pub(crate) fn configure(
    fake: &FakeTime,
    preload: &str,
    dir: &Path,
    command: &mut Command,
) -> Result<Option<JumpableClock>, RealError> {
    command
        .env("LD_PRELOAD", preload)
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        // An inherited setting would override ours.
        .env_remove("FAKETIME")
        .env_remove("FAKETIME_TIMESTAMP_FILE")
        .env_remove("FAKETIME_NO_CACHE");
    match fake {
        FakeTime::Skewed { offset_ms, rate } => {
            if !rate.is_finite() || *rate <= 0.0 {
                return Err(RealError::InvalidOption {
                    what: format!(
                        "FakeTime::Skewed rate {rate}: the rate must be a positive number \
                         (a stopped clock wedges redis-server)"
                    ),
                });
            }
            command.env("FAKETIME", format!("{} x{rate}", offset_spec(*offset_ms)));
            Ok(None)
        }
        FakeTime::Rate(rate) => {
            if !rate.is_finite() || *rate <= 0.0 {
                return Err(RealError::InvalidOption {
                    what: format!(
                        "FakeTime::Rate({rate}): the rate must be a positive number \
                         (a stopped clock wedges redis-server)"
                    ),
                });
            }
            // `{}` never prints an exponent, and libfaketime parses '.' as the
            // decimal point because Redis never sets LC_NUMERIC.
            command.env("FAKETIME", format!("+0 x{rate}"));
            Ok(None)
        }
        FakeTime::Jumpable => {
            let clock = JumpableClock {
                file: dir.join("faketime.rc"),
                offset_ms: Mutex::new(0),
            };
            clock.write(0)?;
            command
                .env("FAKETIME_TIMESTAMP_FILE", &clock.file)
                .env("FAKETIME_NO_CACHE", "1");
            Ok(Some(clock))
        }
    }
}

/// The timestamp file of a [`FakeTime::Jumpable`] server and its current offset.
#[derive(Debug)]
pub(crate) struct JumpableClock {
    file: PathBuf,
    offset_ms: Mutex<i64>,
}

impl JumpableClock {
    pub(crate) fn jump(&self, by_ms: i64) -> Result<(), RealError> {
        let mut offset = self.offset_ms.lock().unwrap_or_else(|p| p.into_inner());
        let next = offset.saturating_add(by_ms);
        self.write(next)?;
        *offset = next;
        Ok(())
    }

    pub(crate) fn offset_ms(&self) -> i64 {
        *self.offset_ms.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces the file atomically: libfaketime re-reads it on every clock read,
    /// and a torn read would parse as a bogus offset.
    fn write(&self, offset_ms: i64) -> Result<(), RealError> {
        let partial = self.file.with_extension("rc.partial");
        std::fs::write(&partial, format!("{}\n", offset_spec(offset_ms)))
            .and_then(|_| std::fs::rename(&partial, &self.file))
            .map_err(|e| RealError::io(format!("writing {}", self.file.display()), e))
    }
}

/// libfaketime's relative-offset syntax: a sign and (fractional) seconds, e.g.
/// `+45.000` or `-1.250`. It parses the number with `atof`, so milliseconds are
/// exact to the nanosecond field libfaketime keeps.
fn offset_spec(offset_ms: i64) -> String {
    let sign = if offset_ms < 0 { '-' } else { '+' };
    let abs = offset_ms.unsigned_abs();
    format!("{sign}{}.{:03}", abs / 1000, abs % 1000)
}

#[cfg(test)]
mod tests {
    use super::offset_spec;

    #[test]
    fn offsets_are_signed_seconds_with_milliseconds() {
        assert_eq!(offset_spec(0), "+0.000");
        assert_eq!(offset_spec(45_000), "+45.000");
        assert_eq!(offset_spec(1_250), "+1.250");
        assert_eq!(offset_spec(-1_250), "-1.250");
        assert_eq!(offset_spec(-5), "-0.005");
    }
}
