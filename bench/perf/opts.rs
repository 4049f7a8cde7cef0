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

pub const USAGE: &str =
    "usage: gpushmem-perf [all|put-bw|get-bw|latency|pingpong|scopes|pingpong-blocks|pingpong-placement|barrier|atomic|collective|init ...]
                     [--min-size BYTES] [--max-size BYTES] [--scope thread,warp,block|all]
                     [--grid N] [--block N] [--iters N] [--reps N] [--warmup N] [--bidir]
                     [--pes LIST] [--npes N] [--coll-max-size BYTES] [--placements N]
                     [--csv FILE] [--json FILE] [--png FILE]
       gpushmem-perf plot RESULTS.csv --png FILE   (re-plot a CSV; needs no GPU)";

/// Scope of the bandwidth kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Thread,
    Warp,
    Block,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Thread => "thread",
            Scope::Warp => "warp",
            Scope::Block => "block",
        }
    }
}

pub struct Opts {
    /// Subcommands to run, in `SUBCOMMANDS` order.
    pub what: Vec<&'static str>,
    /// `plot`: the CSV to re-plot.
    pub plot_from: Option<String>,
    pub min_size: u64,
    pub max_size: u64,
    pub scopes: Vec<Scope>,
    pub grid: Option<u32>,
    pub block: Option<u32>,
    pub iters: u32,
    pub reps: usize,
    pub warmup: usize,
    /// PE counts of `barrier`.
    pub pes: Vec<usize>,
    /// PEs of `collective` and `init`.
    pub npes: usize,
    pub coll_max_size: u64,
    /// `put-bw`/`get-bw`: also both directions at once (PE 0 ↔ PE 1).
    pub bidir: bool,
    /// `pingpong-placement`: positions of the ping-pong's words.
    pub placements: usize,
    pub csv: Option<String>,
    pub json: Option<String>,
    pub png: Option<String>,
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
        plot_from: None,
        min_size: 8,
        max_size: 1 << 30,
        scopes: vec![Scope::Block],
        grid: None,
        block: None,
        iters: 1,
        reps: 10,
        warmup: 3,
        pes: vec![2, 4, 8],
        npes: 8,
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
            "--block" => o.block = Some(num(&a, &val(&a)?)?),
            "--iters" => o.iters = num(&a, &val(&a)?)?,
            "--reps" => o.reps = num(&a, &val(&a)?)?,
            "--warmup" => o.warmup = num(&a, &val(&a)?)?,
            "--pes" => {
                let v = val(&a)?;
                o.pes = v.split(',').map(|p| num("--pes", p.trim())).collect::<Result<_, _>>()?;
            }
            "--npes" => o.npes = num(&a, &val(&a)?)?,
            "--bidir" => o.bidir = true,
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
    }
}
