//! Command line of gpushmem-perf (see the module doc of `perf.rs`).

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

/// The usage text.
pub const USAGE: &str =
    "usage: gpushmem-perf [all|put-bw|get-bw|latency|pingpong|scopes|pingpong-blocks|pingpong-placement|barrier|atomic|collective|init ...]
                     [--min-size BYTES] [--max-size BYTES] [--scope thread,warp,block|all]
                     [--grid N] [--max-grid N] [--block N] [--iters N] [--reps N] [--warmup N] [--bidir]
                     [--pes LIST] [--npes N] [--coll-max-size BYTES] [--placements N] [--one-pe]
                     [--csv FILE] [--json FILE] [--png FILE]
       gpushmem-perf plot RESULTS.csv --png FILE   (re-plot a CSV; needs no GPU)";

/// Scope of the bandwidth kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// One chunk per thread (`putmem_nbi`, `getmem_nbi`).
    Thread,
    /// One chunk per warp (`*_nbi_warp`).
    Warp,
    /// One chunk per block (`*_nbi_block`).
    Block,
}

impl Scope {
    /// `thread`, `warp` or `block`, as in the test names.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Thread => "thread",
            Scope::Warp => "warp",
            Scope::Block => "block",
        }
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
    pub min_size: u64,
    pub max_size: u64,
    pub scopes: Vec<Scope>,
    /// `--grid`: blocks of every bandwidth launch (else one per 64 KiB, up to `max_grid`).
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
    /// `put-bw`/`get-bw`: also both directions at once (PE 0 ↔ PE 1).
    pub bidir: bool,
    /// `pingpong-placement`: positions of the ping-pong's words.
    pub placements: usize,
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

fn num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    v.parse().map_err(|e| format!("{name} {v:?}: {e}"))
}

fn scopes(v: &str) -> Result<Vec<Scope>, String> {
    let mut out = Vec::new();
    for s in v.split(',') {
        let add: &[Scope] = match s.trim() {
            "thread" => &[Scope::Thread],
            "warp" => &[Scope::Warp],
            "block" => &[Scope::Block],
            "all" => &[Scope::Block, Scope::Warp, Scope::Thread],
            other => return Err(format!("--scope: unknown scope {other:?} (thread, warp, block or all)")),
        };
        for &a in add {
            if !out.contains(&a) {
                out.push(a);
            }
        }
    }
    Ok(out)
}

/// Parses the arguments after the program name. `Err("")` means: print the usage only.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Opts, String> {
    let mut o = Opts {
        what: Vec::new(),
        all: false,
        skipped: Vec::new(),
        one_pe: false,
        plot_from: None,
        min_size: 8,
        max_size: 1 << 30,
        scopes: vec![Scope::Block],
        grid: None,
        max_grid: 4224,
        block: None,
        iters: 1,
        reps: 10,
        warmup: 3,
        pes: vec![2, 4, 8],
        pes_given: false,
        npes: 8,
        npes_given: false,
        coll_max_size: 64 << 20,
        bidir: false,
        placements: 16,
        csv: None,
        json: None,
        png: None,
    };
    let mut words = Vec::new();
    let mut args = args.into_iter();
    while let Some(a) = args.next() {
        let mut val = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--min-size" => o.min_size = gpushmem::parse_size(&val(&a)?).map_err(|e| format!("--min-size: {e}"))?,
            "--max-size" => o.max_size = gpushmem::parse_size(&val(&a)?).map_err(|e| format!("--max-size: {e}"))?,
            "--coll-max-size" => {
                o.coll_max_size = gpushmem::parse_size(&val(&a)?).map_err(|e| format!("--coll-max-size: {e}"))?
            }
            "--scope" => o.scopes = scopes(&val(&a)?)?,
            "--grid" => o.grid = Some(num(&a, &val(&a)?)?),
            "--max-grid" => o.max_grid = num(&a, &val(&a)?)?,
            "--block" => o.block = Some(num(&a, &val(&a)?)?),
            "--iters" => o.iters = num(&a, &val(&a)?)?,
            "--reps" => o.reps = num(&a, &val(&a)?)?,
            "--warmup" => o.warmup = num(&a, &val(&a)?)?,
            "--pes" => {
                let v = val(&a)?;
                o.pes = v.split(',').map(|p| num("--pes", p.trim())).collect::<Result<_, _>>()?;
                o.pes_given = true;
            }
            "--npes" => {
                o.npes = num(&a, &val(&a)?)?;
                o.npes_given = true;
            }
            "--bidir" => o.bidir = true,
            "--one-pe" => o.one_pe = true,
            "--placements" => o.placements = num(&a, &val(&a)?)?,
            "--csv" => o.csv = Some(val(&a)?),
            "--json" => o.json = Some(val(&a)?),
            "--png" => o.png = Some(val(&a)?),
            "-h" | "--help" => return Err(String::new()),
            w if !w.starts_with('-') => words.push(w.to_string()),
            other => return Err(format!("unknown option {other}")),
        }
    }
    if words.first().map(String::as_str) == Some("plot") {
        if words.len() != 2 || o.png.is_none() {
            return Err("plot needs one CSV file and --png FILE".into());
        }
        o.plot_from = words.pop();
        return Ok(o);
    }
    if words.is_empty() {
        words.push("all".into());
    }
    for w in &words {
        if w != "all" && !SUBCOMMANDS.contains(&w.as_str()) {
            return Err(format!("unknown subcommand {w:?}"));
        }
    }
    let all = words.iter().any(|w| w == "all");
    o.all = all;
    o.what = SUBCOMMANDS.iter().copied().filter(|s| all || words.iter().any(|w| w == s)).collect();
    if o.reps == 0 {
        return Err("--reps must be at least 1".into());
    }
    if o.iters == 0 {
        return Err("--iters must be at least 1".into());
    }
    if o.placements == 0 {
        return Err("--placements must be at least 1".into());
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

    fn p(s: &str) -> Result<Opts, String> {
        parse(s.split_whitespace().map(String::from))
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
