//! A lock client that is a separate program, in any language (`[lock] kind = "client-program"`).
//!
//! lockcheck starts the user's program once per client and faults it from outside, the way the
//! operating system would: a pause is `SIGSTOP`/`SIGCONT` (a stop-the-world GC pause, a VM
//! freeze: every thread of the client stops, its lease-extension timers too), a crash is
//! `SIGKILL`, and a wrong or jumping clock is libfaketime in the program's environment. The
//! program is forked like lockcheck's servers (own process group, `PR_SET_PDEATHSIG`, registered
//! for the panic and signal handlers), so it never outlives lockcheck.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::real::servers::child::{
    kill_and_reap, make_temp_dir, remove_temp_dir, spawn_from_long_lived_thread,
    wait_until_continued, wait_until_stopped,
};
use crate::real::servers::faketime::{self, FakeTime, JumpableClock};
use crate::real::RealError;

/// A running client program that lockcheck started and owns. Dropping it kills and reaps it.
#[derive(Debug)]
pub struct ClientProgram {
    pid: u32,
    child: Mutex<(Child, bool)>,
    clock: Option<JumpableClock>,
    dir: PathBuf,
    /// The thread copying the program's log to lockcheck's stderr; it ends when the program
    /// closes its stderr.
    log: Option<std::thread::JoinHandle<()>>,
}

/// Each client's program, by client index, in a run of `kind = "client-program"` (`None`, or an
/// empty list: the client is a lock in this process).
pub(crate) type Programs = Arc<Vec<Option<Arc<ClientProgram>>>>;

/// What to start: the command line and where it runs.
#[derive(Clone, Debug)]
pub struct ClientCommand {
    /// Program and arguments (`[lock] command`).
    pub argv: Vec<String>,
    /// The working directory: the scenario file's directory, so that relative paths in the
    /// command are relative to the scenario.
    pub cwd: Option<PathBuf>,
    /// Extra environment variables (the protocol's `LOCKCHECK_*`).
    pub env: Vec<(String, String)>,
}

impl ClientProgram {
    /// Starts the program with piped stdin/stdout and, with `fake`, under libfaketime. Its
    /// stderr (the program's log) goes to lockcheck's, each line prefixed with the client's
    /// name (`client-3: ...`, from `LOCKCHECK_CLIENT_ID`; else its pid), so that several
    /// programs' logs interleaved with the report say who wrote what. Blocking (a fork).
    pub fn spawn(
        cmd: &ClientCommand,
        fake: Option<&FakeTime>,
    ) -> Result<(ClientProgram, ChildStdin, ChildStdout), RealError> {
        let Some(program) = cmd.argv.first() else {
            return Err(RealError::InvalidOption {
                what: "`[lock] command` is empty: give the client program and its arguments".into(),
            });
        };
        let program = resolve(program, cmd.cwd.as_deref());
        let preload = match fake {
            Some(_) => Some(faketime::preload_libraries()?),
            None => None,
        };
        let dir = make_temp_dir("client")?;
        // Until the program runs, nothing owns the directory: a start that fails (`command =
        // [""]`, a program that is not there, libfaketime refused) is an exit-2 refusal, and
        // it must leave no scratch behind.
        let started = Self::start(cmd, fake, &program, preload, &dir);
        if started.is_err() {
            remove_temp_dir(&dir);
        }
        let (child, clock) = started?;
        Self::adopt(cmd, child, clock, dir)
    }

    /// Forks the program, its scratch directory `dir` made: [`ClientProgram::spawn`]'s part
    /// that can fail after the directory exists.
    fn start(
        cmd: &ClientCommand,
        fake: Option<&FakeTime>,
        program: &Path,
        preload: Option<String>,
        dir: &Path,
    ) -> Result<(Child, Option<JumpableClock>), RealError> {
        let mut command = Command::new(program);
        command
            .args(&cmd.argv[1..])
            .envs(cmd.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(cwd) = &cmd.cwd {
            command.current_dir(std::path::absolute(cwd).unwrap_or_else(|_| cwd.clone()));
        }
        let clock = match (fake, preload) {
            (Some(fake), Some(libs)) => faketime::configure(fake, &libs, dir, &mut command)?,
            _ => None,
        };
        let child = spawn_from_long_lived_thread(command).map_err(|e| match e {
            RealError::Io { source, .. } => RealError::io(
                format!(
                    "starting the lock client `{}` (from `[lock] command`)",
                    program.display()
                ),
                source,
            ),
            other => other,
        })?;
        Ok((child, clock))
    }

    /// The running program with its pipes, its stderr forwarded line by line.
    fn adopt(
        cmd: &ClientCommand,
        mut child: Child,
        clock: Option<JumpableClock>,
        dir: PathBuf,
    ) -> Result<(ClientProgram, ChildStdin, ChildStdout), RealError> {
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let pid = child.id();
        let name = cmd
            .env
            .iter()
            .find(|(k, _)| k == "LOCKCHECK_CLIENT_ID")
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| format!("client pid {pid}"));
        let log = child.stderr.take().map(|stderr| prefix_lines(stderr, name));
        Ok((
            ClientProgram {
                pid,
                child: Mutex::new((child, false)),
                clock,
                dir,
                log,
            },
            stdin,
            stdout,
        ))
    }

    /// The client's process id (what `SIGSTOP`, `SIGCONT` and `SIGKILL` are sent to).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    fn signal(&self, signal: libc::c_int) -> Result<(), RealError> {
        let state = self.child.lock().unwrap_or_else(|p| p.into_inner());
        if state.1 {
            return Err(RealError::InvalidOption {
                what: format!("lock client pid {} is already gone", self.pid),
            });
        }
        // SAFETY: kill(2) has no memory-safety preconditions; the child is not reaped yet, so
        // its pid (and process group) are still ours.
        unsafe {
            libc::kill(-(self.pid as libc::pid_t), signal);
        }
        Ok(())
    }

    /// Waits, at most `within`, until everything the program wrote to its stderr is on
    /// lockcheck's: for a program that exited, so that its last words (why it stopped) come
    /// before lockcheck's own message about it.
    pub fn wait_for_log(&self, within: Duration) {
        let Some(log) = &self.log else { return };
        let start = Instant::now();
        while !log.is_finished() && start.elapsed() < within {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// `SIGSTOP`s the client's whole process group and returns once it is stopped.
    pub fn pause(&self) -> Result<(), RealError> {
        self.signal(libc::SIGSTOP)?;
        wait_until_stopped(self.pid, "lock client")
    }

    /// `SIGCONT`s a paused client.
    pub fn resume(&self) -> Result<(), RealError> {
        self.signal(libc::SIGCONT)?;
        wait_until_continued(self.pid, "lock client")
    }

    /// `SIGKILL`s the client (and anything it forked) and reaps it. Idempotent.
    pub fn kill(&self) {
        let mut state = self.child.lock().unwrap_or_else(|p| p.into_inner());
        if state.1 {
            return;
        }
        kill_and_reap(&mut state.0);
        state.1 = true;
    }

    /// Steps the client's wall clock by `by_ms` (started with [`FakeTime::Jumpable`] only).
    pub fn jump_clock(&self, by_ms: i64) -> Result<(), RealError> {
        match &self.clock {
            Some(clock) => clock.jump(by_ms),
            None => Err(RealError::InvalidOption {
                what: format!(
                    "lock client pid {} was not started with a jumpable clock",
                    self.pid
                ),
            }),
        }
    }
}

impl Drop for ClientProgram {
    fn drop(&mut self) {
        self.kill();
        remove_temp_dir(&self.dir);
    }
}

/// Copies `log`'s lines to lockcheck's stderr, each prefixed with `name: `, until the program
/// closes it (it exits). A plain thread: reading a pipe blocks.
fn prefix_lines(log: impl Read + Send + 'static, name: String) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        copy_prefixed(log, &name, |line| {
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        })
    })
}

/// Each line of `log` as `name: line` to `emit`, one whole line at a time (a line that is not
/// UTF-8 lossily), the last one even without its newline.
fn copy_prefixed(log: impl Read, name: &str, mut emit: impl FnMut(&str)) {
    let mut reader = std::io::BufReader::new(log);
    let mut line = Vec::new();
    loop {
        line.clear();
        match std::io::BufRead::read_until(&mut reader, b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                emit(&format!("{name}: {}", text.trim_end_matches(['\n', '\r'])));
            }
        }
    }
}

/// A program path with a `/` is relative to the scenario's directory; a bare name is looked up
/// in `PATH`.
fn resolve(program: &str, cwd: Option<&Path>) -> PathBuf {
    let p = Path::new(program);
    match cwd {
        // Absolute: the child resolves a relative program after changing to its directory.
        Some(dir) if p.is_relative() && program.contains('/') => {
            std::path::absolute(dir.join(p)).unwrap_or_else(|_| dir.join(p))
        }
        _ => p.to_path_buf(),
    }
}

/// How long a client program may take to start and answer `hello`.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(30);

/// Sends each program `{"id":0,"op":"hello"}` and waits until every one has answered (with any
/// result: an adapter's reply to an op it does not know will do), so that the run starts when
/// all clients can act, not while one interpreter is still importing its libraries.
pub(crate) fn handshake(
    processes: &[Option<Arc<ClientProgram>>],
    pipes: &mut [Option<(ChildStdin, ChildStdout)>],
) -> Result<(), RealError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut waiting = 0;
    for (c, slot) in pipes.iter_mut().enumerate() {
        let Some((mut stdin, stdout)) = slot.take() else {
            continue;
        };
        let pid = processes[c].as_ref().map(|p| p.pid()).unwrap_or(0);
        let fail = |what: String| RealError::External(format!("lock client pid {pid}: {what}"));
        stdin
            .write_all(b"{\"id\":0,\"op\":\"hello\"}\n")
            .and_then(|()| stdin.flush())
            .map_err(|e| fail(format!("cannot send `hello` ({e}): did the program exit?")))?;
        let tx = tx.clone();
        waiting += 1;
        // Byte by byte, unbuffered: nothing after the reply's newline may be consumed here.
        std::thread::spawn(move || {
            let mut stdout = stdout;
            let mut line = Vec::new();
            let mut byte = [0u8];
            let ok = loop {
                match stdout.read(&mut byte) {
                    Ok(1) if byte[0] == b'\n' => break true,
                    Ok(1) => line.push(byte[0]),
                    _ => break false,
                }
            };
            let _ = tx.send((c, stdin, stdout, ok, line));
        });
    }
    let deadline = Instant::now() + HELLO_TIMEOUT;
    while waiting > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        let (c, stdin, stdout, ok, line) = rx.recv_timeout(left).map_err(|_| {
            RealError::External(format!(
                "a lock client program did not answer `{{\"id\":0,\"op\":\"hello\"}}` within {} s \
                 (docs/client-protocol.md)",
                HELLO_TIMEOUT.as_secs()
            ))
        })?;
        waiting -= 1;
        let pid = processes[c].as_ref().map(|p| p.pid()).unwrap_or(0);
        let text = String::from_utf8_lossy(&line);
        let id = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("id").and_then(|i| i.as_u64()));
        if !ok || id != Some(0) {
            if !ok {
                // It exited: its log says why (a library that is not installed, say).
                if let Some(p) = &processes[c] {
                    p.wait_for_log(Duration::from_secs(1));
                }
            }
            return Err(RealError::External(format!(
                "lock client pid {pid} (`[lock] command`) did not answer `hello` with a protocol \
                 line{}: {text:?} (stdout is for protocol lines only; log to stderr; see \
                 docs/client-protocol.md)",
                if ok { "" } else { " before exiting" }
            )));
        }
        pipes[c] = Some((stdin, stdout));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::copy_prefixed;

    #[test]
    fn each_log_line_is_prefixed_with_the_clients_name() {
        let mut out = Vec::new();
        let log: &[u8] = b"acquired\r\nreleased: DEL returned 1\n\xffpartial";
        copy_prefixed(log, "client-3", |l| out.push(l.to_string()));
        assert_eq!(
            out,
            [
                "client-3: acquired",
                "client-3: released: DEL returned 1",
                "client-3: \u{fffd}partial"
            ]
        );
    }
}
