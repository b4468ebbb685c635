//! Plots, each written as SVG and PNG from the same drawing code.
//!
//! Every figure is a [`Figure`]: data prepared from [`crate::timeline::Timeline`]s
//! and summaries, drawn onto any plotters backend. [`write()`] draws it twice, into
//! `<stem>.svg` and `<stem>.png`. Conventions every figure follows:
//!
//! - one colour per backend everywhere ([`palette::colour`]);
//! - a title, axis labels with units, and the legend in a panel of its own to the right of the
//!   data, so it never covers a line;
//! - text from the embedded DejaVu Sans ([`font::register`]), so the PNGs render on machines
//!   without system fonts;
//! - fault windows shaded grey, kills as dashed vertical marks (Jepsen's nemesis shading).
//!
//! The output is deterministic: the same data draws byte-identical files.

pub mod font;
pub mod jobs;
pub mod latency;
pub mod multiplier;
pub mod palette;
pub mod processes;
pub mod rate;
pub mod seeds;

use crate::timeline::FaultWindow;
use crate::trace::FaultKind;
use plotters::chart::MeshStyle;
use plotters::coord::CoordTranslate;
use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;
use std::path::Path;

/// The font family every figure uses (registered from the embedded TTF).
pub const FAMILY: &str = "sans-serif";
/// Title text size, pixels.
pub const TITLE: u32 = 22;
/// Axis description size.
pub const AXIS: u32 = 16;
/// Tick label and legend size.
pub const LABEL: u32 = 14;
/// Width of the legend panel, pixels.
pub const LEGEND_W: u32 = 260;

/// A figure that can be drawn onto any backend.
pub trait Figure {
    /// Pixel size.
    fn size(&self) -> (u32, u32);
    /// Draw onto `root` (already filled white).
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB>;
}

/// Result of drawing on backend `DB`.
pub type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// A plot could not be written.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {message}")]
pub struct PlotError {
    /// The file being written.
    pub file: String,
    /// What went wrong.
    pub message: String,
}

/// Draw `fig` into `dir/<stem>.svg` and `dir/<stem>.png`.
pub fn write<F: Figure>(fig: &F, dir: &Path, stem: &str) -> Result<(), PlotError> {
    font::register();
    let size = fig.size();
    let svg_path = dir.join(format!("{stem}.svg"));
    let err = |p: &Path, e: &dyn std::fmt::Display| PlotError {
        file: p.display().to_string(),
        message: e.to_string(),
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&svg_path, &e))?;
        fig.draw(&root).map_err(|e| err(&svg_path, &e))?;
        root.present().map_err(|e| err(&svg_path, &e))?;
    }
    std::fs::write(&svg_path, svg).map_err(|e| err(&svg_path, &e))?;
    let png_path = dir.join(format!("{stem}.png"));
    {
        let root = BitMapBackend::new(&png_path, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&png_path, &e))?;
        fig.draw(&root).map_err(|e| err(&png_path, &e))?;
        root.present().map_err(|e| err(&png_path, &e))?;
    }
    Ok(())
}

/// Text style of `size` pixels in `colour`.
pub fn text(size: u32, colour: RGBColor) -> TextStyle<'static> {
    (FAMILY, size).into_font().color(&colour)
}

/// A figure's main chart: `title` above it, the figures' margins, and room for the axis labels.
pub fn main_chart<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, title: String) -> ChartBuilder<'_, 'static, DB> {
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(title, text(TITLE, BLACK))
        .margin(12)
        .margin_right(20)
        .x_label_area_size(48)
        .y_label_area_size(72);
    builder
}

/// The grid every chart draws: tick labels of `label` pixels, axis descriptions of `axis`
/// pixels, at most one light line between bold ones, both pale grey. The caller adds its axis
/// descriptions and label formatters, then draws.
pub fn mesh<'a, 'b, X, Y, DB>(
    chart: &'b mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    label: u32,
    axis: u32,
) -> MeshStyle<'a, 'b, X, Y, DB>
where
    DB: DrawingBackend,
    X: Ranged + ValueFormatter<X::ValueType>,
    Y: Ranged + ValueFormatter<Y::ValueType>,
{
    let mut mesh = chart.configure_mesh();
    mesh.label_style(text(label, BLACK))
        .axis_desc_style(text(axis, BLACK))
        .max_light_lines(1)
        .light_line_style(RGBColor(243, 243, 243))
        .bold_line_style(RGBColor(215, 215, 215));
    mesh
}

/// How a legend entry is drawn.
#[derive(Clone, Debug)]
pub enum Swatch {
    /// A solid line.
    Line(RGBColor),
    /// A dashed line.
    Dashed(RGBColor),
    /// A filled box (`alpha` opacity).
    Band(RGBColor, f64),
    /// A box of stripes, left to right (a sequence of shades).
    Ramp(Vec<RGBColor>),
    /// A point marker.
    Mark(Mark, RGBColor),
    /// Nothing: the entry is a note.
    Blank,
}

/// A point marker's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// A filled circle with a dark rim.
    Dot,
    /// A diagonal cross.
    Cross,
    /// A filled diamond.
    Diamond,
    /// A filled triangle pointing down.
    Triangle,
}

/// Draw `mark` centred on the absolute pixel `at` of `area`.
pub fn draw_mark<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    at: (i32, i32),
    mark: Mark,
    c: RGBColor,
) -> DrawResult<DB> {
    let b = area.get_base_pixel();
    let (x, y) = (at.0 - b.0, at.1 - b.1);
    let rim = RGBColor(40, 40, 40);
    match mark {
        Mark::Dot => {
            area.draw(&Circle::new((x, y), 5, c.filled()))?;
            area.draw(&Circle::new((x, y), 5, rim.stroke_width(1)))
        }
        Mark::Cross => {
            area.draw(&PathElement::new(
                vec![(x - 6, y - 6), (x + 6, y + 6)],
                c.stroke_width(3),
            ))?;
            area.draw(&PathElement::new(
                vec![(x - 6, y + 6), (x + 6, y - 6)],
                c.stroke_width(3),
            ))
        }
        Mark::Diamond => {
            let pts = vec![(x, y - 6), (x + 6, y), (x, y + 6), (x - 6, y)];
            area.draw(&Polygon::new(pts.clone(), c.filled()))?;
            let mut rim_pts = pts;
            rim_pts.push((x, y - 6));
            area.draw(&PathElement::new(rim_pts, rim.stroke_width(1)))
        }
        Mark::Triangle => area.draw(&Polygon::new(
            vec![(x - 5, y - 5), (x + 5, y - 5), (x, y + 4)],
            c.filled(),
        )),
    }
}

/// One legend entry.
#[derive(Clone, Debug)]
pub struct LegendItem {
    /// What the entry looks like.
    pub swatch: Swatch,
    /// Its text.
    pub label: String,
}

impl LegendItem {
    /// Shorthand.
    pub fn new(swatch: Swatch, label: impl Into<String>) -> Self {
        LegendItem {
            swatch,
            label: label.into(),
        }
    }
}

/// Split `root` into the plot area and the legend panel on its right.
pub fn split_legend<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
) -> (DrawingArea<DB, Shift>, DrawingArea<DB, Shift>) {
    let w = root.dim_in_pixel().0;
    root.split_horizontally(w.saturating_sub(LEGEND_W))
}

/// Draw a legend into its panel, top-aligned below `top` pixels; long labels wrap.
pub fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    top: i32,
    items: &[LegendItem],
) -> DrawResult<DB> {
    let x0 = 8;
    let mut y = top;
    let style = text(LABEL, BLACK);
    for it in items {
        let mid = y + 8;
        match &it.swatch {
            Swatch::Line(c) => {
                area.draw(&PathElement::new(vec![(x0, mid), (x0 + 26, mid)], c.stroke_width(3)))?;
            }
            Swatch::Dashed(c) => {
                for k in 0..3 {
                    let a = x0 + k * 10;
                    area.draw(&PathElement::new(vec![(a, mid), (a + 6, mid)], c.stroke_width(2)))?;
                }
            }
            Swatch::Band(c, alpha) => {
                area.draw(&Rectangle::new(
                    [(x0, y + 1), (x0 + 26, y + 15)],
                    c.mix(*alpha).filled(),
                ))?;
            }
            Swatch::Ramp(cs) => {
                let n = cs.len().max(1) as i32;
                for (k, c) in cs.iter().enumerate() {
                    let (a, b) = (x0 + 26 * k as i32 / n, x0 + 26 * (k as i32 + 1) / n);
                    area.draw(&Rectangle::new([(a, y + 1), (b, y + 15)], c.filled()))?;
                }
            }
            Swatch::Mark(m, c) => {
                let base = area.get_base_pixel();
                draw_mark(area, (base.0 + x0 + 13, base.1 + mid), *m, *c)?;
            }
            Swatch::Blank => {}
        }
        let lines = wrap(&it.label, 27);
        for (i, line) in lines.iter().enumerate() {
            area.draw(&Text::new(line.clone(), (x0 + 34, y + i as i32 * 17), style.clone()))?;
        }
        y += 17 * (lines.len() as i32 - 1) + 24;
    }
    Ok(())
}

/// The height [`draw_legend`] takes for `items` from `top`, pixels.
pub fn legend_height(top: i32, items: &[LegendItem]) -> u32 {
    let h: i32 = items
        .iter()
        .map(|it| 17 * (wrap(&it.label, 27).len() as i32 - 1) + 24)
        .sum();
    (top + h).max(0) as u32
}

/// Greedy word wrap at `width` characters.
pub fn wrap(s: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for w in s.split_whitespace() {
        if !cur.is_empty() && cur.chars().count() + 1 + w.chars().count() > width {
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(w);
    }
    if !cur.is_empty() || out.is_empty() {
        out.push(cur);
    }
    out
}

/// Stroke widths for `n` lines drawn in order: earlier lines wider, so a line drawn over an
/// identical one leaves its colour showing at the edges.
pub fn stacked_widths(n: usize) -> Vec<u32> {
    let step = if n <= 4 { 2 } else { 1 };
    (0..n).map(|i| 2 + step * (n - 1 - i) as u32).collect()
}

/// Draw one line per backend in its colour, in order, with [`stacked_widths`]: identical lines
/// would hide each other, so earlier backends are drawn wider underneath.
pub fn draw_stacked<DB, CT>(chart: &mut ChartContext<'_, DB, CT>, lines: &[(&str, &[(f64, f64)])]) -> DrawResult<DB>
where
    DB: DrawingBackend,
    CT: CoordTranslate<From = (f64, f64)>,
{
    for (&(backend, points), w) in lines.iter().zip(stacked_widths(lines.len())) {
        chart.draw_series(LineSeries::new(
            points.iter().copied(),
            palette::colour(backend).stroke_width(w),
        ))?;
    }
    Ok(())
}

/// For each item, the index of the first earlier item equal to it.
pub fn same_as<T: PartialEq>(items: &[T]) -> Vec<Option<usize>> {
    (0..items.len())
        .map(|i| (0..i).find(|&j| items[j] == items[i]))
        .collect()
}

/// Write `label` just above and left of the absolute pixel `at` (e.g. a line's right end) on
/// a white box, so it stays legible over data.
pub fn boxed_label<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, at: (i32, i32), label: &str) -> DrawResult<DB> {
    let base = area.get_base_pixel();
    let style = text(LABEL, BLACK);
    let (w, h) = area.estimate_text_size(label, &style)?;
    let (x, y) = (at.0 - base.0 - w as i32 - 6, at.1 - base.1 - h as i32 - 6);
    area.draw(&Rectangle::new(
        [(x - 3, y - 2), (x + w as i32 + 3, y + h as i32 + 2)],
        WHITE.mix(0.9).filled(),
    ))?;
    area.draw(&Text::new(label.to_string(), (x, y), style))
}

/// Grey used for fault windows.
pub const FAULT_GREY: RGBColor = RGBColor(120, 120, 120);
/// Opacity of fault bands.
pub const FAULT_ALPHA: f64 = 0.18;

/// Fault windows as drawable bands `(kind, start s, end s)`, deduplicated by fault id and
/// start (every backend's run sees the same schedule); `clock` faults, which last the whole
/// run, are left out (they are named in the report text). Zero-length windows are kept:
/// they draw as a vertical mark.
pub fn fault_bands<'a>(windows: impl IntoIterator<Item = &'a FaultWindow>, end_s: f64) -> Vec<(FaultKind, f64, f64)> {
    let mut v: Vec<(u32, FaultKind, f64, f64)> = Vec::new();
    for w in windows {
        if w.kind == FaultKind::Clock {
            continue;
        }
        let s = w.start as f64 / 1e9;
        let e = w.end.map_or(end_s, |e| e as f64 / 1e9);
        if !v.iter().any(|x| x.0 == w.id && x.2 == s) {
            v.push((w.id, w.kind, s, e));
        }
    }
    v.sort_by(|a, b| a.2.total_cmp(&b.2).then(a.0.cmp(&b.0)));
    v.into_iter().map(|(_, k, s, e)| (k, s, e)).collect()
}

/// Draw fault bands and kill marks onto a chart whose y range is `y0..y1`. Kills are
/// `(time s, backend colour)`.
pub fn draw_faults<DB: DrawingBackend>(
    chart: &mut ChartContext<
        '_,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    bands: &[(FaultKind, f64, f64)],
    kills: &[(f64, RGBColor)],
    y0: f64,
    y1: f64,
) -> DrawResult<DB> {
    // a label starting within 12% of the x range of an earlier one goes one line lower, so
    // overlapping windows' names do not overprint
    let xr = chart.x_range();
    let near = (xr.end - xr.start).abs() * 0.12;
    // a window shorter than three pixels (a 2 s hiccup in an hour) is drawn three pixels wide
    // from its start, and darker, so that it shows where it is and not only its label
    let px = chart.plotting_area().dim_in_pixel().0.max(1) as f64;
    let narrow = 3.0 * (xr.end - xr.start).abs() / px;
    let mut starts: Vec<f64> = Vec::new();
    for (kind, s, e) in bands {
        let row = starts.iter().filter(|p| (*s - **p).abs() < near).count();
        starts.push(*s);
        let label_y = y1 - (y1 - y0) * 0.05 * row as f64;
        if e > s {
            let (e, alpha) = if e - s < narrow {
                (s + narrow, FAULT_ALPHA * 3.0)
            } else {
                (*e, FAULT_ALPHA)
            };
            chart.draw_series(std::iter::once(Rectangle::new(
                [(*s, y0), (e, y1)],
                FAULT_GREY.mix(alpha).filled(),
            )))?;
        } else {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(*s, y0), (*s, y1)],
                FAULT_GREY.stroke_width(2),
            )))?;
        }
        chart.draw_series(std::iter::once(Text::new(
            kind.name().replace('_', " "),
            (*s, label_y),
            text(LABEL - 2, RGBColor(70, 70, 70)),
        )))?;
    }
    for (t, c) in kills {
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(*t, y0), (*t, y1)],
            c.mix(0.8).stroke_width(1),
        )))?;
    }
    Ok(())
}

/// Reduce a dense line to at most about `4 * groups` points that draw the same picture:
/// per group of consecutive points the first, the minimum, the maximum and the last, in time
/// order; then runs of equal values collapse to their ends.
pub fn decimate(points: &[(f64, f64)], groups: usize) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(points.len().min(4 * groups + 2));
    if points.len() <= 4 * groups {
        out.extend_from_slice(points);
    } else {
        let per = points.len().div_ceil(groups);
        for g in points.chunks(per) {
            let (mut lo, mut hi) = (0, 0);
            for (i, p) in g.iter().enumerate() {
                if p.1 < g[lo].1 {
                    lo = i;
                }
                if p.1 > g[hi].1 {
                    hi = i;
                }
            }
            let mut idx = [0, lo, hi, g.len() - 1];
            idx.sort_unstable();
            let mut prev = usize::MAX;
            for i in idx {
                if i != prev {
                    out.push(g[i]);
                    prev = i;
                }
            }
        }
    }
    collapse_flat(out)
}

/// Drop interior points of runs with equal y (the line looks the same).
pub fn collapse_flat(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(points.len());
    for p in points {
        let n = out.len();
        if n >= 2 && out[n - 1].1 == p.1 && out[n - 2].1 == p.1 {
            out[n - 1] = p;
        } else {
            out.push(p);
        }
    }
    out
}

/// A "nice" upper bound for an axis: 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten,
/// at least `v`.
pub fn nice_ceil(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    for m in [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0] {
        if m * p >= v * (1.0 - 1e-12) {
            return m * p;
        }
    }
    10.0 * p
}

/// Format a number compactly for labels: at most `digits` decimals, trailing zeros dropped.
pub fn num(v: f64, digits: usize) -> String {
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod figures_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimate_keeps_extremes() {
        let pts: Vec<(f64, f64)> = (0..1000)
            .map(|i| (i as f64, if i == 500 { 9.0 } else { 1.0 }))
            .collect();
        let d = decimate(&pts, 10);
        assert!(d.len() < 40, "{}", d.len());
        assert!(d.contains(&(500.0, 9.0)));
        assert_eq!(d.first(), Some(&(0.0, 1.0)));
        assert_eq!(d.last(), Some(&(999.0, 1.0)));
    }

    #[test]
    fn helpers() {
        assert_eq!(nice_ceil(216.7), 250.0);
        assert_eq!(nice_ceil(50.0), 50.0);
        assert_eq!(nice_ceil(0.07), 0.08);
        assert_eq!(nice_ceil(10_800.0), 12_000.0);
        assert_eq!(num(50.0, 2), "50");
        assert_eq!(num(216.666, 1), "216.7");
        assert_eq!(wrap("a bb ccc dddd", 6), vec!["a bb", "ccc", "dddd"]);
    }
}
