//! The `lockcheck` command line: the harness with no lock of its own (`lockcheck::Harness`), so
//! that `lockcheck` and a user's harness binary are one code path.

/// mimalloc: the simulator allocates per command and per event, and Lua allocates through Rust's
/// allocator; mimalloc makes that cheaper than the system allocator (README, "Speed").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    lockcheck::Harness::new().main()
}
