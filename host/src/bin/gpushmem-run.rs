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
//!
//! `--simulate-nodes K [--same-hostname] [--bootstrap-port P]` (as root) makes
//! the job look like K machines ("nodes") on this one, to test multi-node jobs
//! without a cluster: the PEs are split over the nodes in blocks (the first
//! `N % K` nodes get one PE more, as Slurm's block distribution), with the
//! local rank and size of their node; the bootstrap is TCP on 127.0.0.1; each
//! node is its own mount namespace, with fresh tmpfs on `/tmp`, `/dev/shm` and
//! `/run/user` (no temporary file, POSIX shm or Unix socket path shared between
//! nodes), and its own UTS namespace, with hostname `<hostname>-node<k>` (the
//! machine's with `--same-hostname`: NVSHMEM tells nodes apart by hostname, so
//! it then takes the PEs for one node and uses P2P between them; `/tmp` and
//! `/dev/shm` then stay shared, as NVSHMEM passes CUDA IPC handles between the
//! processes of one node through the fixed path `/tmp/nvshmem-socket-*`, and
//! PEs sharing a GPU meet in a POSIX shared-memory slab). With
//! `--node-netns PREFIX [--bootstrap-host H]` node k also runs in the network
//! namespace `/run/netns/<PREFIX><k>`, made beforehand (`ip netns add`, veth
//! pairs between them), and the bootstrap meets at `tcp://H:PORT`. Not
//! simulated: a separate network unless `--node-netns` (otherwise all nodes
//! share this machine's, loopback included), separate GPUs and driver, a
//! separate `/proc`. A short-lived forked process
//! makes each node's namespaces; the launcher keeps them open
//! (`/proc/<pid>/ns/*`) for the job, and each PE joins its node's (`setns`)
//! before its exec, so PROGRAM must not live under the private directories.

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use gpushmem::bootstrap::auth::{Secret, SECRET_VAR};
use std::ffi::{CStr, CString, OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::net::{Ipv4Addr, TcpListener};
use std::ops::Range;
use std::os::fd::{AsRawFd, RawFd};
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
    about = "Starts N processes of PROGRAM, one per PE, on this node (or on K simulated nodes).",
    override_usage = "gpushmem-run -n N (or -np N) [--gpus 0,1,...] [--oversubscribe] [--grace SECONDS] [--wait-others] \
                      [--simulate-nodes K [--same-hostname] [--bootstrap-port P] [--node-netns PREFIX] \
                      [--bootstrap-host H]] [--] PROGRAM [ARGS]...",
    after_help = "\
When a PE exits non-zero or is killed, the other PEs are ended too. The exit
status is 0 if every PE exits 0, else the first failing PE's (128 + signal for
a PE killed by a signal). SIGINT, SIGTERM and SIGHUP are passed on to the PEs.

--simulate-nodes K (needs root) makes the job look like K machines (\"nodes\")
on this one, to test multi-node jobs without a cluster. The PEs are split in
blocks (the first N % K nodes get one PE more) and get their node's local rank
and size; the bootstrap is TCP on 127.0.0.1. Simulated: each node is its own
mount namespace, with fresh private /tmp, /dev/shm and /run/user, and its own
hostname, HOST-node<k> (HOST itself with --same-hostname, so that NVSHMEM
takes the PEs for one node and uses P2P between them; /tmp and /dev/shm then
stay shared, as NVSHMEM passes CUDA IPC handles between the processes of one
node through the fixed path /tmp/nvshmem-socket-*, and PEs sharing a GPU meet
in a POSIX shared-memory slab). With --node-netns
PREFIX, node k also runs in the network namespace /run/netns/PREFIX<k> (made
beforehand: ip netns add, veth pairs) and --bootstrap-host names node 0's
address there. Not simulated: a separate network without --node-netns (all
nodes share this machine's, loopback included), separate GPUs and driver, a
separate /proc. PROGRAM and the working directory
must not be under /tmp, /dev/shm or /run/user: the node's fresh, empty ones
are mounted before PROGRAM starts."
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
    /// Make the job look like K nodes on this machine (K <= N; needs root):
    /// each its own mount namespace (private /tmp, /dev/shm, /run/user) and
    /// hostname, bootstrap over TCP; see below
    #[arg(long, value_name = "K", value_parser = node_count)]
    simulate_nodes: Option<usize>,
    /// Allow more than 8 PEs per CPU of this machine
    #[arg(long)]
    oversubscribe: bool,
    /// With --simulate-nodes: keep this machine's hostname (and /tmp) on every node
    #[arg(long, requires = "simulate_nodes")]
    same_hostname: bool,
    /// With --simulate-nodes: the bootstrap's TCP port on 127.0.0.1 (default: a free one)
    #[arg(long, value_name = "P", requires = "simulate_nodes", value_parser = clap::value_parser!(u16).range(1..))]
    bootstrap_port: Option<u16>,
    /// With --simulate-nodes: node k's PEs run in the network namespace
    /// `/run/netns/<PREFIX><k>`, made beforehand (e.g. `ip netns add`, joined by
    /// veth pairs), instead of this machine's network
    #[arg(long, value_name = "PREFIX", requires = "simulate_nodes")]
    node_netns: Option<String>,
    /// With --simulate-nodes: the host in the bootstrap's address
    /// tcp://HOST:PORT (default 127.0.0.1; with --node-netns, node 0's address)
    #[arg(long, value_name = "HOST", requires = "simulate_nodes")]
    bootstrap_host: Option<String>,
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

/// `--simulate-nodes`: a node count of at least 1.
fn node_count(v: &str) -> Result<usize, String> {
    match v.trim().parse::<usize>() {
        Ok(k) if k > 0 => Ok(k),
        _ => Err("expects a number of nodes >= 1".into()),
    }
}

impl Options {
    /// What clap cannot check alone: every simulated node needs a PE.
    fn check(self) -> Result<Options, clap::Error> {
        let bad = |why: String| Err(Options::command().error(ErrorKind::ValueValidation, why));
        let max = gpushmem::abi::MAX_PES as usize;
        // More processes than this machine can usefully run is a typo far more
        // often than a plan (`-n 100000` forks until the system refuses).
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        match self.simulate_nodes {
            Some(k) if k > self.n => bad(format!(
                "--simulate-nodes {k} needs at least {k} PEs (got -n {}): every node gets one or more",
                self.n
            )),
            _ if self.n > max => bad(format!("-n {}: a job has at most {max} PEs", self.n)),
            _ if self.n > OVERSUBSCRIBE * cpus && !self.oversubscribe => bad(format!(
                "-n {}: more than {OVERSUBSCRIBE} processes per CPU of this machine ({cpus}); pass --oversubscribe \
                 if that is meant",
                self.n
            )),
            _ => Ok(self),
        }
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

/// PEs per CPU beyond which `-n` needs `--oversubscribe`.
const OVERSUBSCRIBE: usize = 8;

/// The command line with mpirun's and nvshmrun's `-np N` spelled `--np N`
/// (clap's short options are one letter), before PROGRAM only: PROGRAM's own
/// arguments pass untouched.
fn with_np(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    // Options that take a value as the next word.
    const VALUED: [&str; 9] = [
        "-n",
        "--np",
        "--gpus",
        "--grace",
        "--simulate-nodes",
        "--bootstrap-port",
        "--node-netns",
        "--bootstrap-host",
        "-np",
    ];
    let mut out: Vec<OsString> = Vec::new();
    let mut args = args.into_iter();
    out.extend(args.next());
    while let Some(a) = args.next() {
        let s = a.to_str().unwrap_or("");
        if s == "--" || !s.starts_with('-') {
            out.push(a);
            break;
        }
        out.push(if s == "-np" { "--np".into() } else { a.clone() });
        if VALUED.contains(&s) {
            out.extend(args.next());
        }
    }
    out.extend(args);
    out
}

fn main() {
    // Bad usage: clap prints the error and the usage and exits 2 (`--help`: the help, 0).
    let opts = Options::parse_from(with_np(std::env::args_os())).check().unwrap_or_else(|e| e.exit());
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

/// The PEs of each node, in blocks: of N PEs on K nodes, the first `N % K`
/// nodes get `N / K + 1`, the others `N / K` (as Slurm's block distribution).
fn node_layout(n: usize, k: usize) -> Vec<Range<usize>> {
    let (q, r) = (n / k, n % k);
    (0..k).map(|i| (i * q + i.min(r), q + usize::from(i < r))).map(|(a, len)| a..a + len).collect()
}

/// The directories a simulated node gets a fresh tmpfs on (each that exists), with the tmpfs options.
const TMPFS: [(&CStr, &CStr); 3] = [(c"/tmp", c"mode=1777"), (c"/dev/shm", c"mode=1777"), (c"/run/user", c"mode=755")];

/// The calls that make (`make_node`) and join (`join_node`) a simulated node,
/// by the index reported when one fails.
const STEPS: [&str; 11] = [
    "unshare(CLONE_NEWNS | CLONE_NEWUTS)",
    "mount(\"/\", MS_REC | MS_PRIVATE)",
    "mounting a tmpfs on /tmp",
    "mounting a tmpfs on /dev/shm",
    "mounting a tmpfs on /run/user",
    "sethostname",
    "setns(CLONE_NEWNS)",
    "setns(CLONE_NEWUTS)",
    "chdir to the working directory",
    "setns(CLONE_NEWNET) into the node's network namespace (--node-netns)",
    "setns(CLONE_NEWNET)",
];

/// Ok for a system call's 0, else step `i` of `STEPS` with the errno.
/// Async-signal-safe (errno is read, nothing allocated).
fn step(i: u8, rc: libc::c_int) -> Result<(), (u8, i32)> {
    match rc {
        0 => Ok(()),
        _ => Err((i, io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL))),
    }
}

/// Makes a node's namespaces for the calling process, which must have one
/// thread: a mount namespace with private propagation and a fresh tmpfs on the
/// entries `tmpfs` of `TMPFS`, and a UTS namespace with `hostname` (None: the
/// machine's). Async-signal-safe calls only and no allocation (runs after fork).
fn make_node(tmpfs: &[usize], hostname: Option<&CStr>, netns: Option<RawFd>) -> Result<(), (u8, i32)> {
    let null = std::ptr::null::<libc::c_char>();
    // SAFETY: system calls given NUL-terminated strings and fds that outlive
    // them; they change only this process's namespaces.
    unsafe {
        if let Some(fd) = netns {
            step(9, libc::setns(fd, libc::CLONE_NEWNET))?;
        }
        step(0, libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWUTS))?;
        // Else the mounts below would propagate to the machine's (shared) mounts.
        step(1, libc::mount(null, c"/".as_ptr(), null, libc::MS_REC | libc::MS_PRIVATE, std::ptr::null()))?;
        for &i in tmpfs {
            let (dir, opts) = TMPFS[i];
            let flags = libc::MS_NOSUID | libc::MS_NODEV;
            step(
                2 + i as u8,
                libc::mount(c"tmpfs".as_ptr(), dir.as_ptr(), c"tmpfs".as_ptr(), flags, opts.as_ptr().cast()),
            )?;
        }
        if let Some(h) = hostname {
            step(5, libc::sethostname(h.as_ptr(), h.to_bytes().len()))?;
        }
    }
    Ok(())
}

/// Runs in a PE's pre_exec (async-signal-safe calls only, no allocation): joins
/// its node's mount and UTS namespaces through the fds `ns` (open in the
/// launcher, inherited until exec), then enters the working directory `cwd`
/// again. When a call fails, writes its index in `STEPS` to `report`, so that
/// the launcher can say which failed, and returns its errno.
fn join_node(ns: [RawFd; 3], cwd: &CStr, report: RawFd) -> io::Result<()> {
    // SAFETY: setns and chdir take open fds and a NUL-terminated string that
    // outlive them, and change only this (forked) process.
    let joined = unsafe {
        // ns[2]: the node's network namespace, or -1 (this machine's network).
        (if ns[2] >= 0 { step(10, libc::setns(ns[2], libc::CLONE_NEWNET)) } else { Ok(()) })
            .and_then(|()| step(6, libc::setns(ns[0], libc::CLONE_NEWNS)))
            .and_then(|()| step(7, libc::setns(ns[1], libc::CLONE_NEWUTS)))
            // setns moves the PE to the namespace's root directory: every PE of
            // the node goes back to the same path (which must not be under a tmpfs).
            .and_then(|()| step(8, libc::chdir(cwd.as_ptr())))
    };
    joined.map_err(|(i, errno)| {
        // SAFETY: write is async-signal-safe; it reads one byte of ours.
        unsafe { libc::write(report, (&i as *const u8).cast(), 1) };
        io::Error::from_raw_os_error(errno)
    })
}

/// Makes a node's namespaces (see `make_node`) in a forked holder process, opens
/// them through `/proc/<pid>/ns/*` to keep them for the job, and ends the holder.
/// (The node's first PE could make them itself, but it may exit before the
/// launcher opened them, and a dead process's namespaces are gone.)
fn make_namespaces(tmpfs: &[usize], hostname: Option<&CStr>, netns: Option<&File>) -> Result<[File; 2], String> {
    let netns = netns.map(File::as_raw_fd);
    let (mut r, w) = io::pipe().map_err(|e| format!("cannot make a pipe: {e}"))?;
    let launcher = std::process::id() as i32;
    // SAFETY: the launcher has one thread, so the child may make any
    // async-signal-safe call; it makes only such calls and never returns.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: async-signal-safe calls; write reads our own buffer.
        unsafe {
            // Killed by the launcher below, or when the launcher dies.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != launcher {
                libc::_exit(1);
            }
            // u8::MAX: made; else the failed step and its errno.
            let mut msg = [u8::MAX; 5];
            if let Err((i, errno)) = make_node(tmpfs, hostname, netns) {
                msg[0] = i;
                msg[1..].copy_from_slice(&errno.to_ne_bytes());
            }
            libc::write(w.as_raw_fd(), msg.as_ptr().cast(), msg.len());
            loop {
                libc::pause();
            }
        }
    }
    if pid < 0 {
        return Err(format!("cannot fork: {}", io::Error::last_os_error()));
    }
    drop(w);
    let mut msg = [0u8; 5];
    let open = |ns: &str| File::open(format!("/proc/{pid}/ns/{ns}"));
    let made = match r.read_exact(&mut msg) {
        Ok(()) if msg[0] == u8::MAX => open("mnt")
            .and_then(|mnt| Ok([mnt, open("uts")?]))
            .map_err(|e: io::Error| format!("cannot open the namespaces of the process that made them: {e}")),
        Ok(()) => {
            let errno = i32::from_ne_bytes([msg[1], msg[2], msg[3], msg[4]]);
            let call = STEPS.get(usize::from(msg[0])).unwrap_or(&"?");
            Err(format!("{call} failed ({})", io::Error::from_raw_os_error(errno)))
        }
        Err(e) => Err(format!("the process making them ended early ({e})")),
    };
    // SAFETY: pid is our child, not yet reaped; kill and waitpid have no memory effects.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    made
}

/// `<host>-node<k>`, the hostname of simulated node k, with `host` shortened to
/// fit the kernel's 64 bytes (HOST_NAME_MAX).
fn node_hostname(host: &[u8], k: usize) -> Vec<u8> {
    let suffix = format!("-node{k}");
    [&host[..host.len().min(64 - suffix.len())], suffix.as_bytes()].concat()
}

/// A free TCP port on 127.0.0.1: binds port 0 and closes it again. A small
/// race remains: another program may take the port before the bootstrap binds it.
fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port())
}

/// What `--simulate-nodes` adds to a job.
struct Simulation {
    /// The launcher's working directory, entered again in each node.
    cwd: CString,
    /// Per node: its mount and UTS namespaces, held open for the job.
    ns: Vec<[File; 2]>,
    /// Per node: its network namespace (`--node-netns`), held open for the job.
    net: Vec<Option<File>>,
}

impl Simulation {
    /// The fds a PE of node `k` joins: mount, UTS, network (-1: this machine's).
    fn fds(&self, k: usize) -> [RawFd; 3] {
        let [m, u] = self.ns[k].each_ref().map(File::as_raw_fd);
        [m, u, self.net[k].as_ref().map_or(-1, File::as_raw_fd)]
    }
}

impl Simulation {
    /// Prints the layout of `nodes` and makes their namespaces.
    fn new(nodes: &[Range<usize>], same_hostname: bool, netns: Option<&str>) -> Result<Simulation, String> {
        let host = std::fs::read("/proc/sys/kernel/hostname")
            .map_err(|e| format!("cannot read this machine's hostname: {e}"))?;
        let host = host.trim_ascii_end();
        let cwd = std::env::current_dir().map_err(|e| format!("cannot read the working directory: {e}"))?;
        let cwd = CString::new(cwd.into_os_string().into_vec()).map_err(|e| e.to_string())?;
        let exists = |i: &usize| std::path::Path::new(OsStr::from_bytes(TMPFS[*i].0.to_bytes())).is_dir();
        // One hostname makes NVSHMEM take the PEs for one node, and it then meets
        // its node's processes at /tmp/nvshmem-socket-* and (PEs sharing a GPU)
        // in a shm_open slab: /tmp and /dev/shm must stay shared.
        let shared = |i: &usize| same_hostname && [c"/tmp", c"/dev/shm"].contains(&TMPFS[*i].0);
        let tmpfs: Vec<usize> = (0..TMPFS.len()).filter(|i| exists(i) && !shared(i)).collect();
        let dirs: Vec<_> = tmpfs.iter().map(|&i| TMPFS[i].0.to_string_lossy()).collect();
        let mut ns = Vec::new();
        let mut net = Vec::new();
        for (k, pes) in nodes.iter().enumerate() {
            let netns = match netns {
                Some(prefix) => {
                    let path = format!("/run/netns/{prefix}{k}");
                    say!("node {k}: network namespace {path}");
                    Some(File::open(&path).map_err(|e| {
                        format!("node {k}: cannot open {path} ({e}): make it first, e.g. `ip netns add {prefix}{k}`")
                    })?)
                }
                None => None,
            };
            let name = if same_hostname { host.to_vec() } else { node_hostname(host, k) };
            let shown = String::from_utf8_lossy(&name).into_owned();
            say!("node {k}: PEs {}..={}, hostname {shown}, private {}", pes.start, pes.end - 1, dirs.join(" "));
            let name = CString::new(name).map_err(|e| e.to_string())?;
            let made = make_namespaces(&tmpfs, (!same_hostname).then_some(name.as_c_str()), netns.as_ref());
            ns.push(made.map_err(|e| {
                format!("making node {k}'s namespaces failed: {e}; needs root and a kernel with mount/UTS namespaces")
            })?);
            net.push(netns);
        }
        Ok(Simulation { cwd, ns, net })
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
    // SAFETY: geteuid has no memory effects.
    if o.simulate_nodes.is_some() && unsafe { libc::geteuid() } != 0 {
        say!("--simulate-nodes needs root (it makes mount and UTS namespaces); run it as root, e.g. in CI or a container");
        return 1;
    }
    let nodes = node_layout(o.n, o.simulate_nodes.unwrap_or(1));
    let mut sim: Option<Simulation> = None;
    // The bootstrap: a Unix socket in a private directory (removed when `dir` drops),
    // or TCP with simulated nodes, whose /tmp differ.
    let mut dir = None;
    let bootstrap: OsString = if o.simulate_nodes.is_some() {
        match Simulation::new(&nodes, o.same_hostname, o.node_netns.as_deref()) {
            Ok(s) => sim = Some(s),
            Err(e) => {
                say!("--simulate-nodes: {e}");
                return 1;
            }
        }
        let port = match o.bootstrap_port.map_or_else(free_port, Ok) {
            Ok(p) => p,
            Err(e) => {
                say!("cannot find a free TCP port on 127.0.0.1 for the bootstrap: {e}");
                return 1;
            }
        };
        let host = o.bootstrap_host.as_deref().unwrap_or("127.0.0.1");
        let host = if host.contains(':') { format!("[{host}]") } else { host.to_string() };
        let network = match o.node_netns {
            Some(_) => "each node in its own network namespace",
            None => "simulated nodes share this machine's network",
        };
        say!("bootstrap: tcp://{host}:{port} ({network})");
        format!("tcp://{host}:{port}").into()
    } else {
        match TempDir::new() {
            Ok(d) => dir.insert(d).0.join("bootstrap.sock").into(),
            Err(e) => {
                say!("cannot create a temporary directory in {}: {e}", std::env::temp_dir().display());
                return 1;
            }
        }
    };
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
        let node = nodes.iter().position(|pes| pes.contains(&rank)).unwrap_or(0);
        let local = &nodes[node];
        let mut cmd = Command::new(&o.command[0]);
        cmd.args(&o.command[1..])
            .stdin(Stdio::null())
            .env("GPUSHMEM_RANK", rank.to_string())
            .env("GPUSHMEM_SIZE", o.n.to_string())
            .env("GPUSHMEM_LOCAL_RANK", (rank - local.start).to_string())
            .env("GPUSHMEM_LOCAL_SIZE", local.len().to_string())
            .env("GPUSHMEM_BOOTSTRAP", &bootstrap)
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
        // With simulated nodes: the node the PE joins (everything allocated
        // here, before the fork), and a pipe on which it says which call failed.
        let enter = sim.as_ref().map(|s| (s.fds(node), s.cwd.clone()));
        let report = match enter.as_ref().map(|_| io::pipe()).transpose() {
            Ok(r) => r,
            Err(e) => {
                say!("cannot make a pipe: {e}");
                failure = Some(1);
                break;
            }
        };
        let report_fd = report.as_ref().map_or(-1, |(_, w)| w.as_raw_fd());
        // SAFETY: prctl, getppid and join_node's calls are async-signal-safe, as
        // pre_exec requires, and nothing here allocates.
        unsafe {
            cmd.pre_exec(move || {
                // If the launcher dies (even by SIGKILL), its PEs get SIGTERM rather than run on.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                if libc::getppid() != launcher {
                    // (No allocation after fork: an OS error, not a message.)
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
                match &enter {
                    Some((ns, cwd)) => join_node(*ns, cwd, report_fd),
                    None => Ok(()),
                }
            })
        };
        let spawned = cmd.spawn();
        // On failure spawn has reaped the child, so with our write end closed the
        // read cannot block: it gets the failed call's index, or end of file.
        let failed_call = report.and_then(|(mut r, w)| {
            drop(w);
            let mut i = [0u8];
            (spawned.is_err() && matches!(r.read(&mut i), Ok(1)))
                .then(|| STEPS.get(usize::from(i[0])).copied())
                .flatten()
        });
        match spawned {
            Ok(child) => pes.push(Pe { rank, pid: child.id() as i32, child, status: None }),
            Err(e) => {
                let prog = display(&o.command[0]);
                if let Some(call) = failed_call {
                    let hint = if call.starts_with("chdir") {
                        format!("the working directory must not be under {}: each node gets fresh ones", PRIVATE_DIRS)
                    } else {
                        format!(
                            "joining node {node}'s namespaces failed; needs root and a kernel with mount/UTS namespaces"
                        )
                    };
                    say!("cannot start PE {rank} as {prog:?}: {call} failed ({e}) (--simulate-nodes: {hint})");
                    failure = Some(1);
                    break;
                }
                let (code, hint) = match e.kind() {
                    io::ErrorKind::NotFound => (127, ": program not found (or its interpreter is missing)"),
                    io::ErrorKind::PermissionDenied => (126, ": permission denied"),
                    _ => (1, ""),
                };
                let note = match (sim.is_some(), e.kind()) {
                    (true, io::ErrorKind::NotFound) => format!(
                        " (--simulate-nodes: PROGRAM must not be under {PRIVATE_DIRS}: each node gets fresh, empty ones before it starts)"
                    ),
                    _ => String::new(),
                };
                say!("cannot start PE {rank} as {prog:?}{hint} ({e}){note}");
                failure = Some(code);
                break;
            }
        }
    }
    let code = supervise(&mut pes, failure, o.grace, o.wait_others);
    // Only now: the PEs no longer need the bootstrap socket's directory or the nodes' namespaces.
    drop((dir, sim));
    code
}

/// For messages: the directories that simulated nodes have their own of.
const PRIVATE_DIRS: &str = "/tmp, /dev/shm or /run/user";

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
        Options::try_parse_from(std::iter::once("gpushmem-run").chain(args.iter().copied())).and_then(Options::check)
    }

    #[test]
    fn np_is_accepted_before_the_program_only() {
        let w = |a: &[&str]| with_np(a.iter().map(OsString::from)).into_iter().map(|s| s.into_string().unwrap());
        let v: Vec<String> = w(&["gpushmem-run", "-np", "2", "prog", "-np", "3"]).collect();
        assert_eq!(v, ["gpushmem-run", "--np", "2", "prog", "-np", "3"]);
        let v: Vec<String> = w(&["r", "--grace", "1", "-np", "4", "--", "-np"]).collect();
        assert_eq!(v, ["r", "--grace", "1", "--np", "4", "--", "-np"]);
        let o = Options::try_parse_from(with_np(["r", "-np", "2", "true"].map(OsString::from))).unwrap();
        assert_eq!(o.n, 2);
        // A count past what a job or this machine can run: refused unless meant.
        let parse = |a: &[&str]| Options::try_parse_from(with_np(a.iter().map(OsString::from))).unwrap().check();
        assert!(parse(&["r", "-n", "100000", "true"]).unwrap_err().to_string().contains("at most 4096 PEs"));
        let many = (OVERSUBSCRIBE * std::thread::available_parallelism().unwrap().get() + 1).min(4096).to_string();
        if many != "4096" {
            assert!(parse(&["r", "-n", &many, "true"]).unwrap_err().to_string().contains("--oversubscribe"));
            assert!(parse(&["r", "--oversubscribe", "-n", &many, "true"]).is_ok());
        }
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
            &["-n", "2", "--simulate-nodes", "0", "true"],
            &["-n", "2", "--simulate-nodes", "x", "true"],
            &["--simulate-nodes", "5", "-n", "4", "true"],
            &["-n", "2", "--same-hostname", "true"],
            &["-n", "2", "--bootstrap-port", "5000", "true"],
            &["-n", "2", "--simulate-nodes", "2", "--bootstrap-port", "0", "true"],
            &["-n", "2", "--simulate-nodes", "2", "--bootstrap-port", "65536", "true"],
        ] {
            let e = parse(args).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{args:?}: {e}");
        }
        let e = parse(&["-n", "2", "--grace", "-1", "true"]).unwrap_err().to_string();
        assert!(e.contains("expects seconds"), "{e}");
    }

    #[test]
    fn simulate_nodes_options() {
        let o = parse(&[
            "-n",
            "4",
            "--simulate-nodes",
            "2",
            "--same-hostname",
            "--bootstrap-port",
            "5000",
            "prog",
            "--same-hostname",
        ])
        .unwrap();
        assert_eq!((o.n, o.simulate_nodes, o.same_hostname, o.bootstrap_port), (4, Some(2), true, Some(5000)));
        assert_eq!(o.command, ["prog", "--same-hostname"]);
        let o = parse(&["--simulate-nodes=4", "-n", "4", "prog"]).unwrap();
        assert_eq!((o.simulate_nodes, o.same_hostname, o.bootstrap_port), (Some(4), false, None));
        let o = parse(&["-n", "4", "prog"]).unwrap();
        assert_eq!((o.simulate_nodes, o.same_hostname, o.bootstrap_port), (None, false, None));
        let e = parse(&["--simulate-nodes", "5", "-n", "4", "true"]).unwrap_err().to_string();
        assert!(e.contains("needs at least 5 PEs"), "{e}");
    }

    #[test]
    fn node_layouts() {
        assert_eq!(node_layout(4, 2), [0..2, 2..4]);
        assert_eq!(node_layout(5, 2), [0..3, 3..5]);
        assert_eq!(node_layout(3, 3), [0..1, 1..2, 2..3]);
        assert_eq!(node_layout(7, 3), [0..3, 3..5, 5..7]);
        assert_eq!(node_layout(4, 1), vec![Range { start: 0, end: 4 }]);
        for n in 1..20 {
            for k in 1..=n {
                let l = node_layout(n, k);
                // Consecutive blocks covering 0..n, each of n/k or n/k+1 PEs, the larger first.
                assert_eq!((l.len(), l[0].start, l[k - 1].end), (k, 0, n));
                assert!(l.windows(2).all(|w| w[0].end == w[1].start && w[0].len() >= w[1].len()));
                assert!(l.iter().all(|r| r.len() == n / k || r.len() == n / k + 1), "{n} {k} {l:?}");
            }
        }
    }

    #[test]
    fn node_hostnames() {
        assert_eq!(node_hostname(b"gpu7", 3), b"gpu7-node3");
        let long = node_hostname(&[b'h'; 64], 12);
        assert_eq!((long.len(), &long[57..]), (64, &b"-node12"[..]));
    }
}
