//! The PNG plot: bandwidth (GB/s, linear y) against size (log2 x) of every
//! `*_bw_*` row, solid with markers, and its cuMemcpy baseline from the same
//! run, dashed in the same colour; axes, grid, labels and legend.
//!
//! Drawn with plotters into an RGB buffer, its text in Noto Sans embedded in
//! the binary (plotters' `ab_glyph` renderer: no fontconfig or freetype on the
//! machine), and encoded with `png` (not plotters' file output, which picks the
//! format from the file name's extension).

use crate::common::Row;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use std::error::Error;

const W: u32 = 1100;
const H: u32 = 700;
/// The family the embedded font is registered as.
const FONT: &str = "sans-serif";
const GREY: RGBColor = RGBColor(110, 110, 110);
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// `8`, `512`, `4K`, `64M`, `1G` for a power of two.
fn size_label(b: u64) -> String {
    for (shift, u) in [(30, "G"), (20, "M"), (10, "K")] {
        if b >= 1 << shift {
            return format!("{}{u}", b >> shift);
        }
    }
    b.to_string()
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

/// The plot of `rows` as PNG bytes; `Ok(None)` when there is no `*_bw_*` row.
pub fn png(rows: &[Row], title: &str) -> Result<Option<Vec<u8>>, String> {
    let all = series(rows);
    if all.is_empty() {
        return Ok(None);
    }
    let mut rgb = vec![0u8; (W * H * 3) as usize];
    draw(&mut rgb, &all, title).map_err(|e| format!("drawing the plot: {e}"))?;
    encode(&rgb).map(Some).map_err(|e| format!("encoding the PNG: {e}"))
}

/// Draws the plot of `all` into `rgb` (`W`×`H`, 3 bytes a pixel).
fn draw(rgb: &mut [u8], all: &[Series], title: &str) -> Result<(), Box<dyn Error>> {
    plotters::style::register_font(FONT, FontStyle::Normal, ttf_noto_sans::REGULAR)
        .map_err(|_| "the embedded font does not load")?;
    let log2 = |s: u64| (s as f64).log2();
    let sizes = all.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let (lo, hi) = sizes.fold((u64::MAX, 0), |(lo, hi), s| (lo.min(s), hi.max(s)));
    // x: log2 of the size, from a power of two to a power of two (at least one apart).
    let (xl, xh) = (log2(lo).floor(), log2(hi).ceil().max(log2(lo).floor() + 1.0));
    let ymax_data =
        all.iter().flat_map(|s| s.points.iter().flat_map(|p| [p.1, p.2.unwrap_or(0.0)])).fold(0.0, f64::max);
    let ymax = ymax_data.max(1e-6) * 1.05;
    // Decimals enough to tell about 8 ticks apart.
    let decimals = (-(ymax / 8.0).log10()).ceil().max(0.0) as usize;

    let root = BitMapBackend::with_buffer(rgb, (W, H)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FONT, 28))
        .margin(20)
        .x_label_area_size(60)
        .y_label_area_size(70)
        .build_cartesian_2d(xl..xh, 0.0..ymax)?;
    // As many size labels as fit (plotters spaces them 1, 2, 5, ... powers apart).
    let fit = (W as f64 - 140.0) / 48.0;
    chart
        .configure_mesh()
        .x_labels(((xh - xl) as usize + 1).min(fit as usize))
        .x_label_formatter(&|e| if e.fract() == 0.0 { size_label(1u64 << *e as u32) } else { String::new() })
        .y_labels(10)
        .y_label_formatter(&|v| format!("{v:.decimals$}"))
        .x_desc("message size (bytes, log2)")
        .y_desc("GB/s")
        .label_style((FONT, 16))
        .axis_desc_style((FONT, 18))
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(225, 225, 225))
        .draw()?;
    // Baselines first (dashed), then ours on top, named in the legend.
    for (i, s) in all.iter().enumerate() {
        let base = s.points.iter().filter_map(|&(x, _, b)| b.map(|b| (log2(x), b)));
        chart.draw_series(DashedLineSeries::new(base, 8, 8, PALETTE[i % PALETTE.len()].stroke_width(2)))?;
    }
    for (i, s) in all.iter().enumerate() {
        let col = PALETTE[i % PALETTE.len()];
        let ours = s.points.iter().map(|&(x, v, _)| (log2(x), v));
        chart
            .draw_series(LineSeries::new(ours, col.filled().stroke_width(3)).point_size(4))?
            .label(&s.test)
            .legend(move |(x, y)| PathElement::new([(x - 12, y), (x + 12, y)], col.stroke_width(3)));
    }
    if all.iter().any(|s| s.points.iter().any(|p| p.2.is_some())) {
        // A legend entry alone, for the dashed lines.
        chart
            .draw_series(std::iter::empty::<PathElement<(f64, f64)>>())?
            .label("cuMemcpyDtoD, same run")
            .legend(|(x, y)| DashedPathElement::new([(x - 12, y), (x + 12, y)], 6, 4, GREY.stroke_width(2)));
    }
    // Top left: the curves rise to the right.
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .margin(15)
        .label_font((FONT, 16))
        .background_style(WHITE)
        .border_style(GREY)
        .draw()?;
    root.present()?;
    Ok(())
}

/// An 8-bit RGB PNG of `rgb` (`W`×`H`, rows top first).
fn encode(rgb: &[u8]) -> Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, W, H);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc.write_header()?;
    writer.write_image_data(rgb)?;
    writer.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn png_of_bandwidth_rows() {
        assert!(png(&[Row::new("p_latency", 8, 1.0, None, "us")], "t").unwrap().is_none());
        let rows: Vec<Row> =
            (3..31).map(|e| Row::new("put_bw_block", 1 << e, e as f64 * 10.0, Some(300.0), "GB/s")).collect();
        let p = png(&rows, "t").unwrap().unwrap();
        // It decodes back to a W×H RGB image that is not blank.
        let mut dec = png::Decoder::new(std::io::Cursor::new(p)).read_info().unwrap();
        let mut px = vec![0; dec.output_buffer_size().unwrap()];
        let info = dec.next_frame(&mut px).unwrap();
        assert_eq!((info.width, info.height, info.color_type), (W, H, png::ColorType::Rgb));
        assert!(px.iter().any(|&b| b != 255));
        assert_eq!(size_label(1 << 30), "1G");
    }
}
