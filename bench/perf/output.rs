//! Results out: the stdout table, the CSV (`test,size,gpushmem,baseline,unit`), the JSON,
//! and reading a CSV back (for `gpushmem-perf plot`).

use crate::common::Row;
use std::fmt::Write as _;

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

pub fn csv(rows: &[Row]) -> String {
    let mut s = String::from("test,size,gpushmem,baseline,unit\n");
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

/// `{"tool", "args", "rows": [{test, size, gpushmem, baseline, unit}], "errors": [{subcommand, error}]}`.
pub fn json(rows: &[Row], args: &[String], errors: &[(String, String)]) -> String {
    let mut s = String::from("{\n  \"tool\": \"gpushmem-perf\",\n  \"args\": [");
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

/// Rows of a CSV that [`csv`] wrote.
pub fn parse_csv(text: &str) -> Result<Vec<Row>, String> {
    let mut lines = text.lines().enumerate();
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
        assert_eq!(parse_csv(&csv(&rows)).unwrap(), rows);
        let j = json(&rows, &["a\"b".into()], &[("atomic".into(), "x\ny".into())]);
        assert!(j.contains("\"baseline\": null"));
        assert!(j.contains("\"a\\\"b\""));
        assert!(j.contains("\"x\\u000ay\""));
        assert!(table(&rows).contains("0.812"));
    }
}
