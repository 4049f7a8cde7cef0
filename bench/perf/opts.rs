//! Command line of gpushmem-perf (see the module doc of `perf.rs`): clap
//! parses it, [`parse`] checks what clap cannot and hands the benchmarks [`Opts`].

use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Every subcommand, in the order `all` runs them (`plot` is not part of `all`).
pub const SUBCOMMANDS: &[&str] = &[
    "put-bw",
    "get-bw",
    "latency",
    "pingpong",
    "scopes",
    "pingpong-blocks",
    "pingpong-placement",
    "barrier",
    "atomic",
    "collective",
    "init",
];

/// Subcommands that run on one PE: `put-bw`, `get-bw`, `pingpong`, `barrier`
/// and `init` have a one-PE form (`--one-pe`, and always on the NVSHMEM
/// engine); `pingpong-blocks` and `pingpong-placement` are one PE already.
pub const ONE_PE: &[&str] =
    &["put-bw", "get-bw", "pingpong", "pingpong-blocks", "pingpong-placement", "barrier", "init"];

/// Why the other subcommands have no one-PE form.
pub const NO_ONE_PE_WHY: &str = "each needs 2 or more PEs as threads of one process";

/// Scope of the bandwidth kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// One chunk per thread (`putmem_nbi`, `getmem_nbi`).
    Thread,
    /// One chunk per warp (`*_nbi_warp`).
    Warp,
    /// One chunk per block (`*_nbi_block`).
    Block,
    /// Put only, a diagnostic of the copy loop: one chunk per block, copied by
    /// a hand-written loop through `ptr()` with streaming stores (`st.global.cs`).
    BlockCs,
    /// Put only, a diagnostic of the copy loop: as `BlockCs` with plain
    /// stores and eight loads in flight per thread instead of four.
    BlockX8,
    /// Put only, a diagnostic of the work split: the library's block put over
    /// 64 KiB pieces, grid-strided (the grid walks the buffer together).
    BlockGs,
}

impl Scope {
    /// `thread`, `warp` or `block`, as in the test names.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Thread => "thread",
            Scope::Warp => "warp",
            Scope::Block => "block",
            Scope::BlockCs => "block_cs",
            Scope::BlockX8 => "block_x8",
            Scope::BlockGs => "block_gs",
        }
    }

    /// The put-bw diagnostics: scopes with no get-bw kernel.
    pub const PUT_ONLY: [Scope; 3] = [Scope::BlockCs, Scope::BlockX8, Scope::BlockGs];

    /// A put-bw diagnostic ([`Scope::PUT_ONLY`]): there is no get-bw kernel of this scope.
    pub fn put_only(self) -> bool {
        Scope::PUT_ONLY.contains(&self)
    }

    /// The names of [`Scope::PUT_ONLY`], for messages: "block_cs, block_x8, block_gs".
    fn put_only_names() -> String {
        Scope::PUT_ONLY.map(Scope::name).join(", ")
    }
}

/// The parsed command line.
pub struct Opts {
    /// Subcommands to run, in `SUBCOMMANDS` order.
    pub what: Vec<&'static str>,
    /// `all` (or no subcommand) was asked for, rather than subcommands by name.
    pub all: bool,
    /// Subcommands that `all` left out because they have no one-PE form (with `one_pe`).
    pub skipped: Vec<&'static str>,
    /// `--one-pe` (always on the NVSHMEM engine): `put-bw`/`get-bw` move data
    /// from PE 0 to itself, `pingpong` runs between two blocks of PE 0, `barrier`
    /// and `init` run 1 PE; the subcommands without a one-PE form are not run.
    pub one_pe: bool,
    /// `plot`: the CSV to re-plot.
    pub plot_from: Option<String>,
    /// Smallest size of the bandwidth sweeps.
    pub min_size: u64,
    /// Largest size of the bandwidth sweeps.
    pub max_size: u64,
    /// Scopes of the bandwidth kernels, each once.
    pub scopes: Vec<Scope>,
    /// `--grid`: blocks of every bandwidth launch (else `bandwidth::default_blocks`: about one per SM from 1 to 64 MiB, up to `max_grid`).
    pub grid: Option<u32>,
    /// `--max-grid`: the most blocks of the default bandwidth grid (4224; NVSHMEM's put_bw and
    /// bench/nvshmem/perf.cu use 1056).
    pub max_grid: u32,
    /// `--block`: threads per block of the bandwidth and throughput launches.
    pub block: Option<u32>,
    /// Launches per timed span of the bandwidth tests.
    pub iters: u32,
    /// Timed runs per figure (the median is reported).
    pub reps: usize,
    /// Untimed runs before the timed ones.
    pub warmup: usize,
    /// PE counts of `barrier`.
    pub pes: Vec<usize>,
    /// `--pes` was given (it does not go with `one_pe`).
    pub pes_given: bool,
    /// PEs of `collective` and `init`.
    pub npes: usize,
    /// `--npes` was given (it does not go with `one_pe`).
    pub npes_given: bool,
    /// Largest per-PE size of `collective`.
    pub coll_max_size: u64,
    /// `--graph`: `collective` captures each timed span's calls in a CUDA graph and times its
    /// launch (nccl-tests' `-G`): the device time per call without the host's launch cost.
    pub graph: bool,
    /// `put-bw`/`get-bw`: also both directions at once (PE 0 ↔ PE 1).
    pub bidir: bool,
    /// `pingpong-placement`: positions of the ping-pong's words.
    pub placements: usize,
    /// `pingpong-placement`: the modes, in the order they run (`None`: the default list).
    pub modes: Option<Vec<u32>>,
    /// `--csv FILE`.
    pub csv: Option<String>,
    /// `--json FILE`.
    pub json: Option<String>,
    /// `--png FILE`.
    pub png: Option<String>,
}

impl Opts {
    /// Fits the subcommands to `engine`: the NVSHMEM engine runs one PE per
    /// process, so there `one_pe` is always on. With `one_pe`, `all` leaves out
    /// the subcommands without a one-PE form (listed in `skipped`), and naming
    /// one of them, or `--bidir`, `--pes`, `--npes`, is an error that says why.
    pub fn for_engine(&mut self, engine: gpushmem::Engine) -> Result<(), String> {
        let nvshmem = engine == gpushmem::Engine::Nvshmem;
        self.one_pe |= nvshmem;
        if !self.one_pe {
            return Ok(());
        }
        let (why, instead) = if nvshmem {
            (
                "on the NVSHMEM engine gpushmem-perf runs one PE (NVSHMEM has one PE per process)",
                "with the native build (gpushmem-perf without GPUSHMEM_ENGINE=nvshmem)",
            )
        } else {
            ("--one-pe runs one PE", "without --one-pe")
        };
        let (keep, out): (Vec<&'static str>, Vec<&'static str>) =
            self.what.iter().copied().partition(|w| ONE_PE.contains(w));
        if !out.is_empty() && !self.all {
            return Err(format!(
                "{}: no one-PE form ({NO_ONE_PE_WHY}), and {why}; run {} {instead}",
                out.join(", "),
                if out.len() == 1 { "it" } else { "them" }
            ));
        }
        for (given, flag) in [(self.bidir, "--bidir"), (self.pes_given, "--pes"), (self.npes_given, "--npes")] {
            if given {
                return Err(format!("{flag} does not apply: {why} (put/get to itself, barrier and init on 1 PE)"));
            }
        }
        self.what = keep;
        self.skipped = out;
        self.pes = vec![1];
        self.npes = 1;
        Ok(())
    }
}

/// One line of `--help` for each entry of [`SUBCOMMANDS`].
fn about(name: &str) -> &'static str {
    match name {
        "put-bw" => "PE 0 puts S bytes to PE 1, S = --min-size ... --max-size (doubling); GB/s",
        "get-bw" => "PE 0 gets S bytes from PE 1; GB/s",
        "latency" => "p and quiet, and dependent g, of a u64 between PE 0 and PE 1; us",
        "pingpong" => "put_signal_nbi round trip between PE 0 and PE 1; us",
        "scopes" => "the ping-pong with each memory-ordering choice spelled out; us",
        "pingpong-blocks" => "the modes of scopes between two blocks of one kernel of one PE; us",
        "pingpong-placement" => "pingpong-blocks modes with their words at --placements positions; us",
        "barrier" => "barrier_all and sync_all of one block per PE, for each PE count of --pes; us",
        "atomic" => "atomic_fetch_add latency and atomic_add throughput on PE 1",
        "collective" => "allreduce, fcollect and alltoall over --npes PEs; algbw and busbw GB/s",
        "init" => "setting up --npes PEs and a collective 1 GiB malloc / calloc; ms",
        _ => "",
    }
}

/// The positional words: `all` or any of [`SUBCOMMANDS`], each with its help.
fn subcommand_words() -> PossibleValuesParser {
    let all = PossibleValue::new("all").help("every subcommand (the default; with --one-pe the one-PE ones)");
    PossibleValuesParser::new(
        std::iter::once(all).chain(SUBCOMMANDS.iter().map(|&s| PossibleValue::new(s).help(about(s)))),
    )
}

/// `--scope`: a comma-separated list of `thread`, `warp`, `block` or `all`, without repeats.
fn scopes(v: &str) -> Result<Vec<Scope>, String> {
    let mut out = Vec::new();
    for s in v.split(',') {
        let add: &[Scope] = match s.trim() {
            "thread" => &[Scope::Thread],
            "warp" => &[Scope::Warp],
            "block" => &[Scope::Block],
            "block_cs" => &[Scope::BlockCs],
            "block_x8" => &[Scope::BlockX8],
            "block_gs" => &[Scope::BlockGs],
            "all" => &[Scope::Block, Scope::Warp, Scope::Thread],
            other => {
                let diag = Scope::put_only_names();
                return Err(format!("unknown scope {other:?} (thread, warp, block, all; put-bw diagnostics {diag})"));
            }
        };
        for &a in add {
            if !out.contains(&a) {
                out.push(a);
            }
        }
    }
    Ok(out)
}

/// The command line as clap sees it; [`parse`] checks it and turns it into [`Opts`].
#[derive(Parser, Debug)]
#[command(
    name = "gpushmem-perf",
    about = "gpushmem measurements in the manner of NVSHMEM's perftests, PEs as threads of this process",
    override_usage = "gpushmem-perf [SUBCOMMAND]... [OPTIONS]      (no subcommand = all)\n       \
                      gpushmem-perf plot RESULTS.csv --png FILE   (re-plot a CSV; needs no GPU)",
    // `plot` is a clap subcommand; the benchmarks are positional words, several at once.
    args_conflicts_with_subcommands = true,
    disable_help_subcommand = true,
    after_help = "\
Sizes take k/m/g/t suffixes (powers of 1024). The header and the table go to
stdout; a progress bar goes to stderr when it is a terminal. Exit status: 0;
1 if a subcommand failed or a file could not be written; 2 for bad usage, an
engine mismatch or no GPU."
)]
struct Cli {
    /// Subcommands to run (in the order listed below, whatever the order given)
    #[arg(value_name = "SUBCOMMAND", value_parser = subcommand_words())]
    what: Vec<String>,
    #[command(subcommand)]
    plot: Option<Plot>,
    /// Smallest size of the put-bw/get-bw sweeps
    #[arg(long, value_name = "BYTES", default_value = "8", value_parser = gpushmem::parse_size)]
    min_size: u64,
    /// Largest size of the put-bw/get-bw sweeps
    #[arg(long, value_name = "BYTES", default_value = "1g", value_parser = gpushmem::parse_size)]
    max_size: u64,
    /// Scopes of the bandwidth kernels: thread, warp, block (comma-separated) or all; put-bw
    /// also takes block_cs and block_x8 (hand-written copies that measure the copy loop's choices)
    /// and block_gs (the block put over 64 KiB pieces, grid-strided)
    // A full path: clap takes a bare `Vec` for a repeatable option.
    #[arg(long = "scope", value_name = "LIST", default_value = "block", value_parser = scopes)]
    scopes: std::vec::Vec<Scope>,
    /// Blocks of every bandwidth launch [default: one per 16 KiB below 1 MiB, 64-128 to 64 MiB, then one per 64 KiB; at most --max-grid]
    #[arg(long, value_name = "N")]
    grid: Option<u32>,
    /// The most blocks of the default bandwidth grid (NVSHMEM's put_bw uses 1056)
    #[arg(long, value_name = "N", default_value_t = 4224)]
    max_grid: u32,
    /// Threads per block of the bandwidth and throughput launches [default: 512 for the block scope, else 1024]
    #[arg(long, value_name = "N")]
    block: Option<u32>,
    /// Launches (and cuMemcpys) per timed span of the bandwidth tests: with one, a
    /// span of a few MiB or less times the launch more than the copy (as nccl-tests
    /// and NVSHMEM's perftest, the default times many); bench/nvshmem/perf.cu times one
    #[arg(long, value_name = "N", default_value_t = 20)]
    iters: u32,
    /// Timed runs per figure (the median is reported)
    #[arg(long, value_name = "N", default_value_t = 10)]
    reps: usize,
    /// Untimed runs before the timed ones
    #[arg(long, value_name = "N", default_value_t = 3)]
    warmup: usize,
    /// put-bw/get-bw: also both directions at once (PE 0 <-> PE 1)
    #[arg(long)]
    bidir: bool,
    /// PE counts of barrier (comma-separated)
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "2,4,8")]
    pes: Vec<usize>,
    /// PEs of collective and init
    #[arg(long, value_name = "N", default_value_t = 8)]
    npes: usize,
    /// Largest per-PE size of collective
    #[arg(long, value_name = "BYTES", default_value = "64m", value_parser = gpushmem::parse_size)]
    coll_max_size: u64,
    /// collective: capture each timed span's calls in a CUDA graph and time its launch (as
    /// nccl-tests -G); rows are named <test>_graph
    #[arg(long)]
    graph: bool,
    /// pingpong-placement: positions of the ping-pong's words
    #[arg(long, value_name = "N", default_value_t = 16)]
    placements: usize,
    /// pingpong-placement: the ping-pong modes to run, in this order (a mode may repeat, to
    /// see whether run order moves a figure); default 1,8,5,7,0,10,11,12,13,14,17
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    modes: Option<Vec<u32>>,
    /// Run the one-PE forms (always on the NVSHMEM engine); subcommands without one are refused
    #[arg(long)]
    one_pe: bool,
    /// Write the results as CSV
    #[arg(long, value_name = "FILE")]
    csv: Option<String>,
    /// Write the results and the run's settings as JSON
    #[arg(long, value_name = "FILE")]
    json: Option<String>,
    /// Plot bandwidth against size of every *_bw_* test and its baseline as PNG
    #[arg(long, value_name = "FILE")]
    png: Option<String>,
}

/// `plot`, the one clap subcommand: it takes its own arguments.
#[derive(Subcommand, Debug)]
enum Plot {
    /// Re-plot the bandwidth results of a CSV written by --csv (needs no GPU)
    Plot {
        /// The CSV to plot
        #[arg(value_name = "RESULTS.csv")]
        csv: String,
        /// The PNG to write
        #[arg(long, value_name = "FILE")]
        png: String,
    },
}

/// Parses the arguments after the program name. The error is clap's: `exit()`
/// prints it (or the help, for `--help`) with the usage and exits 2 (0 for help).
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Opts, clap::Error> {
    let mut cmd = Cli::command();
    let m = cmd.try_get_matches_from_mut(std::iter::once("gpushmem-perf".to_string()).chain(args))?;
    let cli = Cli::from_arg_matches(&m)?;
    // `--pes` and `--npes` do not go with the one-PE forms, even at their defaults.
    let given = |id: &str| m.value_source(id) == Some(ValueSource::CommandLine);
    let (pes_given, npes_given) = (given("pes"), given("npes"));
    check(cli, pes_given, npes_given).map_err(|msg| cmd.error(ErrorKind::ValueValidation, msg))
}

/// [`Opts`] of `c`, or what is wrong with it that clap does not see.
fn check(c: Cli, pes_given: bool, npes_given: bool) -> Result<Opts, String> {
    let mut o = Opts {
        what: Vec::new(),
        all: false,
        skipped: Vec::new(),
        one_pe: c.one_pe,
        plot_from: None,
        min_size: c.min_size,
        max_size: c.max_size,
        scopes: c.scopes,
        grid: c.grid,
        max_grid: c.max_grid,
        block: c.block,
        iters: c.iters,
        reps: c.reps,
        warmup: c.warmup,
        pes: c.pes,
        pes_given,
        npes: c.npes,
        npes_given,
        coll_max_size: c.coll_max_size,
        graph: c.graph,
        bidir: c.bidir,
        placements: c.placements,
        modes: c.modes,
        csv: c.csv,
        json: c.json,
        png: c.png,
    };
    if let Some(Plot::Plot { csv, png }) = c.plot {
        o.plot_from = Some(csv);
        o.png = Some(png);
        return Ok(o);
    }
    let all = c.what.is_empty() || c.what.iter().any(|w| w == "all");
    o.all = all;
    o.what = SUBCOMMANDS.iter().copied().filter(|s| all || c.what.iter().any(|w| w == s)).collect();
    if o.reps == 0 {
        return Err("--reps must be at least 1".into());
    }
    if o.iters == 0 {
        return Err("--iters must be at least 1".into());
    }
    if o.placements == 0 {
        return Err("--placements must be at least 1".into());
    }
    if let Some(bad) = o.modes.iter().flatten().find(|&&m| m as usize >= crate::latency::MODES.len()) {
        return Err(format!("--modes: no ping-pong mode {bad} (modes are 0..={})", crate::latency::MODES.len() - 1));
    }
    if o.min_size > o.max_size {
        return Err(format!("--min-size {} is above --max-size {}", o.min_size, o.max_size));
    }
    if o.grid == Some(0) {
        return Err("--grid must be at least 1".into());
    }
    if o.max_grid == 0 {
        return Err("--max-grid must be at least 1".into());
    }
    if o.what.contains(&"get-bw") && o.scopes.iter().any(|s| s.put_only()) {
        let diag = Scope::put_only_names();
        return Err(format!("--scope {diag} are put-bw diagnostics; get-bw has no such kernels"));
    }
    if let Some(b) = o.block {
        if b == 0 || b > 1024 {
            return Err(format!("--block {b}: must be 1..=1024"));
        }
        if b % 32 != 0 && o.scopes.contains(&Scope::Warp) {
            return Err(format!("--block {b}: the warp scope needs a multiple of 32"));
        }
    }
    if o.pes.iter().any(|&p| p < 2) {
        return Err("--pes: every PE count must be at least 2".into());
    }
    if o.npes < 2 {
        return Err("--npes must be at least 2".into());
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Opts, clap::Error> {
        parse(s.split_whitespace().map(String::from))
    }

    #[test]
    fn clap_definition() {
        Cli::command().debug_assert();
        assert!(SUBCOMMANDS.iter().all(|s| !about(s).is_empty()));
    }

    #[test]
    fn defaults_and_lists() {
        let o = p("").unwrap();
        assert_eq!(o.what, SUBCOMMANDS);
        assert_eq!(o.scopes, [Scope::Block]);
        let o = p("atomic put-bw --scope all --max-size 64m --grid 4 --block 256").unwrap();
        assert_eq!(o.what, ["put-bw", "atomic"]);
        assert_eq!(o.scopes, [Scope::Block, Scope::Warp, Scope::Thread]);
        assert_eq!((o.max_size, o.grid, o.block), (64 << 20, Some(4), Some(256)));
        assert!(!o.bidir && p("put-bw --bidir").unwrap().bidir);
    }

    #[test]
    fn errors() {
        assert!(p("bogus").is_err());
        assert!(p("--reps 0").is_err());
        assert!(p("--scope warp --block 48").is_err());
        assert!(p("--min-size 1g --max-size 1m").is_err());
        assert!(p("plot x.csv").is_err());
        assert_eq!(p("plot x.csv --png y.png").unwrap().plot_from.as_deref(), Some("x.csv"));
        assert!(p("--max-grid 0").is_err());
        // Usage errors clap finds: bad numbers and sizes, unknown options, plot among benchmarks.
        assert!(p("--reps x").is_err() && p("--min-size 4q").is_err() && p("--frobnicate").is_err());
        assert!(p("put-bw plot x.csv --png y.png").is_err());
        assert!(p("--scope warp,bogus").is_err());
        // The put-bw diagnostics have no get-bw kernels; ping-pong modes exist up to 18.
        assert!(p("get-bw --scope block_cs").is_err() && p("--scope block_x8").is_err());
        assert!(p("pingpong-placement --modes 13,19").is_err());
        assert!(p("pingpong-placement --modes 17,18").is_ok());
    }

    #[test]
    fn diagnostics_and_modes() {
        let o = p("put-bw --scope block,block_cs,block_x8,block_gs").unwrap();
        assert_eq!(o.scopes, [Scope::Block, Scope::BlockCs, Scope::BlockX8, Scope::BlockGs]);
        let names = o.scopes.iter().map(|s| s.name()).collect::<Vec<_>>();
        assert_eq!(names, ["block", "block_cs", "block_x8", "block_gs"]);
        assert_eq!(p("pingpong-placement --modes 13,11,13").unwrap().modes, Some(vec![13, 11, 13]));
        assert_eq!(p("pingpong-placement").unwrap().modes, None);
        assert_eq!(crate::bandwidth::default_threads(Scope::Block), 512);
        assert_eq!(crate::bandwidth::default_threads(Scope::Thread), 1024);
    }

    #[test]
    fn given_or_default() {
        let o = p("barrier").unwrap();
        assert_eq!((o.pes.as_slice(), o.pes_given, o.npes, o.npes_given), ([2, 4, 8].as_slice(), false, 8, false));
        let o = p("barrier --pes 2,4 --npes 8 --coll-max-size 1m").unwrap();
        assert_eq!((o.pes.as_slice(), o.pes_given, o.npes_given), ([2, 4].as_slice(), true, true));
        assert_eq!((o.min_size, o.max_size, o.coll_max_size), (8, 1 << 30, 1 << 20));
    }

    #[test]
    fn one_pe_and_engines() {
        use gpushmem::Engine;
        // Native without --one-pe: unchanged.
        let mut o = p("").unwrap();
        o.for_engine(Engine::Native).unwrap();
        assert_eq!((o.what.as_slice(), o.one_pe), (SUBCOMMANDS, false));
        // `all` on the NVSHMEM engine: the one-PE subcommands only, the others listed as skipped.
        let mut o = p("all --max-grid 1056").unwrap();
        o.for_engine(Engine::Nvshmem).unwrap();
        assert!(o.one_pe && o.max_grid == 1056);
        assert_eq!(o.what, ONE_PE);
        assert_eq!(o.skipped, ["latency", "scopes", "atomic", "collective"]);
        assert_eq!((o.pes.as_slice(), o.npes), ([1].as_slice(), 1));
        // --one-pe on native: the same.
        let mut o = p("put-bw get-bw pingpong barrier init --one-pe").unwrap();
        o.for_engine(Engine::Native).unwrap();
        assert_eq!(o.what, ["put-bw", "get-bw", "pingpong", "barrier", "init"]);
        assert!(o.skipped.is_empty());
        // Named subcommands without a one-PE form, and two-PE options: refused, saying why.
        let e = p("put-bw atomic latency").unwrap().for_engine(Engine::Nvshmem).unwrap_err();
        assert!(e.contains("latency, atomic: no one-PE form") && e.contains("NVSHMEM engine"), "{e}");
        let e = p("collective --one-pe").unwrap().for_engine(Engine::Native).unwrap_err();
        assert!(e.contains("collective") && e.contains("--one-pe"), "{e}");
        assert!(p("put-bw --bidir").unwrap().for_engine(Engine::Nvshmem).unwrap_err().contains("--bidir"));
        assert!(p("barrier --pes 2").unwrap().for_engine(Engine::Nvshmem).unwrap_err().contains("--pes"));
        assert!(p("init --npes 4 --one-pe").unwrap().for_engine(Engine::Native).unwrap_err().contains("--npes"));
    }
}
