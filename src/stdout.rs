//! The command line's standard output. `println!` panics when stdout is a pipe whose reader has
//! gone (`lockcheck run scenarios/ | head -1`); [`outln!`](crate::outln) and
//! [`out!`](crate::out) instead end the process quietly, as a Unix filter does: by the `SIGPIPE`
//! the write would have raised had Rust not ignored it (the shell sees status 141).
//!
//! Only the report is written this way; the default `SIGPIPE` disposition is not restored for the
//! whole process, because a write to a dead client program's pipe must stay an error lockcheck
//! handles (it cleans up the servers it spawned) rather than a signal that kills it.

use std::io::{ErrorKind, Write};

/// The exit code when stdout cannot be written: the CLI's "bad input or missing dependency"
/// code (`cli::run::EXIT_BAD_INPUT`; a test there keeps the two equal).
pub const WRITE_FAILED_EXIT: i32 = 2;

/// Writes formatted text to stdout; a closed stdout ends the process quietly.
pub fn write(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|_| out.flush()) {
        if e.kind() == ErrorKind::BrokenPipe {
            reader_gone();
        }
        // Any other error (a full disk) is reported once, without a panic.
        eprintln!("error: cannot write the report to stdout: {e}");
        std::process::exit(WRITE_FAILED_EXIT);
    }
}

/// The reader of stdout has gone: end as `SIGPIPE` would end a C program.
fn reader_gone() -> ! {
    // SAFETY: restoring a signal's default disposition and raising it are async-signal-safe
    // libc calls with no Rust-side invariants.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    std::process::exit(128 + libc::SIGPIPE);
}

/// `print!` to stdout that ends quietly when the reader has gone.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::stdout::write(format_args!($($arg)*)) };
}

/// `println!` to stdout that ends quietly when the reader has gone.
#[macro_export]
macro_rules! outln {
    () => { $crate::stdout::write(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::stdout::write(format_args!("{}\n", format_args!($($arg)*))) };
}
