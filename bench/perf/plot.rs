//! The PNG plot: bandwidth (GB/s, linear y) against size (log2 x) of every
//! `*_bw_*` row, solid with markers, and its cuMemcpy baseline from the same
//! run, dashed in the same colour. Axes, tick marks, grid, labels and legend.
//!
//! Drawn by hand into an RGB buffer (with the 5×7 font of `font.rs`) and
//! encoded as PNG with `miniz_oxide` for the zlib stream: a plotting crate
//! would need a TTF font or system fonts (fontconfig), and a far heavier build.

use crate::common::Row;
use crate::font;

const W: usize = 1100;
const H: usize = 700;
/// Plot area: left, top, right, bottom edges in pixels.
const PL: usize = 90;
const PT: usize = 60;
const PR: usize = W - 30;
const PB: usize = H - 80;

type Rgb = [u8; 3];
const WHITE: Rgb = [255, 255, 255];
const BLACK: Rgb = [0, 0, 0];
const GRID: Rgb = [225, 225, 225];
const GREY: Rgb = [110, 110, 110];
const PALETTE: [Rgb; 8] = [
    [31, 119, 180],
    [214, 39, 40],
    [44, 160, 44],
    [255, 127, 14],
    [148, 103, 189],
    [140, 86, 75],
    [227, 119, 194],
    [23, 190, 207],
];

struct Canvas {
    px: Vec<u8>,
}

impl Canvas {
    fn new() -> Canvas {
        Canvas { px: WHITE.repeat(W * H) }
    }

    fn set(&mut self, x: i64, y: i64, c: Rgb) {
        if (0..W as i64).contains(&x) && (0..H as i64).contains(&y) {
            let i = (y as usize * W + x as usize) * 3;
            self.px[i..i + 3].copy_from_slice(&c);
        }
    }

    fn rect(&mut self, x: i64, y: i64, w: i64, h: i64, c: Rgb) {
        for yy in y..y + h {
            for xx in x..x + w {
                self.set(xx, yy, c);
            }
        }
    }

    /// A line `thick` pixels wide; `dash` > 0 draws `dash` pixels on, `dash` off.
    fn line(&mut self, (x0, y0): (i64, i64), (x1, y1): (i64, i64), c: Rgb, thick: i64, dash: i64) {
        let (dx, dy) = ((x1 - x0).abs(), -(y1 - y0).abs());
        let (sx, sy) = (if x0 < x1 { 1 } else { -1 }, if y0 < y1 { 1 } else { -1 });
        let (mut x, mut y, mut err, mut n) = (x0, y0, dx + dy, 0i64);
        loop {
            if dash == 0 || (n / dash) % 2 == 0 {
                self.rect(x - thick / 2, y - thick / 2, thick, thick, c);
            }
            n += 1;
            if x == x1 && y == y1 {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// Text with its top-left corner at (x, y), each font pixel `scale`×`scale`.
    fn text(&mut self, x: i64, y: i64, s: &str, c: Rgb, scale: i64) {
        for (k, ch) in s.chars().enumerate() {
            let g = font::glyph(ch);
            let gx = x + k as i64 * text_advance(scale);
            for (row, bits) in g.iter().enumerate() {
                for col in 0..font::W {
                    if bits >> (font::W - 1 - col) & 1 == 1 {
                        self.rect(gx + col as i64 * scale, y + row as i64 * scale, scale, scale, c);
                    }
                }
            }
        }
    }
}

fn text_advance(scale: i64) -> i64 {
    (font::W as i64 + 1) * scale
}

fn text_width(s: &str, scale: i64) -> i64 {
    s.chars().count() as i64 * text_advance(scale) - scale
}

/// `8`, `512`, `4K`, `64M`, `1G` for a power of two.
fn size_label(b: u64) -> String {
    for (shift, u) in [(30, "G"), (20, "M"), (10, "K")] {
        if b >= 1 << shift {
            return format!("{}{u}", b >> shift);
        }
    }
    b.to_string()
}

/// A round tick step (1, 2 or 5 × 10^k) giving about `n` intervals up to `max`.
fn nice_step(max: f64, n: f64) -> f64 {
    let raw = (max / n).max(1e-9);
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * p).find(|&s| s >= raw).unwrap_or(10.0 * p)
}

/// One plotted test: its name and (size, ours, baseline) points.
struct Series {
    test: String,
    points: Vec<(u64, f64, Option<f64>)>,
}

fn series(rows: &[Row]) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for r in rows.iter().filter(|r| r.test.contains("_bw_") && r.size > 0 && r.ours.is_finite()) {
        let p = (r.size, r.ours, r.baseline.filter(|b| b.is_finite()));
        match out.iter_mut().find(|s| s.test == r.test) {
            Some(s) => s.points.push(p),
            None => out.push(Series { test: r.test.clone(), points: vec![p] }),
        }
    }
    for s in &mut out {
        s.points.sort_by_key(|p| p.0);
    }
    out
}

/// The plot of `rows` as PNG bytes; `None` when there is no `*_bw_*` row.
pub fn png(rows: &[Row], title: &str) -> Option<Vec<u8>> {
    let all = series(rows);
    if all.is_empty() {
        return None;
    }
    let sizes = all.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let (lo, hi) = sizes.fold((u64::MAX, 0), |(lo, hi), s| (lo.min(s), hi.max(s)));
    let (xl, xh) = ((lo as f64).log2().floor(), (hi as f64).log2().ceil().max((lo as f64).log2().floor() + 1.0));
    let ymax_data =
        all.iter().flat_map(|s| s.points.iter().flat_map(|p| [p.1, p.2.unwrap_or(0.0)])).fold(0.0, f64::max);
    let step = nice_step(ymax_data.max(1e-6) * 1.05, 8.0);
    let ymax = (ymax_data.max(1e-6) * 1.05 / step).ceil() * step;
    let px = |size: u64| PL as f64 + ((size as f64).log2() - xl) / (xh - xl) * (PR - PL) as f64;
    let py = |v: f64| PB as f64 - v / ymax * (PB - PT) as f64;
    let pt = |size: u64, v: f64| (px(size).round() as i64, py(v).round() as i64);

    let mut c = Canvas::new();
    // Grid and y ticks.
    let mut k = 0;
    loop {
        let v = k as f64 * step;
        if v > ymax + step * 1e-6 {
            break;
        }
        let y = py(v).round() as i64;
        if k > 0 {
            c.line((PL as i64 + 1, y), (PR as i64, y), GRID, 1, 0);
        }
        c.line((PL as i64 - 6, y), (PL as i64, y), BLACK, 1, 0);
        let label = if step >= 1.0 { format!("{v:.0}") } else { format!("{v}") };
        c.text(PL as i64 - 10 - text_width(&label, 2), y - 7, &label, BLACK, 2);
        k += 1;
    }
    // X ticks at every power of two, labels as often as they fit.
    let per_pow = (PR - PL) as f64 / (xh - xl);
    let widest = (xl as u32..=xh as u32).map(|e| text_width(&size_label(1 << e), 2)).max().unwrap_or(0);
    let label_every = ((widest as f64 + 14.0) / per_pow).ceil().max(1.0) as u32;
    for e in xl as u32..=xh as u32 {
        let x = px(1 << e).round() as i64;
        let since = (e - xl as u32) % label_every;
        // Every `label_every`-th power, and the last one if it clears the label before it.
        let labelled = since == 0 || (e == xh as u32 && since as f64 * per_pow >= widest as f64 + 14.0);
        if labelled {
            c.line((x, PT as i64), (x, PB as i64 - 1), GRID, 1, 0);
        }
        c.line((x, PB as i64), (x, PB as i64 + if labelled { 7 } else { 4 }), BLACK, 1, 0);
        if labelled {
            let l = size_label(1 << e);
            c.text(x - text_width(&l, 2) / 2, PB as i64 + 12, &l, BLACK, 2);
        }
    }
    // Axes, titles.
    c.line((PL as i64, PT as i64), (PL as i64, PB as i64), BLACK, 2, 0);
    c.line((PL as i64, PB as i64), (PR as i64, PB as i64), BLACK, 2, 0);
    c.text(PL as i64 - 60, PT as i64 - 26, "GB/s", BLACK, 2);
    let xlabel = "message size (bytes, log2)";
    c.text((PL + PR) as i64 / 2 - text_width(xlabel, 2) / 2, PB as i64 + 42, xlabel, BLACK, 2);
    c.text((PL + PR) as i64 / 2 - text_width(title, 3) / 2, 14, title, BLACK, 3);
    // Data: baselines first (dashed), then ours on top.
    for (i, s) in all.iter().enumerate() {
        let col = PALETTE[i % PALETTE.len()];
        let base: Vec<_> = s.points.iter().filter_map(|&(x, _, b)| b.map(|b| pt(x, b))).collect();
        for w in base.windows(2) {
            c.line(w[0], w[1], col, 2, 8);
        }
    }
    for (i, s) in all.iter().enumerate() {
        let col = PALETTE[i % PALETTE.len()];
        let ours: Vec<_> = s.points.iter().map(|&(x, v, _)| pt(x, v)).collect();
        for w in ours.windows(2) {
            c.line(w[0], w[1], col, 3, 0);
        }
        for &(x, y) in &ours {
            c.rect(x - 3, y - 3, 7, 7, col);
        }
    }
    // Legend, top left of the plot area (curves rise to the right).
    let (lx, mut ly) = (PL as i64 + 20, PT as i64 + 14);
    let mut entries: Vec<(String, Rgb, i64)> =
        all.iter().enumerate().map(|(i, s)| (s.test.clone(), PALETTE[i % PALETTE.len()], 0)).collect();
    if all.iter().any(|s| s.points.iter().any(|p| p.2.is_some())) {
        entries.push(("cuMemcpyDtoD, same run".into(), GREY, 8));
    }
    let lw = entries.iter().map(|e| text_width(&e.0, 2)).max().unwrap_or(0) + 70;
    let lh = entries.len() as i64 * 24 + 12;
    c.rect(lx - 10, ly - 10, lw, lh, WHITE);
    for (x0, y0, x1, y1) in [(0, 0, lw, 0), (0, lh, lw, lh), (0, 0, 0, lh), (lw, 0, lw, lh)] {
        c.line((lx - 10 + x0, ly - 10 + y0), (lx - 10 + x1, ly - 10 + y1), GREY, 1, 0);
    }
    for (name, col, dash) in &entries {
        c.line((lx, ly + 7), (lx + 44, ly + 7), *col, if *dash > 0 { 2 } else { 3 }, *dash);
        c.text(lx + 56, ly, name, BLACK, 2);
        ly += 24;
    }
    Some(encode(&c.px, W, H))
}

fn crc32(chunks: &[&[u8]]) -> u32 {
    let mut table = [0u32; 256];
    for (n, t) in table.iter_mut().enumerate() {
        let mut c = n as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
        }
        *t = c;
    }
    let mut c = !0u32;
    for d in chunks {
        for &b in *d {
            c = table[((c ^ b as u32) & 0xFF) as usize] ^ (c >> 8);
        }
    }
    !c
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    out.extend_from_slice(&crc32(&[kind, data]).to_be_bytes());
}

/// An 8-bit RGB PNG of `rgb` (`w`×`h`, rows top first), filter 0 on every row.
fn encode(rgb: &[u8], w: usize, h: usize) -> Vec<u8> {
    let mut raw = Vec::with_capacity((w * 3 + 1) * h);
    for row in rgb.chunks(w * 3) {
        raw.push(0);
        raw.extend_from_slice(row);
    }
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&(w as u32).to_be_bytes());
    ihdr.extend_from_slice(&(h as u32).to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]); // 8 bits, RGB, deflate, no filter method, no interlace
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &miniz_oxide::deflate::compress_to_vec_zlib(&raw, 6));
    chunk(&mut out, b"IEND", &[]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_and_png() {
        assert_eq!(crc32(&[b"123456789"]), 0xCBF4_3926);
        assert!(png(&[Row::new("p_latency", 8, 1.0, None, "us")], "t").is_none());
        let rows: Vec<Row> =
            (3..31).map(|e| Row::new("put_bw_block", 1 << e, e as f64 * 10.0, Some(300.0), "GB/s")).collect();
        let p = png(&rows, "t").unwrap();
        assert_eq!(&p[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(&p[12..16], b"IHDR");
        // The zlib stream inflates back to the image.
        let idat_len = u32::from_be_bytes(p[33..37].try_into().unwrap()) as usize;
        let raw = miniz_oxide::inflate::decompress_to_vec_zlib(&p[41..41 + idat_len]).unwrap();
        assert_eq!(raw.len(), (W * 3 + 1) * H);
        assert_eq!(size_label(1 << 30), "1G");
        assert_eq!(nice_step(4000.0, 8.0), 500.0);
    }
}
