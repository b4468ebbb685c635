//! The spread of the headline figures across seeds: one panel per figure
//! ([`crate::run::compare::HEADLINES`]), one box per backend (quartiles, whiskers to the extremes,
//! median line, every seed as a dot) and beside it, in black, the mean with its 95% Student-t
//! confidence interval. Reference lines: the ceiling, a window ratio of 1, the tolerated burst.

use super::palette::colour;
use super::{
    DrawResult, Figure, LABEL, LegendItem, Swatch, TITLE, draw_legend, mesh, nice_ceil, num, split_legend, text,
};
use crate::run::compare::{HEADLINES, ScenarioRuns, headline};
use crate::stats::{self, MeanCi, Spread};
use plotters::coord::Shift;
use plotters::prelude::*;

/// One box.
#[derive(Clone, Debug)]
pub struct BoxData {
    /// Backend.
    pub backend: String,
    /// Every seed's value.
    pub values: Vec<f64>,
    /// Five numbers.
    pub spread: Option<Spread>,
    /// Mean and CI.
    pub ci: Option<MeanCi>,
}

/// One panel.
#[derive(Clone, Debug)]
pub struct SeedPanel {
    /// Figure label.
    pub label: String,
    /// Unit.
    pub unit: String,
    /// Reference line `(value, label)`.
    pub reference: Option<(f64, String)>,
    /// One box per backend.
    pub boxes: Vec<BoxData>,
}

/// The seeds figure of one scenario.
#[derive(Clone, Debug)]
pub struct SeedsFigure {
    /// Scenario.
    pub scenario: String,
    /// Seeds.
    pub seeds: Vec<u64>,
    /// Panels.
    pub panels: Vec<SeedPanel>,
}

impl SeedsFigure {
    /// Build from every run of a scenario.
    pub fn new(sr: &ScenarioRuns) -> SeedsFigure {
        let sc = &sr.scenario;
        let panels = HEADLINES
            .iter()
            .map(|(key, label, unit)| {
                let boxes = sr
                    .backends
                    .iter()
                    .map(|b| {
                        let values: Vec<f64> = sr.of(b).iter().filter_map(|r| headline(&r.row, key)).collect();
                        BoxData {
                            backend: crate::registry::label(sc, b),
                            spread: stats::spread(&values),
                            ci: stats::mean_ci(&values, stats::LEVEL),
                            values,
                        }
                    })
                    .collect();
                let reference = match *key {
                    "achieved_rate" => Some((sc.pacer.rate, format!("ceiling {}/s", num(sc.pacer.rate, 3)))),
                    "max_window_overshoot" => Some((1.0, "bound".to_string())),
                    "burst_needed" => Some((sc.checks.burst as f64, format!("tolerated {}", sc.checks.burst))),
                    _ => None,
                };
                SeedPanel {
                    label: label.to_string(),
                    unit: unit.to_string(),
                    reference,
                    boxes,
                }
            })
            .collect();
        SeedsFigure {
            scenario: sc.name.clone(),
            seeds: sr.seeds.clone(),
            panels,
        }
    }
}

fn draw_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &SeedPanel, cols: usize) -> DrawResult<DB> {
    let n = p.boxes.len().max(1);
    let vals = p.boxes.iter().flat_map(|b| b.values.iter().copied());
    let mut hi = vals.clone().fold(0.0, f64::max);
    let lo = vals.fold(0.0, f64::min);
    let his = p.boxes.iter().filter_map(|b| b.ci.as_ref().and_then(|c| c.hi));
    hi = his.fold(hi, f64::max);
    if let Some((r, _)) = &p.reference {
        hi = hi.max(*r);
    }
    let hi = nice_ceil(hi.max(0.01) * 1.1);
    let digits = (2 - hi.log10().floor() as i32).clamp(0, 6) as usize;
    // fewer than four backends keep the width four would have, so boxes stay box-shaped
    let w = area.dim_in_pixel().0;
    let keep = 80 + (w.saturating_sub(80)) * ((n * cols).min(4) as u32) / 4;
    let (area, _) = area.split_horizontally(keep);
    let inner = area.titled(&format!("{} ({})", p.label, p.unit), text(LABEL + 2, BLACK))?;
    // One backend per unit of x: backend `j` at x = j. The axis draws no x labels; each
    // backend's name is written under its position instead.
    let mut chart = ChartBuilder::on(&inner)
        .margin(6)
        .margin_right(14)
        .x_label_area_size(34)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5..(n as f64 - 0.5), lo..hi)?;
    mesh(&mut chart, LABEL - 1, LABEL)
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(p.unit.clone())
        .y_label_formatter(&|v| num(*v, digits))
        .draw()?;
    let base = inner.get_base_pixel();
    for (j, b) in p.boxes.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(j as f64, lo));
        inner.draw(&Text::new(
            b.backend.clone(),
            (px - base.0, py - base.1 + 8),
            text(LABEL - 1, BLACK).pos(plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Center,
                plotters::style::text_anchor::VPos::Top,
            )),
        ))?;
    }
    if let Some((r, label)) = &p.reference {
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(-0.5, *r), (n as f64 - 0.5, *r)],
            RGBColor(90, 90, 90).stroke_width(1),
        )))?;
        chart.draw_series(std::iter::once(Text::new(
            label.clone(),
            (-0.45, *r + (hi - lo) * 0.01),
            text(LABEL - 3, BLACK).pos(plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Left,
                plotters::style::text_anchor::VPos::Bottom,
            )),
        )))?;
    }
    for (j, b) in p.boxes.iter().enumerate() {
        let x = j as f64;
        let c = colour(&b.backend);
        if let Some(s) = &b.spread {
            let (l, r) = (x - 0.28, x + 0.04);
            let m = (l + r) / 2.0;
            // each whisker with its cap as one path
            let (a, b2) = (m - 0.06, m + 0.06);
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(a, s.min), (b2, s.min), (m, s.min), (m, s.q1)],
                c.stroke_width(1),
            )))?;
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(m, s.q3), (m, s.max), (a, s.max), (b2, s.max)],
                c.stroke_width(1),
            )))?;
            chart.draw_series(std::iter::once(Rectangle::new(
                [(l, s.q1), (r, s.q3)],
                c.mix(0.25).filled(),
            )))?;
            chart.draw_series(std::iter::once(Rectangle::new(
                [(l, s.q1), (r, s.q3)],
                c.stroke_width(1),
            )))?;
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(l, s.median), (r, s.median)],
                c.stroke_width(3),
            )))?;
            let k = b.values.len();
            chart.draw_series(b.values.iter().enumerate().map(|(i, &v)| {
                let off = if k > 1 {
                    (i as f64 / (k - 1) as f64 - 0.5) * 0.22
                } else {
                    0.0
                };
                Circle::new((m + off, v), 3, c.filled())
            }))?;
        }
        if let Some(ci) = &b.ci {
            let cx = x + 0.2;
            if let (Some(l), Some(h)) = (ci.lo, ci.hi) {
                // the interval with both caps as one path
                let (a, b2) = (cx - 0.05, cx + 0.05);
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(a, l), (b2, l), (cx, l), (cx, h), (a, h), (b2, h)],
                    BLACK.stroke_width(2),
                )))?;
            }
            chart.draw_series(std::iter::once(Circle::new((cx, ci.mean), 4, BLACK.filled())))?;
        }
    }
    for (j, b) in p.boxes.iter().enumerate() {
        if b.values.is_empty() {
            chart.draw_series(std::iter::once(Text::new(
                "no data".to_string(),
                (j as f64 - 0.2, lo + (hi - lo) * 0.05),
                text(LABEL - 2, RGBColor(110, 110, 110)),
            )))?;
        }
    }
    Ok(())
}

impl SeedsFigure {
    /// Panels side by side for one or two backends, else one panel per row.
    fn cols(&self) -> usize {
        if self.panels.first().is_some_and(|p| p.boxes.len() <= 2) {
            2
        } else {
            1
        }
    }
}

impl Figure for SeedsFigure {
    fn size(&self) -> (u32, u32) {
        (1200, 60 + 230 * self.panels.len().div_ceil(self.cols()) as u32)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        let (main, legend) = split_legend(root);
        let title = format!(
            "{}: spread across {} seeds ({}–{})",
            self.scenario,
            self.seeds.len(),
            self.seeds.first().copied().unwrap_or(0),
            self.seeds.last().copied().unwrap_or(0)
        );
        let body = main.margin(8, 0, 0, 0).titled(&title, text(TITLE, BLACK))?;
        let cols = self.cols();
        let cells = body.split_evenly((self.panels.len().div_ceil(cols).max(1), cols));
        for (p, a) in self.panels.iter().zip(cells.iter()) {
            draw_panel(a, p, cols)?;
        }
        let mut items: Vec<LegendItem> = self
            .panels
            .first()
            .map(|p| {
                p.boxes
                    .iter()
                    .map(|b| LegendItem::new(Swatch::Band(colour(&b.backend), 0.6), b.backend.clone()))
                    .collect()
            })
            .unwrap_or_default();
        items.push(LegendItem::new(
            Swatch::Band(RGBColor(120, 120, 120), 0.3),
            "box: quartiles, bar: median, whiskers: min to max, dots: seeds",
        ));
        items.push(LegendItem::new(
            Swatch::Line(BLACK),
            format!("black: mean and 95% CI (Student t, n = {})", self.seeds.len()),
        ));
        items.push(LegendItem::new(
            Swatch::Line(RGBColor(90, 90, 90)),
            "reference (ceiling, bound, tolerated burst)",
        ));
        draw_legend(&legend, 56, &items)
    }
}
