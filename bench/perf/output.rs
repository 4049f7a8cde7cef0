//! Results out: the header line, the stdout table, the CSV (a `# gpushmem-perf …`
//! line naming the engine, then `test,size,gpushmem,baseline,unit`), the JSON,
//! and reading a CSV back (for `gpushmem-perf plot`).

use crate::common::Row;
use std::fmt::Write as _;

/// What a run measured on, written into every output so that files of
/// different engines or shapes cannot be mixed up.
#[derive(Clone, Debug, PartialEq)]
pub struct Meta {
    /// The engine (`native` or `nvshmem`): the kernels' and the host's, which must agree.
    pub engine: &'static str,
    /// The NVSHMEM version of the kernels' device code (NVSHMEM engine), when known.
    pub nvshmem: Option<&'static str>,
    /// The one-PE forms ran (`--one-pe`, always on the NVSHMEM engine).
    pub one_pe: bool,
    /// The most blocks of the default bandwidth grid (`--max-grid`).
    pub max_grid: u32,
    /// Timed runs and warm-up runs per figure.
    pub reps: usize,
    /// Untimed runs before the timed ones.
    pub warmup: usize,
    /// Subcommands `all` left out (no one-PE form).
    pub skipped: Vec<&'static str>,
}

impl Meta {
    /// `key=value` words: `engine=… nvshmem=… one_pe=yes|no max_grid=… reps=… warmup=…`.
    fn words(&self) -> String {
        format!(
            "engine={} nvshmem={} one_pe={} max_grid={} reps={} warmup={}",
            self.engine,
            self.nvshmem.unwrap_or("-"),
            if self.one_pe { "yes" } else { "no" },
            self.max_grid,
            self.reps,
            self.warmup
        )
    }

    /// The header printed on stdout before anything runs.
    pub fn header(&self) -> String {
        let kernels = match self.nvshmem {
            Some(v) => format!("kernels and host on the {} engine, NVSHMEM {v} device code", self.engine),
            None => format!("kernels and host on the {} engine", self.engine),
        };
        let shape = if self.one_pe {
            "one PE: put/get from PE 0 to itself, ping-pong between two blocks of PE 0, barrier and init on 1 PE"
        } else {
            "PEs as threads of this process"
        };
        let mut s = format!("gpushmem-perf: {kernels}; {shape}\ngpushmem-perf: {}\n", self.words());
        if !self.skipped.is_empty() {
            let _ = writeln!(
                s,
                "gpushmem-perf: skipped (no one-PE form: {}): {}",
                crate::opts::NO_ONE_PE_WHY,
                self.skipped.join(", ")
            );
        }
        s
    }
}

/// The first line of the CSV: `# gpushmem-perf engine=… …` (bench/compare.py reads it).
fn meta_line(meta: &Meta) -> String {
    format!("# gpushmem-perf {}\n", meta.words())
}

/// The table printed on stdout.
pub fn table(rows: &[Row]) -> String {
    let w = rows.iter().map(|r| r.test.len()).max().unwrap_or(0).max(22);
    let mut s = format!("{:<w$} {:>12} {:>14} {:>14} {:>7}  unit\n", "test", "size", "gpushmem", "cuMemcpy", "ratio");
    for r in rows {
        let (b, ratio) = match r.baseline {
            Some(b) => (format!("{b:.2}"), format!("{:.3}", r.ours / b)),
            None => ("-".into(), "-".into()),
        };
        let _ = writeln!(s, "{:<w$} {:>12} {:>14.3} {:>14} {:>7}  {}", r.test, r.size, r.ours, b, ratio, r.unit);
    }
    s
}

/// The CSV: the [`Meta`] line, the header `test,size,gpushmem,baseline,unit`, one line a row.
pub fn csv(rows: &[Row], meta: &Meta) -> String {
    let mut s = meta_line(meta);
    s.push_str("test,size,gpushmem,baseline,unit\n");
    for r in rows {
        let b = r.baseline.map_or(String::new(), |b| b.to_string());
        let _ = writeln!(s, "{},{},{},{},{}", r.test, r.size, r.ours, b, r.unit);
    }
    s
}

fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn json_num(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".into()
    }
}

/// `{"tool", "engine", "nvshmem", "one_pe", "max_grid", "reps", "warmup", "skipped": [..], "args",
/// "rows": [{test, size, gpushmem, baseline, unit}], "errors": [{subcommand, error}]}`.
pub fn json(rows: &[Row], meta: &Meta, args: &[String], errors: &[(String, String)]) -> String {
    let mut s = String::from("{\n  \"tool\": \"gpushmem-perf\",\n");
    let _ = writeln!(
        s,
        "  \"engine\": {},\n  \"nvshmem\": {},\n  \"one_pe\": {},\n  \"max_grid\": {},\n  \"reps\": {},\n  \"warmup\": {},",
        json_str(meta.engine),
        meta.nvshmem.map_or("null".into(), json_str),
        meta.one_pe,
        meta.max_grid,
        meta.reps,
        meta.warmup
    );
    let skipped: Vec<String> = meta.skipped.iter().map(|w| json_str(w)).collect();
    let _ = writeln!(s, "  \"skipped\": [{}],", skipped.join(", "));
    s.push_str("  \"args\": [");
    s.push_str(&args.iter().map(|a| json_str(a)).collect::<Vec<_>>().join(", "));
    s.push_str("],\n  \"rows\": [");
    for (i, r) in rows.iter().enumerate() {
        let _ = write!(
            s,
            "{}\n    {{\"test\": {}, \"size\": {}, \"gpushmem\": {}, \"baseline\": {}, \"unit\": {}}}",
            if i > 0 { "," } else { "" },
            json_str(&r.test),
            r.size,
            json_num(r.ours),
            r.baseline.map_or("null".into(), json_num),
            json_str(&r.unit)
        );
    }
    s.push_str("\n  ],\n  \"errors\": [");
    for (i, (sub, e)) in errors.iter().enumerate() {
        let _ = write!(
            s,
            "{}\n    {{\"subcommand\": {}, \"error\": {}}}",
            if i > 0 { "," } else { "" },
            json_str(sub),
            json_str(e)
        );
    }
    s.push_str("\n  ]\n}\n");
    s
}

/// Rows of a CSV that [`csv`] wrote (its `#` lines are skipped).
pub fn parse_csv(text: &str) -> Result<Vec<Row>, String> {
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.starts_with('#'));
    match lines.next() {
        Some((_, h)) if h.trim() == "test,size,gpushmem,baseline,unit" => {}
        _ => return Err("expected the header test,size,gpushmem,baseline,unit".into()),
    }
    let mut rows = Vec::new();
    for (n, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.splitn(5, ',').collect();
        let bad = |what: &str| format!("line {}: {what}: {line:?}", n + 1);
        if f.len() != 5 {
            return Err(bad("expected 5 fields"));
        }
        let num = |s: &str| s.trim().parse::<f64>().map_err(|_| bad("not a number"));
        let baseline = if f[3].trim().is_empty() { None } else { Some(num(f[3])?) };
        let size = f[1].trim().parse::<u64>().map_err(|_| bad("size is not an integer"))?;
        rows.push(Row::new(f[0].trim(), size, num(f[2])?, baseline, f[4].trim()));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_round_trip_and_json() {
        let rows = vec![
            Row::new("put_bw_block", 1 << 20, 812.5, Some(1000.25), "GB/s"),
            Row::new("p_latency", 8, 1.25, None, "us"),
        ];
        let meta = Meta {
            engine: "nvshmem",
            nvshmem: Some("3.4.5"),
            one_pe: true,
            max_grid: 1056,
            reps: 10,
            warmup: 3,
            skipped: vec!["latency", "atomic"],
        };
        let text = csv(&rows, &meta);
        assert!(text
            .starts_with("# gpushmem-perf engine=nvshmem nvshmem=3.4.5 one_pe=yes max_grid=1056 reps=10 warmup=3\n"));
        assert_eq!(parse_csv(&text).unwrap(), rows);
        assert!(meta.header().contains("NVSHMEM 3.4.5") && meta.header().contains("skipped"));
        let j = json(&rows, &meta, &["a\"b".into()], &[("atomic".into(), "x\ny".into())]);
        assert!(j.contains("\"engine\": \"nvshmem\"") && j.contains("\"one_pe\": true"));
        assert!(j.contains("\"skipped\": [\"latency\", \"atomic\"]"));
        assert!(j.contains("\"baseline\": null"));
        assert!(j.contains("\"a\\\"b\""));
        assert!(j.contains("\"x\\u000ay\""));
        assert!(table(&rows).contains("0.812"));
    }
}
