//! A server child process owned by a test: its own temporary folder (working directory and log),
//! a stop that cannot hang (SIGTERM, SIGKILL after a bound, then reaping), and a guarantee that
//! it does not outlive the test process even when no destructor runs (a static server, a killed
//! test binary): every server is spawned by one thread that lives as long as the process, and
//! asks the kernel to send the child SIGTERM when that thread ends.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Sender};
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// How long a server has to exit after SIGTERM before it gets SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(5);

/// How much of the log an error message quotes.
const LOG_TAIL_BYTES: u64 = 2048;

/// A running server. Dropping it stops it.
pub struct ServerProcess {
    name: String,
    child: Child,
    log: PathBuf,
    // Declared last: removed after the child is gone.
    dir: TempDir,
}

/// What the child's standard output is connected to.
pub enum Output {
    /// The log file, with standard error.
    Log,
    /// A pipe the caller reads (taken with [`ServerProcess::take_stdout`]).
    Piped,
}

impl ServerProcess {
    /// Spawns `command` (which must not set stdio or a working directory) in a new temporary
    /// folder, with standard error going to `server.log` there and standard input a pipe that
    /// closes when the server is stopped. `name` names the server in messages.
    pub fn spawn(name: &str, mut command: Command, output: Output) -> Result<ServerProcess, String> {
        let dir = tempfile::Builder::new()
            .prefix("sparkle-test-server-")
            .tempdir()
            .map_err(|e| format!("{name}: cannot create a temporary folder: {e}"))?;
        let log = dir.path().join("server.log");
        let log_file =
            File::create(&log).map_err(|e| format!("{name}: cannot create {}: {e}", log.display()))?;
        let stdout = match output {
            Output::Log => Stdio::from(
                log_file.try_clone().map_err(|e| format!("{name}: cannot share the log file: {e}"))?,
            ),
            Output::Piped => Stdio::piped(),
        };
        command.current_dir(dir.path()).stdin(Stdio::piped()).stdout(stdout).stderr(log_file);
        let child = spawn_tied_to_process(command).map_err(|e| format!("{name}: cannot start: {e}"))?;
        Ok(ServerProcess { name: name.to_string(), child, log, dir })
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's temporary folder (its working directory).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The child's standard output, when it was spawned with [`Output::Piped`] (once).
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// How the server ended, if it has.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The end of the server's log, for error messages.
    pub fn log_tail(&self) -> String {
        let Ok(mut file) = File::open(&self.log) else {
            return String::from("(no log)");
        };
        let length = file.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = file.seek(SeekFrom::Start(length.saturating_sub(LOG_TAIL_BYTES)));
        let mut tail = Vec::new();
        let _ = file.read_to_end(&mut tail);
        String::from_utf8_lossy(&tail).trim().to_string()
    }

    /// An error message naming the server, `what` went wrong and the end of its log.
    pub fn failure(&self, what: &str) -> String {
        format!("{} (pid {}): {what}; its log ends with:\n{}", self.name, self.pid(), self.log_tail())
    }

    /// Stops the server: closes its standard input, sends SIGTERM, and SIGKILL if it has not
    /// exited after a bound; then reaps it. Idempotent.
    pub fn stop(&mut self) {
        drop(self.child.stdin.take());
        if self.exited().is_some() {
            return;
        }
        terminate(&self.child);
        let deadline = Instant::now() + TERM_GRACE;
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return;
            }
            thread::sleep(Duration::from_millis(10));
        }
        eprintln!("{} (pid {}) ignored SIGTERM for {TERM_GRACE:?}; killing it", self.name, self.pid());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

fn terminate(child: &Child) {
    let Ok(pid) = libc::pid_t::try_from(child.id()) else {
        return;
    };
    // SAFETY: kill(2) only sends a signal; `pid` is our own child, not yet reaped (we hold its
    // `Child` and only `wait` reaps), so the id cannot have been reused by another process.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
}

type SpawnRequest = (Command, Sender<std::io::Result<Child>>);

/// Spawns `command` from the one spawner thread, with the parent-death signal set to SIGTERM.
/// The kernel sends that signal when the thread that forked the child ends; the spawner thread
/// ends only with the process, so no server outlives its test binary, whichever thread started it.
fn spawn_tied_to_process(command: Command) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (requests, incoming) = mpsc::channel::<SpawnRequest>();
        thread::Builder::new()
            .name("test-server-spawner".into())
            .spawn(move || {
                for (mut command, reply) in incoming {
                    let _ = reply.send(spawn_with_parent_death_signal(&mut command));
                }
            })
            .expect("cannot start the test-server spawner thread");
        Mutex::new(requests)
    });
    let (reply, answer) = mpsc::channel();
    spawner
        .lock()
        .map_err(|_| std::io::Error::other("the spawner is poisoned"))?
        .send((command, reply))
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
    answer.recv().map_err(|_| std::io::Error::other("the spawner thread is gone"))?
}

fn spawn_with_parent_death_signal(command: &mut Command) -> std::io::Result<Child> {
    // SAFETY: getpid is async-signal-safe and called before fork.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the forked child before exec and calls only prctl(2) and
    // getppid(2), both async-signal-safe; it allocates nothing and takes no lock.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before prctl: then nobody would signal us.
            if libc::getppid() != parent {
                return Err(std::io::Error::other("the test process ended while the server started"));
            }
            Ok(())
        })
    };
    command.spawn()
}
