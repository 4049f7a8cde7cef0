//! Where a PE learns its place in a multi-process job: its rank, the job's size,
//! its rank on the node, its GPU, and where the socket bootstrap meets.
//!
//! The first launcher whose rank variable is set wins:
//!
//! | launcher (`source`) | rank | size | local rank | local size |
//! |---|---|---|---|---|
//! | gpushmem-run | GPUSHMEM_RANK | GPUSHMEM_SIZE | GPUSHMEM_LOCAL_RANK | GPUSHMEM_LOCAL_SIZE |
//! | Open MPI | OMPI_COMM_WORLD_RANK | OMPI_COMM_WORLD_SIZE | OMPI_COMM_WORLD_LOCAL_RANK | OMPI_COMM_WORLD_LOCAL_SIZE |
//! | PMI (MPICH, Intel MPI) | PMI_RANK | PMI_SIZE | MPI_LOCALRANKID | MPI_LOCALNRANKS |
//! | Slurm (srun) | SLURM_PROCID | SLURM_NTASKS | SLURM_LOCALID | SLURM_STEP_TASKS_PER_NODE, else SLURM_NTASKS_PER_NODE, if a plain number |
//!
//! A missing local rank or size defaults to the global one (a one-node job).
//! `GPUSHMEM_DEVICE`, if set, is the PE's GPU ordinal for every launcher.
//! `GPUSHMEM_BOOTSTRAP_SECRET`, if set, is the job's secret (at least 16 bytes):
//! a PE joins only a PE 0 that proves knowledge of it, and PE 0 accepts only PEs
//! that do ([`super::auth`]). `gpushmem-run` sets a fresh random one for every
//! job; under `mpirun`/`srun`, give every rank of a launch the same value and
//! each launch a fresh one (for example
//! `GPUSHMEM_BOOTSTRAP_SECRET=$(openssl rand -hex 32) mpirun -x GPUSHMEM_BOOTSTRAP_SECRET …`,
//! not an `export` that every later launch from the shell would share).
//!
//! ## Rendezvous
//!
//! Where PE 0 listens and the others connect ([`Rendezvous`]), the first that applies:
//!
//! 1. `GPUSHMEM_BOOTSTRAP`, for any launcher: `tcp://HOST:PORT` (PEs on any
//!    nodes; HOST is the node rank 0 runs on, PORT a free port there; the job's
//!    secret is then **required**), or a Unix socket path (`unix:PATH` or
//!    `PATH`), used as given (except that a symbolic link there, or a listener
//!    bound at another path, is refused), where the peer-credential and secret
//!    checks alone keep strangers out; a directory that group or others may
//!    write gets a warning in the log, since another user can take the path
//!    there first.
//! 2. A job whose PEs span nodes — under Slurm, `SLURM_STEP_NUM_NODES` over 1
//!    (the step's word wins); otherwise the launcher's local size below its
//!    size, or, under Slurm without a step node count, `SLURM_NNODES` over 1
//!    (the local size under Slurm: `SLURM_STEP_TASKS_PER_NODE`, else
//!    `SLURM_NTASKS_PER_NODE`, when a plain number): under Slurm (ranks from Slurm's variables), TCP at the first host
//!    of `SLURM_STEP_NODELIST` (else `SLURM_JOB_NODELIST`), where task 0 runs,
//!    on port `GPUSHMEM_BOOTSTRAP_PORT` or else one derived from
//!    `SLURM_JOB_ID` and `SLURM_STEP_ID` (20000–29999,
//!    [`super::address::derived_port`]); under any other launcher an
//!    [`Error::Config`] at once saying to set `GPUSHMEM_BOOTSTRAP=tcp://…`
//!    (Open MPI and MPICH do not tell a rank where rank 0 runs).
//! 3. Otherwise (one node) a socket `<job key>.sock` in this user's private rendezvous
//!    directory (`gpushmem` in `$XDG_RUNTIME_DIR`, or in `/run/user/<uid>` when
//!    that variable is unset, if private; else `$TMPDIR/gpushmem-<uid>`, `/tmp`
//!    without `TMPDIR`; mode 0700, checked before use), where the job key is
//!    something every rank of one launch on this node sees alike, and two
//!    concurrent launches do not:
//!    1. `SLURM_JOB_ID` + `SLURM_STEP_ID` (one `srun` step) — first only when the
//!       ranks come from Slurm's variables: an `mpirun` inside a Slurm allocation
//!       inherits the allocation's ids, which several concurrent `mpirun`s share;
//!    2. `PMIX_NAMESPACE` (Open MPI 5 / PRRTE, `srun --mpi=pmix`);
//!    3. `OMPI_MCA_ess_base_jobid` (Open MPI 4);
//!    4. `SLURM_JOB_ID` + `SLURM_STEP_ID`, when not already tried;
//!    5. the parent process id: the ranks of one `mpirun`/`mpiexec` on a node are
//!       children of the same launcher daemon. This fails when each rank is
//!       wrapped in its own process (`mpirun sh -c prog`): set `GPUSHMEM_BOOTSTRAP`.
//!
//! A launcher that sets no local size (PMI without `MPI_LOCALNRANKS`) makes a
//! job look like one node: across nodes, set `GPUSHMEM_BOOTSTRAP=tcp://…`
//! (the PEs of other nodes otherwise time out, and their error says so).

use super::address::{derived_port, slurm_first_host, Rendezvous, PORT_VAR};
use super::auth::{Secret, MIN_SECRET_LEN, SECRET_VAR};
use super::rendezvous::default_dir;
use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// A PE's place in a multi-process job, as its launcher described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchEnv {
    /// This PE's number, `0..size`.
    pub rank: usize,
    /// Number of PEs in the job.
    pub size: usize,
    /// This PE's number among the PEs on its node, `0..local_size`.
    pub local_rank: usize,
    /// Number of PEs on this node.
    pub local_size: usize,
    /// GPU ordinal to use (`GPUSHMEM_DEVICE`); `None`: the caller picks, e.g.
    /// `local_rank` modulo the number of GPUs.
    pub device: Option<usize>,
    /// Where PE 0 listens and the other PEs connect: a Unix socket path (one
    /// node) or a TCP address (any nodes); see the [module docs](self).
    pub rendezvous: Rendezvous,
    /// The directory holding a default `rendezvous` path, which every PE creates
    /// (mode 0700) and checks to be private before use; `None` for a path given
    /// in `GPUSHMEM_BOOTSTRAP`, used as it is.
    pub private_dir: Option<PathBuf>,
    /// The job's secret (`GPUSHMEM_BOOTSTRAP_SECRET`), if the launcher set one.
    pub secret: Option<Secret>,
    /// Which launcher's variables these came from (`"gpushmem-run"`, `"Open MPI"`, `"PMI"`, `"Slurm"`).
    pub source: &'static str,
}

/// The variables one launcher sets.
struct Source {
    name: &'static str,
    rank: &'static str,
    size: &'static str,
    local_rank: &'static str,
    local_size: &'static str,
}

/// In order of precedence: a launcher started inside another's job (gpushmem-run
/// under srun, mpirun inside an allocation) sets its own variables on top.
const SOURCES: [Source; 4] = [
    Source {
        name: "gpushmem-run",
        rank: "GPUSHMEM_RANK",
        size: "GPUSHMEM_SIZE",
        local_rank: "GPUSHMEM_LOCAL_RANK",
        local_size: "GPUSHMEM_LOCAL_SIZE",
    },
    Source {
        name: "Open MPI",
        rank: "OMPI_COMM_WORLD_RANK",
        size: "OMPI_COMM_WORLD_SIZE",
        local_rank: "OMPI_COMM_WORLD_LOCAL_RANK",
        local_size: "OMPI_COMM_WORLD_LOCAL_SIZE",
    },
    Source {
        name: "PMI",
        rank: "PMI_RANK",
        size: "PMI_SIZE",
        local_rank: "MPI_LOCALRANKID",
        local_size: "MPI_LOCALNRANKS",
    },
    Source {
        name: "Slurm",
        rank: "SLURM_PROCID",
        size: "SLURM_NTASKS",
        local_rank: "SLURM_LOCALID",
        local_size: "SLURM_NTASKS_PER_NODE",
    },
];

/// Every variable through which a launcher places a process in a job (rank,
/// size, local rank and size of each launcher above, `GPUSHMEM_BOOTSTRAP`,
/// the secret, `GPUSHMEM_DEVICE`). A child process that must start a job of
/// its own (a test that provokes a trap, which poisons its CUDA context) gets
/// them removed: see [`remove_launcher_vars`].
pub const LAUNCHER_VARS: &[&str] = &[
    "GPUSHMEM_RANK",
    "GPUSHMEM_SIZE",
    "GPUSHMEM_LOCAL_RANK",
    "GPUSHMEM_LOCAL_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "MPI_LOCALRANKID",
    "MPI_LOCALNRANKS",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "SLURM_NTASKS_PER_NODE",
    "GPUSHMEM_BOOTSTRAP",
    PORT_VAR,
    SECRET_VAR,
    "GPUSHMEM_DEVICE",
];

/// Removes [`LAUNCHER_VARS`] from `cmd`'s environment, so that the child runs
/// as a job of its own (one PE, or whatever the caller then sets) instead of
/// trying to join this process's job.
pub fn remove_launcher_vars(cmd: &mut std::process::Command) -> &mut std::process::Command {
    for v in LAUNCHER_VARS {
        cmd.env_remove(v);
    }
    cmd
}

/// Longest socket path we make; `sockaddr_un` holds 108 bytes with the NUL.
const MAX_SOCKET_PATH: usize = 100;

impl LaunchEnv {
    /// Reads the process environment; `None` when no launcher's variables are
    /// set (a single-PE job). See the [module docs](self) for the variables.
    pub fn from_env() -> Result<Option<LaunchEnv>> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// As [`LaunchEnv::from_env`], reading variables through `get` (for tests).
    /// Empty values count as unset.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Option<LaunchEnv>> {
        let get = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let Some(src) = SOURCES.iter().find(|s| get(s.rank).is_some()) else {
            return Ok(None);
        };
        let number = |name: &str| -> Result<Option<usize>> {
            get(name)
                .map(|v| v.trim().parse::<usize>().map_err(|_| bad(name, &v, "expected a non-negative integer".into())))
                .transpose()
        };
        let rank = number(src.rank)?.unwrap_or_default();
        let size = number(src.size)?
            .ok_or_else(|| bad(src.size, "", format!("not set, but {} is: the job's size is unknown", src.rank)))?;
        // Before anything sizes a table by it (PE 0's slot per PE).
        crate::args::job_size(src.size, size)?;
        if rank >= size {
            return Err(bad(src.rank, &rank.to_string(), format!("must be less than {}={size}", src.size)));
        }
        let local_size = if src.name == "Slurm" {
            // The step's own count first: SLURM_NTASKS_PER_NODE is the job's, which an
            // `srun -N1` inside a larger allocation inherits. Slurm writes e.g. "2(x3)"
            // when nodes run different task counts: then only the size is known.
            ["SLURM_STEP_TASKS_PER_NODE", src.local_size]
                .into_iter()
                .find_map(&get)
                .and_then(|v| v.trim().parse::<usize>().ok())
                .filter(|&n| n > 0)
                .unwrap_or(size)
        } else {
            number(src.local_size)?.unwrap_or(size)
        };
        let local_rank = number(src.local_rank)?.unwrap_or(rank);
        if local_size == 0 || local_size > size {
            return Err(bad(src.local_size, &local_size.to_string(), format!("must be in 1..={}={size}", src.size)));
        }
        if local_rank >= local_size {
            let why = format!("must be less than the local size {local_size}");
            return Err(bad(src.local_rank, &local_rank.to_string(), why));
        }
        let device = number("GPUSHMEM_DEVICE")?;
        let (rendezvous, private_dir) = match get("GPUSHMEM_BOOTSTRAP") {
            Some(v) => (Rendezvous::parse(&v)?, None),
            None => match spans_nodes(&get, src, size, local_size)? {
                Some(why) => (slurm_rendezvous(&get, src).ok_or_else(|| needs_address(&why))??, None),
                None => {
                    let dir = default_dir(&get);
                    let path = default_rendezvous(&dir, &job_key(&get, src.name == "Slurm"));
                    let dir = path.parent().map(Path::to_path_buf);
                    (Rendezvous::Unix(path), dir)
                }
            },
        };
        let secret = match get(SECRET_VAR) {
            None => None,
            Some(text) => Some(Secret::from_text(&text).ok_or_else(|| {
                bad(
                    SECRET_VAR,
                    "<hidden>",
                    format!("too short: use at least {MIN_SECRET_LEN} random bytes (e.g. 64 hex digits)"),
                )
            })?),
        };
        let source = src.name;
        Ok(Some(LaunchEnv { rank, size, local_rank, local_size, device, rendezvous, private_dir, secret, source }))
    }
}

/// Why the launcher's variables say this job spans nodes (`None`: one node).
/// Its local size below its size says so for every launcher; under Slurm, so
/// does a step of more than one node (`SLURM_STEP_NUM_NODES`, else
/// `SLURM_NNODES`), which also holds when the nodes run different numbers of
/// tasks and the local size is unknown.
fn spans_nodes(
    get: &impl Fn(&str) -> Option<String>,
    src: &Source,
    size: usize,
    local: usize,
) -> Result<Option<String>> {
    let nodes = |var: &str| -> Result<Option<usize>> {
        get(var)
            .map(|v| v.trim().parse::<usize>().map_err(|_| bad(var, &v, "expected a number of nodes".into())))
            .transpose()
    };
    // A Slurm step's node count is the word on it (the job's variables may describe a larger allocation).
    if src.name == "Slurm" {
        if let Some(n) = nodes("SLURM_STEP_NUM_NODES")? {
            return Ok((n > 1).then(|| format!("SLURM_STEP_NUM_NODES={n}")));
        }
    }
    if local < size {
        return Ok(Some(format!("{}={local} of {}={size} PEs are on this node", src.local_size, src.size)));
    }
    if src.name == "Slurm" {
        if let Some(n) = nodes("SLURM_NNODES")? {
            return Ok((n > 1).then(|| format!("SLURM_NNODES={n}")));
        }
    }
    Ok(None)
}

/// The TCP rendezvous of a Slurm step: the first node of the step's node list
/// (`SLURM_STEP_NODELIST`, else `SLURM_JOB_NODELIST`), where task 0 runs, at
/// `GPUSHMEM_BOOTSTRAP_PORT` or a port derived from the job and step ids
/// ([`derived_port`]). `None` when the ranks do not come from Slurm's variables
/// (an `mpirun` inside an allocation may place rank 0 anywhere) or no node list is set.
fn slurm_rendezvous(get: &impl Fn(&str) -> Option<String>, src: &Source) -> Option<Result<Rendezvous>> {
    if src.name != "Slurm" {
        return None;
    }
    let (var, list) = ["SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"].into_iter().find_map(|v| get(v).map(|l| (v, l)))?;
    let Some(host) = slurm_first_host(&list) else {
        return Some(Err(bad(var, &list, "not a Slurm host list (expected e.g. node[01-04],gpu7)".into())));
    };
    let port = match get(PORT_VAR) {
        Some(p) => match p.trim().parse::<u16>() {
            Ok(n) if n > 0 => n,
            _ => return Some(Err(bad(PORT_VAR, &p, "expected a TCP port (1-65535)".into()))),
        },
        None => {
            let job = get("SLURM_JOB_ID").unwrap_or_default();
            derived_port(&job, &get("SLURM_STEP_ID").or_else(|| get("SLURM_STEPID")).unwrap_or_default())
        }
    };
    Some(Ok(Rendezvous::Tcp { host, port }))
}

/// The error of a job that spans nodes (`why`) with no TCP address to meet at.
fn needs_address(why: &str) -> Error {
    bad(
        "GPUSHMEM_BOOTSTRAP",
        "",
        format!(
            "not set, and this job spans nodes ({why}): PEs on different nodes cannot meet at a socket \
             of one node. Set GPUSHMEM_BOOTSTRAP=tcp://HOST:PORT for every rank, HOST being the node rank 0 \
             runs on and PORT a free port there (with GPUSHMEM_BOOTSTRAP_SECRET), e.g. \
             mpirun -x GPUSHMEM_BOOTSTRAP=tcp://$(hostname):29500 -x GPUSHMEM_BOOTSTRAP_SECRET …"
        ),
    )
}

fn bad(name: &str, value: &str, why: String) -> Error {
    Error::Config { name: name.into(), value: value.into(), why }
}

/// A string every rank of one launch on this node shares (see the module docs).
fn job_key(get: &impl Fn(&str) -> Option<String>, slurm_first: bool) -> String {
    let slurm = || {
        get("SLURM_JOB_ID").map(|job| match get("SLURM_STEP_ID").or_else(|| get("SLURM_STEPID")) {
            Some(step) => format!("slurm-{job}.{step}"),
            None => format!("slurm-{job}"),
        })
    };
    let others = || {
        get("PMIX_NAMESPACE")
            .map(|ns| format!("pmix-{ns}"))
            .or_else(|| get("OMPI_MCA_ess_base_jobid").map(|j| format!("ompi-{j}")))
    };
    let key = if slurm_first { slurm().or_else(others) } else { others().or_else(slurm) };
    // SAFETY: getppid cannot fail and touches no memory of ours.
    key.unwrap_or_else(|| format!("ppid-{}", unsafe { libc::getppid() }))
}

/// The socket path for a job key in the private directory `dir`: readable when
/// it fits, hashed when too long.
fn default_rendezvous(dir: &Path, key: &str) -> PathBuf {
    let clean: String =
        key.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect();
    let path = dir.join(format!("{clean}.sock"));
    if path.as_os_str().len() <= MAX_SOCKET_PATH {
        return path;
    }
    // FNV-1a: stable across processes and builds, unlike std's hasher.
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3));
    let path = dir.join(format!("{hash:016x}.sock"));
    if path.as_os_str().len() <= MAX_SOCKET_PATH {
        path
    } else {
        // The directory itself is too long for a socket address.
        let uid = super::rendezvous::my_euid();
        PathBuf::from(format!("/tmp/gpushmem-{uid}/{hash:016x}.sock"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(vars: &[(&str, &str)]) -> Result<Option<LaunchEnv>> {
        let m: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        LaunchEnv::from_lookup(|k| m.get(k).cloned())
    }

    fn config_var(r: Result<Option<LaunchEnv>>) -> String {
        match r {
            Err(Error::Config { name, .. }) => name,
            other => panic!("expected a Config error, got {other:?}"),
        }
    }

    #[test]
    fn nothing_set_is_single_pe() {
        assert_eq!(lookup(&[]).unwrap(), None);
        assert_eq!(lookup(&[("GPUSHMEM_RANK", "")]).unwrap(), None);
    }

    #[test]
    fn gpushmem_run() {
        let e = lookup(&[
            ("GPUSHMEM_RANK", "2"),
            ("GPUSHMEM_SIZE", "4"),
            ("GPUSHMEM_LOCAL_RANK", "2"),
            ("GPUSHMEM_LOCAL_SIZE", "4"),
            ("GPUSHMEM_BOOTSTRAP", "/tmp/x/bootstrap.sock"),
            ("GPUSHMEM_DEVICE", "3"),
            // Lower-precedence sources are ignored.
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("SLURM_PROCID", "1"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            e,
            LaunchEnv {
                rank: 2,
                size: 4,
                local_rank: 2,
                local_size: 4,
                device: Some(3),
                rendezvous: Rendezvous::Unix("/tmp/x/bootstrap.sock".into()),
                private_dir: None,
                secret: None,
                source: "gpushmem-run",
            }
        );
    }

    #[test]
    fn open_mpi_and_pmi() {
        let e = lookup(&[
            ("OMPI_COMM_WORLD_RANK", "5"),
            ("OMPI_COMM_WORLD_SIZE", "8"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "5"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "8"),
            ("OMPI_MCA_ess_base_jobid", "12345"),
            ("SLURM_JOB_ID", "77"),
            // Set but unusable (not absolute): no runtime directory, whatever this machine has.
            ("XDG_RUNTIME_DIR", "not-absolute"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!((e.rank, e.size, e.local_rank, e.local_size, e.device), (5, 8, 5, 8, None));
        assert_eq!(e.source, "Open MPI");
        // Open MPI's own job id wins over an enclosing Slurm allocation's.
        let name = e.rendezvous.unix_path().unwrap().file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(name, "ompi-12345.sock");
        // In this user's private directory (no TMPDIR nor usable XDG_RUNTIME_DIR in this lookup).
        let dir = PathBuf::from(format!("/tmp/gpushmem-{}", super::super::rendezvous::my_euid()));
        assert_eq!(e.rendezvous.unix_path().unwrap().parent(), Some(dir.as_path()));
        assert_eq!(e.private_dir, Some(dir));

        let e = lookup(&[("PMI_RANK", "1"), ("PMI_SIZE", "2"), ("GPUSHMEM_DEVICE", "0")]).unwrap().unwrap();
        assert_eq!((e.rank, e.size, e.local_rank, e.local_size, e.device), (1, 2, 1, 2, Some(0)));
        assert_eq!(e.source, "PMI");
        // No job id at all: the parent process id.
        // SAFETY: getppid has no preconditions and cannot fail.
        let ppid = unsafe { libc::getppid() };
        let name = e.rendezvous.unix_path().unwrap().file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(name, format!("ppid-{ppid}.sock"));
    }

    #[test]
    fn a_job_across_nodes_meets_over_tcp_or_says_how() {
        let two_nodes = [
            ("OMPI_COMM_WORLD_RANK", "5"),
            ("OMPI_COMM_WORLD_SIZE", "8"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
        ];
        // Open MPI does not say where rank 0 runs: an error naming what to set, never a wait.
        let e = lookup(&two_nodes).unwrap_err().to_string();
        assert!(e.contains("spans nodes") && e.contains("OMPI_COMM_WORLD_LOCAL_SIZE=4"), "{e}");
        assert!(e.contains("GPUSHMEM_BOOTSTRAP=tcp://"), "{e}");
        let e = lookup(&[&two_nodes[..], &[("GPUSHMEM_BOOTSTRAP", "tcp://n1:29500")]].concat()).unwrap().unwrap();
        assert_eq!(e.rendezvous, Rendezvous::Tcp { host: "n1".into(), port: 29500 });
        assert_eq!(
            config_var(lookup(&[&two_nodes[..], &[("GPUSHMEM_BOOTSTRAP", "tcp://n1")]].concat())),
            "GPUSHMEM_BOOTSTRAP"
        );
        // MPICH/Intel MPI (Hydra) across nodes: the same, from PMI's variables.
        let hydra = [("PMI_RANK", "3"), ("PMI_SIZE", "4"), ("MPI_LOCALRANKID", "1"), ("MPI_LOCALNRANKS", "2")];
        let e = lookup(&hydra).unwrap_err().to_string();
        assert!(e.contains("MPI_LOCALNRANKS=2 of PMI_SIZE=4"), "{e}");
        let e = lookup(&[&hydra[..], &[("GPUSHMEM_BOOTSTRAP", "tcp://[2001:db8::7]:29500")]].concat());
        assert_eq!(e.unwrap().unwrap().rendezvous.to_string(), "tcp://[2001:db8::7]:29500");
        // A one-node job may meet over TCP too, if asked to.
        let e = lookup(&[("PMI_RANK", "0"), ("PMI_SIZE", "2"), ("GPUSHMEM_BOOTSTRAP", "tcp://127.0.0.1:1234")]);
        assert!(e.unwrap().unwrap().rendezvous.is_tcp());
    }

    #[test]
    fn slurm() {
        let base = [
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_JOB_ID", "991"),
            ("SLURM_STEP_ID", "2"),
            ("PMIX_NAMESPACE", "ignored-for-slurm"),
        ];
        let e = lookup(&[&base[..], &[("SLURM_NTASKS_PER_NODE", "4"), ("SLURM_STEP_NUM_NODES", "1")]].concat())
            .unwrap()
            .unwrap();
        assert_eq!((e.rank, e.size, e.local_rank, e.local_size), (3, 4, 1, 4));
        assert_eq!(e.source, "Slurm");
        let name = e.rendezvous.unix_path().unwrap().file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(name, "slurm-991.2.sock");
        // Two nodes: TCP at the step's first node, on the port derived from the job and step.
        let two = [("SLURM_NTASKS_PER_NODE", "2"), ("SLURM_STEP_NODELIST", "gpu[07-08]")];
        let e = lookup(&[&base[..], &two].concat()).unwrap().unwrap();
        assert_eq!((e.local_size, e.private_dir.as_deref()), (2, None));
        let port = crate::bootstrap::address::derived_port("991", "2");
        assert_eq!(e.rendezvous, Rendezvous::Tcp { host: "gpu07".into(), port });
        let e = lookup(&[&base[..], &two, &[(PORT_VAR, "29500")]].concat()).unwrap().unwrap();
        assert_eq!(e.rendezvous.to_string(), "tcp://gpu07:29500");
        // Uneven nodes: Slurm writes a pattern, and only the job size is known; the node count tells.
        let uneven = [("SLURM_NTASKS_PER_NODE", "2(x2)"), ("SLURM_NNODES", "2"), ("SLURM_JOB_NODELIST", "a,b")];
        let e = lookup(&[&base[..], &uneven].concat()).unwrap().unwrap();
        assert_eq!((e.local_size, e.rendezvous.to_string().starts_with("tcp://a:")), (4, true));
        // `srun -N1 -n4` inside a 2-node allocation of 2 tasks per node: one node, whatever the job's variables.
        let step = [("SLURM_NTASKS_PER_NODE", "2"), ("SLURM_NNODES", "2"), ("SLURM_STEP_NUM_NODES", "1")];
        let e = lookup(&[&base[..], &step, &[("SLURM_STEP_TASKS_PER_NODE", "4")]].concat()).unwrap().unwrap();
        assert_eq!((e.local_size, e.rendezvous.is_tcp()), (4, false));
        // Two nodes and no node list: an error saying what to set.
        let e = lookup(&[&base[..], &[("SLURM_STEP_NUM_NODES", "2")]].concat()).unwrap_err().to_string();
        assert!(e.contains("GPUSHMEM_BOOTSTRAP") && e.contains("SLURM_STEP_NUM_NODES=2"), "{e}");
        assert_eq!(config_var(lookup(&[&base[..], &two, &[(PORT_VAR, "0")]].concat())), PORT_VAR);
        // An explicit path wins for every source.
        let e = lookup(&[&base[..], &[("GPUSHMEM_BOOTSTRAP", "/run/me.sock")]].concat()).unwrap().unwrap();
        assert_eq!(e.rendezvous, Rendezvous::Unix("/run/me.sock".into()));
        assert_eq!(e.private_dir, None);
    }

    #[test]
    fn long_keys_are_hashed_and_odd_characters_replaced() {
        let e =
            lookup(&[("PMI_RANK", "0"), ("PMI_SIZE", "1"), ("PMIX_NAMESPACE", "prterun-host/1@2")]).unwrap().unwrap();
        let name = e.rendezvous.unix_path().unwrap().file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(name, "pmix-prterun-host_1_2.sock");
        let long = "n".repeat(300);
        let e = lookup(&[("PMI_RANK", "0"), ("PMI_SIZE", "1"), ("PMIX_NAMESPACE", &long)]).unwrap().unwrap();
        assert!(e.rendezvous.unix_path().unwrap().as_os_str().len() <= MAX_SOCKET_PATH, "{:?}", e.rendezvous);
        let again = lookup(&[("PMI_RANK", "1"), ("PMI_SIZE", "2"), ("PMIX_NAMESPACE", &long)]).unwrap().unwrap();
        assert_eq!(e.rendezvous, again.rendezvous);
        // TMPDIR too long for a socket address: /tmp instead.
        let tmp = format!("/{}", "t".repeat(120));
        let e = lookup(&[("PMI_RANK", "0"), ("PMI_SIZE", "1"), ("TMPDIR", &tmp)]).unwrap().unwrap();
        assert!(e.rendezvous.to_string().starts_with("/tmp/gpushmem-"), "{:?}", e.rendezvous);
        assert_eq!(e.private_dir.as_deref(), e.rendezvous.unix_path().unwrap().parent());
    }

    #[test]
    fn secret_is_read_and_checked() {
        let base = [("GPUSHMEM_RANK", "0"), ("GPUSHMEM_SIZE", "2")];
        assert_eq!(lookup(&base).unwrap().unwrap().secret, None);
        let text = "f00dfeedf00dfeedf00dfeed";
        let e = lookup(&[&base[..], &[(SECRET_VAR, text)]].concat()).unwrap().unwrap();
        assert_eq!(e.secret, Secret::from_text(text));
        assert!(!format!("{e:?}").contains(text), "Debug shows the secret");
        let err = lookup(&[&base[..], &[(SECRET_VAR, "1234")]].concat()).unwrap_err().to_string();
        assert!(err.contains(SECRET_VAR) && err.contains("too short") && !err.contains("1234"), "{err}");
    }

    #[test]
    fn launcher_vars_cover_every_source() {
        for s in &SOURCES {
            for v in [s.rank, s.size, s.local_rank, s.local_size] {
                assert!(LAUNCHER_VARS.contains(&v), "{v} missing from LAUNCHER_VARS");
            }
        }
        let mut cmd = std::process::Command::new("true");
        cmd.env("GPUSHMEM_RANK", "1").env("KEEP", "1");
        remove_launcher_vars(&mut cmd);
        let set: Vec<_> = cmd.get_envs().filter(|(_, v)| v.is_some()).map(|(k, _)| k.to_owned()).collect();
        assert_eq!(set, ["KEEP"]);
    }

    #[test]
    fn a_job_size_past_what_a_job_can_have_names_the_variable() {
        // Checked here, before anything sizes a table by it (PE 0 makes one slot per PE).
        assert_eq!(config_var(lookup(&[("PMI_RANK", "0"), ("PMI_SIZE", "18446744073709551615")])), "PMI_SIZE");
        let too_many = (gpushmem_kernels::abi::MAX_PES + 1).to_string();
        assert_eq!(config_var(lookup(&[("GPUSHMEM_RANK", "0"), ("GPUSHMEM_SIZE", &too_many)])), "GPUSHMEM_SIZE");
    }

    #[test]
    fn bad_values_name_the_variable() {
        assert_eq!(config_var(lookup(&[("GPUSHMEM_RANK", "x"), ("GPUSHMEM_SIZE", "2")])), "GPUSHMEM_RANK");
        assert_eq!(config_var(lookup(&[("GPUSHMEM_RANK", "0")])), "GPUSHMEM_SIZE");
        assert_eq!(config_var(lookup(&[("GPUSHMEM_RANK", "0"), ("GPUSHMEM_SIZE", "0")])), "GPUSHMEM_SIZE");
        assert_eq!(
            config_var(lookup(&[("OMPI_COMM_WORLD_RANK", "4"), ("OMPI_COMM_WORLD_SIZE", "4")])),
            "OMPI_COMM_WORLD_RANK"
        );
        assert_eq!(config_var(lookup(&[("PMI_RANK", "-1"), ("PMI_SIZE", "4")])), "PMI_RANK");
        assert_eq!(config_var(lookup(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "two")])), "SLURM_NTASKS");
        assert_eq!(
            config_var(lookup(&[("PMI_RANK", "0"), ("PMI_SIZE", "2"), ("MPI_LOCALRANKID", "2")])),
            "MPI_LOCALRANKID"
        );
        assert_eq!(
            config_var(lookup(&[("GPUSHMEM_RANK", "0"), ("GPUSHMEM_SIZE", "2"), ("GPUSHMEM_LOCAL_SIZE", "3")])),
            "GPUSHMEM_LOCAL_SIZE"
        );
        assert_eq!(
            config_var(lookup(&[("GPUSHMEM_RANK", "0"), ("GPUSHMEM_SIZE", "2"), ("GPUSHMEM_DEVICE", "gpu0")])),
            "GPUSHMEM_DEVICE"
        );
        let e = lookup(&[("GPUSHMEM_RANK", "3"), ("GPUSHMEM_SIZE", "2")]).unwrap_err().to_string();
        assert!(e.contains("GPUSHMEM_RANK") && e.contains("GPUSHMEM_SIZE=2"), "{e}");
    }
}
