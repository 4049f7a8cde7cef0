//! `gpushmem-run`: starts the PEs of a one-node job, one process each (like
//! `nvshmrun` or `torchrun`), and ends the job as a whole when one PE fails.
//!
//! Each PE gets `GPUSHMEM_RANK`, `GPUSHMEM_SIZE`, `GPUSHMEM_LOCAL_RANK`,
//! `GPUSHMEM_LOCAL_SIZE`, `GPUSHMEM_BOOTSTRAP` (the socket path in a private
//! temporary directory), `GPUSHMEM_BOOTSTRAP_SECRET` (a fresh random secret
//! for this job: only PEs that know it can join) and, with `--gpus`,
//! `GPUSHMEM_DEVICE`; these are what `gpushmem::bootstrap::env::LaunchEnv` reads.
//!
//! Each PE runs in its own process group, so that ending a PE also ends what it
//! started (a shell's children), and a terminal's Ctrl-C reaches the PEs once,
//! through the launcher.

use clap::Parser;
use gpushmem::bootstrap::auth::{Secret, SECRET_VAR};
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Writes `gpushmem-run: <message>` and a newline to stderr in one `write`.
///
/// The PEs share the launcher's stderr; `eprintln!` writes its pieces in separate
/// calls, so a PE's output could land inside a launcher line (CI once saw
/// "PE  2 (pid" with a PE's space in it). One write of under `PIPE_BUF` bytes
/// to a pipe is atomic.
macro_rules! say {
    ($($arg:tt)*) => {{
        let line = format!("gpushmem-run: {}\n", format_args!($($arg)*));
        let _ = io::Write::write_all(&mut io::stderr().lock(), line.as_bytes());
    }};
}

/// The command line. `PROGRAM ARGS...` is everything from the first word that
/// is not an option (or everything after `--`), passed on untouched.
#[derive(Parser, Debug)]
#[command(
    name = "gpushmem-run",
    about = "Starts N processes of PROGRAM, one per PE, on this node.",
    override_usage = "gpushmem-run -n N [--gpus 0,1,...] [--grace SECONDS] [--wait-others] [--] PROGRAM [ARGS]...",
    after_help = "\
When a PE exits non-zero or is killed, the other PEs are ended too. The exit
status is 0 if every PE exits 0, else the first failing PE's (128 + signal for
a PE killed by a signal). SIGINT, SIGTERM and SIGHUP are passed on to the PEs."
)]
struct Options {
    /// Number of PEs
    #[arg(short = 'n', long = "np", value_name = "N", value_parser = pe_count)]
    n: usize,
    /// GPU ordinals, comma-separated: PE k gets entry k (wrapping around when
    /// the list is shorter than N) as GPUSHMEM_DEVICE
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = gpu)]
    gpus: Vec<usize>,
    /// When a PE fails, how long the other PEs get after SIGTERM before SIGKILL
    // Negative numbers are taken as values, so that `--grace -1` says why it is refused.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = seconds, allow_negative_numbers = true)]
    grace: Duration,
    /// When a PE fails, send the others nothing: give them --grace seconds to
    /// end on their own (a bounded device wait or the bootstrap timeout reports
    /// the lost peer), then SIGKILL what is left; for testing failure handling
    #[arg(long)]
    wait_others: bool,
    /// The program each PE runs, and its arguments
    #[arg(value_name = "PROGRAM", required = true, trailing_var_arg = true, value_parser = clap::value_parser!(OsString))]
    command: Vec<OsString>,
}

/// `-n`: a PE count of at least 1.
fn pe_count(v: &str) -> Result<usize, String> {
    match v.trim().parse::<usize>() {
        Ok(k) if k > 0 => Ok(k),
        _ => Err("expects a number of PEs >= 1".into()),
    }
}

/// One entry of `--gpus`.
fn gpu(v: &str) -> Result<usize, String> {
    v.trim().parse().map_err(|_| "expects GPU ordinals like 0,1,2".into())
}

/// `--grace`: seconds, finite and not negative.
fn seconds(v: &str) -> Result<Duration, String> {
    match v.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(Duration::from_secs_f64(s)),
        _ => Err("expects seconds, e.g. 10 or 0.5".into()),
    }
}

fn main() {
    // Bad usage: clap prints the error and the usage and exits 2 (`--help`: the help, 0).
    let opts = Options::parse();
    std::process::exit(run(&opts));
}

/// Signals received and not yet passed on, as a bit mask.
static PENDING: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Async-signal-safe: one lock-free atomic operation.
    PENDING.fetch_or(1 << sig, Ordering::SeqCst);
}

const FORWARDED: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

fn install_signal_handlers() {
    for sig in FORWARDED {
        // SAFETY: a zeroed sigaction with a handler that only touches an atomic.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        _ => "unknown signal",
    }
}

/// A private (mode 0700) temporary directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> io::Result<TempDir> {
        let mut base = std::env::temp_dir();
        // The socket path inside must fit in sockaddr_un (108 bytes).
        if base.as_os_str().len() > 80 {
            base = PathBuf::from("/tmp");
        }
        let template = CString::new(base.join("gpushmem-run.XXXXXX").into_os_string().into_vec())?;
        let mut bytes = template.into_bytes_with_nul();
        // SAFETY: mkdtemp rewrites the XXXXXX of a NUL-terminated buffer we own.
        if unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) }.is_null() {
            return Err(io::Error::last_os_error());
        }
        bytes.pop();
        Ok(TempDir(PathBuf::from(OsString::from_vec(bytes))))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One started PE.
struct Pe {
    rank: usize,
    pid: i32,
    child: Child,
    status: Option<ExitStatus>,
}

/// Signals a PE's whole process group (the PE and whatever it started).
fn signal_group(pid: i32, sig: libc::c_int) {
    // SAFETY: kill has no memory effects; a group that is gone gives ESRCH, ignored.
    unsafe { libc::kill(-pid, sig) };
}

/// Whether the PE has ended (Some(true): with status 0), without reaping it.
fn peek_exit(pid: i32) -> Option<bool> {
    // SAFETY: waitid fills a zeroed siginfo_t we own; WNOWAIT leaves the child to try_wait.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        if libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) != 0 {
            // Unknown (cannot happen for a child not yet reaped): let try_wait
            // tell, and leave its group alone unless the job is ending.
            return Some(true);
        }
        (info.si_pid() != 0).then(|| info.si_code == libc::CLD_EXITED && info.si_status() == 0)
    }
}

/// The launcher's exit status for a PE's: its code, or 128 + the signal.
fn exit_code(st: ExitStatus) -> i32 {
    st.code().or_else(|| st.signal().map(|s| 128 + s)).unwrap_or(1)
}

fn describe(st: ExitStatus) -> String {
    match (st.code(), st.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(s)) => {
            let core = if st.core_dumped() { " (core dumped)" } else { "" };
            format!("was killed by signal {s} ({}){core}", signal_name(s))
        }
        _ => format!("ended: {st}"),
    }
}

fn run(o: &Options) -> i32 {
    install_signal_handlers();
    let dir = match TempDir::new() {
        Ok(d) => d,
        Err(e) => {
            say!("cannot create a temporary directory in {}: {e}", std::env::temp_dir().display());
            return 1;
        }
    };
    let socket = dir.0.join("bootstrap.sock");
    let secret = match Secret::generate_text() {
        Ok(s) => s,
        Err(e) => {
            say!("cannot draw a random bootstrap secret: {e}");
            return 1;
        }
    };
    let launcher = std::process::id() as i32;
    let mut pes: Vec<Pe> = Vec::new();
    // Exit status of the first failure, once there is one.
    let mut failure: Option<i32> = None;
    for rank in 0..o.n {
        let mut cmd = Command::new(&o.command[0]);
        cmd.args(&o.command[1..])
            .stdin(Stdio::null())
            .env("GPUSHMEM_RANK", rank.to_string())
            .env("GPUSHMEM_SIZE", o.n.to_string())
            .env("GPUSHMEM_LOCAL_RANK", rank.to_string())
            .env("GPUSHMEM_LOCAL_SIZE", o.n.to_string())
            .env("GPUSHMEM_BOOTSTRAP", &socket)
            .env(SECRET_VAR, &secret)
            .process_group(0);
        if !o.gpus.is_empty() {
            cmd.env("GPUSHMEM_DEVICE", o.gpus[rank % o.gpus.len()].to_string());
        }
        // NVLink multicast (NVLS) stays off unless the user asks for it: the
        // machines gpushmem targets must not use it.
        for (k, v) in [("NVSHMEM_DISABLE_NVLS", "1"), ("NCCL_NVLS_ENABLE", "0")] {
            if std::env::var_os(k).is_none() {
                cmd.env(k, v);
            }
        }
        // SAFETY: prctl and getppid are async-signal-safe, as pre_exec requires.
        unsafe {
            cmd.pre_exec(move || {
                // If the launcher dies (even by SIGKILL), its PEs get SIGTERM rather than run on.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                if libc::getppid() != launcher {
                    return Err(io::Error::other("gpushmem-run exited"));
                }
                Ok(())
            })
        };
        match cmd.spawn() {
            Ok(child) => pes.push(Pe { rank, pid: child.id() as i32, child, status: None }),
            Err(e) => {
                let prog = display(&o.command[0]);
                let (code, hint) = match e.kind() {
                    io::ErrorKind::NotFound => (127, ": program not found (or its interpreter is missing)"),
                    io::ErrorKind::PermissionDenied => (126, ": permission denied"),
                    _ => (1, ""),
                };
                say!("cannot start PE {rank} as {prog:?}{hint} ({e})");
                failure = Some(code);
                break;
            }
        }
    }
    let code = supervise(&mut pes, failure, o.grace, o.wait_others);
    drop(dir);
    code
}

fn display(s: &OsStr) -> String {
    String::from_utf8_lossy(s.as_bytes()).into_owned()
}

/// Waits for every PE; ends them all at the first failure or launcher signal
/// (with `wait_others`, a failure only starts the grace period).
fn supervise(pes: &mut [Pe], mut failure: Option<i32>, grace: Duration, wait_others: bool) -> i32 {
    // When the remaining PEs were sent SIGTERM (or a forwarded signal).
    let mut ending: Option<Instant> = None;
    let mut killed = false;
    let running = |pes: &[Pe]| pes.iter().filter(|p| p.status.is_none()).count();
    loop {
        let mask = PENDING.swap(0, Ordering::SeqCst);
        for sig in FORWARDED.into_iter().filter(|s| mask & (1 << s) != 0) {
            say!("got {}; passing it on to the PEs", signal_name(sig));
            for p in pes.iter().filter(|p| p.status.is_none()) {
                signal_group(p.pid, sig);
            }
            ending.get_or_insert_with(Instant::now);
        }
        for p in pes.iter_mut().filter(|p| p.status.is_none()) {
            // Seen before reaping, while the PE's pid (its group's id) cannot be reused:
            // a failed PE, or any PE once the job is ending, leaves nothing behind.
            match peek_exit(p.pid) {
                None => continue,
                Some(clean) if clean && (ending.is_none() || wait_others) => {}
                Some(_) => signal_group(p.pid, libc::SIGKILL),
            }
            let st = match p.child.try_wait() {
                Ok(Some(st)) => st,
                Ok(None) => continue,
                Err(e) => {
                    say!("cannot wait for PE {} (pid {}): {e}", p.rank, p.pid);
                    ExitStatus::from_raw(1 << 8)
                }
            };
            p.status = Some(st);
            if !st.success() {
                // After the launcher started ending the job, PEs dying is expected: not reported.
                if ending.is_none() || wait_others {
                    say!("PE {} (pid {}) {}", p.rank, p.pid, describe(st));
                }
                failure.get_or_insert(exit_code(st));
            }
        }
        let left = running(pes);
        if failure.is_some() && ending.is_none() {
            ending = Some(Instant::now());
            if left > 0 && wait_others {
                say!("waiting up to {} for the other {left} PE(s) to end on their own", fmt_secs(grace));
            } else if left > 0 {
                say!("ending the other {left} PE(s): SIGTERM now, SIGKILL after {}", fmt_secs(grace));
                for p in pes.iter().filter(|p| p.status.is_none()) {
                    signal_group(p.pid, libc::SIGTERM);
                }
            }
        }
        if left == 0 {
            break;
        }
        if let Some(t) = ending {
            if !killed && t.elapsed() >= grace {
                killed = true;
                for p in pes.iter().filter(|p| p.status.is_none()) {
                    say!(
                        "PE {} (pid {}) still running {} after {}; sending SIGKILL",
                        p.rank,
                        p.pid,
                        fmt_secs(grace),
                        if wait_others { "the first failure" } else { "SIGTERM" }
                    );
                    signal_group(p.pid, libc::SIGKILL);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    failure.unwrap_or(0)
}

fn fmt_secs(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Options, clap::Error> {
        Options::try_parse_from(std::iter::once("gpushmem-run").chain(args.iter().copied()))
    }

    #[test]
    fn clap_definition() {
        Options::command().debug_assert();
    }

    #[test]
    fn options_and_program() {
        let o = parse(&["-n", "3", "--gpus", "4,5", "--grace", "0.5", "--", "sh", "-c", "x", "--np", "9"]).unwrap();
        assert_eq!(
            (o.n, o.gpus.as_slice(), o.grace, o.wait_others),
            (3, [4, 5].as_slice(), Duration::from_millis(500), false)
        );
        assert_eq!(o.command, ["sh", "-c", "x", "--np", "9"]);
        // Without `--`, the first word that is not an option starts the program; the rest is its own.
        let o = parse(&["--np=2", "--wait-others", "prog", "-n", "5", "--", "--help"]).unwrap();
        assert_eq!((o.n, o.wait_others, o.grace), (2, true, Duration::from_secs(10)));
        assert_eq!(o.command, ["prog", "-n", "5", "--", "--help"]);
        assert_eq!(parse(&["-n4", "true"]).unwrap().n, 4);
        // A program name or argument that is not UTF-8 is passed on as it is.
        let odd = OsString::from_vec(vec![b'a', 0xff]);
        let o = Options::try_parse_from([
            OsString::from("gpushmem-run"),
            "-n".into(),
            "1".into(),
            odd.clone(),
            odd.clone(),
        ]);
        assert_eq!(o.unwrap().command, [odd.clone(), odd]);
    }

    #[test]
    fn bad_usage() {
        for args in [
            &[][..],
            &["true"],
            &["-n", "0", "true"],
            &["-n", "x", "true"],
            &["-n", "2"],
            &["-n", "2", "--"],
            &["-n", "2", "--gpus", "0,,1", "true"],
            &["-n", "2", "--grace", "-1", "true"],
            &["-n", "2", "--frobnicate", "true"],
        ] {
            let e = parse(args).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{args:?}: {e}");
        }
        let e = parse(&["-n", "2", "--grace", "-1", "true"]).unwrap_err().to_string();
        assert!(e.contains("expects seconds"), "{e}");
    }
}
