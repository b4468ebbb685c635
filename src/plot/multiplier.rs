//! The backoff multiplier over time, drawn only when some backend's trace has a `multiplier`
//! event. A shared (global) multiplier is one solid line; per-process multipliers draw their
//! mean across processes (solid) and their maximum (dashed). Each bin shows the largest value
//! in force during it, so short spikes stay visible at any zoom.

use super::palette::colour;
use super::{
    AXIS, DrawResult, Figure, LABEL, LegendItem, Swatch, decimate, draw_faults, draw_legend, fault_bands, main_chart,
    mesh, num, split_legend,
};
use crate::timeline::{Gauge, Grid, Timeline};
use crate::trace::FaultKind;
use plotters::coord::Shift;
use plotters::prelude::*;

/// One drawn line.
#[derive(Clone, Debug)]
pub struct MultLine {
    /// Backend.
    pub backend: String,
    /// What it shows: `shared`, `mean over processes`, `max over processes`.
    pub what: String,
    /// Dashed (the per-process max).
    pub dashed: bool,
    /// `(time s, multiplier)` steps.
    pub points: Vec<(f64, f64)>,
}

/// The multiplier figure of one scenario.
#[derive(Clone, Debug)]
pub struct MultiplierFigure {
    /// Scenario.
    pub scenario: String,
    /// Seed.
    pub seed: u64,
    /// The multiplier cap (from the trace header).
    pub cap: f64,
    /// End, seconds.
    pub end_s: f64,
    /// Lines.
    pub lines: Vec<MultLine>,
    /// Fault bands.
    pub bands: Vec<(FaultKind, f64, f64)>,
    /// Kills.
    pub kills: Vec<(f64, RGBColor)>,
}

/// A gauge grid as steps `(time s, largest value in the bin)`, from 1.0 at time 0 to `end`.
pub fn steps(g: &Grid<Gauge>, end: u64) -> Vec<(f64, f64)> {
    let w = g.width();
    let mut carry = 1.0f64;
    let mut pts = vec![(0.0, 1.0)];
    for (i, c) in g.cells().iter().enumerate() {
        let v = c.max.map_or(carry, |m| m.max(carry));
        let (a, b) = (
            (i as u64 * w) as f64 / 1e9,
            (((i as u64 + 1) * w).min(end.max(1))) as f64 / 1e9,
        );
        pts.push((a, v));
        pts.push((b, v));
        carry = c.last.unwrap_or(carry);
    }
    let last_t = (g.cells().len() as u64 * w).min(end) as f64 / 1e9;
    if (end as f64 / 1e9) > last_t {
        pts.push((last_t, carry));
        pts.push((end as f64 / 1e9, carry));
    }
    decimate(&pts, 400)
}

impl MultiplierFigure {
    /// Build from the runs; `None` when no run changed a multiplier.
    pub fn new(scenario: &str, seed: u64, runs: &[(&str, &Timeline, f64)]) -> Option<MultiplierFigure> {
        let end = runs.iter().map(|r| r.1.end()).max().unwrap_or(0).max(1);
        let mut lines = Vec::new();
        let mut cap: f64 = 1.0;
        let mut kills = Vec::new();
        let mut unchanged = Vec::new();
        for (backend, tl, _) in runs {
            let mut any = false;
            if let Some(g) = tl.global_multiplier() {
                any = true;
                lines.push(MultLine {
                    backend: backend.to_string(),
                    what: "shared multiplier".into(),
                    dashed: false,
                    points: steps(g, tl.end()),
                });
            }
            if let Some((mean, max)) = tl.per_process_multiplier() {
                any = true;
                lines.push(MultLine {
                    backend: backend.to_string(),
                    what: "mean over processes".into(),
                    dashed: false,
                    points: steps(mean, tl.end()),
                });
                lines.push(MultLine {
                    backend: backend.to_string(),
                    what: "max over processes".into(),
                    dashed: true,
                    points: steps(max, tl.end()),
                });
            }
            if any {
                if let Some(h) = tl.header() {
                    cap = cap.max(h.multiplier_cap);
                }
                kills.extend(tl.crashes().iter().map(|&t| (t as f64 / 1e9, colour(backend))));
            } else {
                unchanged.push(MultLine {
                    backend: backend.to_string(),
                    what: "never changed".into(),
                    dashed: false,
                    points: vec![(0.0, 1.0), (tl.end() as f64 / 1e9, 1.0)],
                });
            }
        }
        if lines.is_empty() {
            return None;
        }
        // backends that never backed off: a flat line at 1, so every backend has its line
        lines.extend(unchanged);
        let peak = lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .fold(1.0, f64::max);
        let end_s = end as f64 / 1e9;
        Some(MultiplierFigure {
            scenario: scenario.to_string(),
            seed,
            cap: cap.max(peak),
            end_s,
            lines,
            bands: fault_bands(runs.iter().flat_map(|r| r.1.faults()), end_s),
            kills,
        })
    }
}

impl Figure for MultiplierFigure {
    fn size(&self) -> (u32, u32) {
        (1200, 560)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        let (main, legend) = split_legend(root);
        let ymax = (self.cap * 1.1).ceil().max(2.0);
        let xmax = if self.end_s > 0.0 { self.end_s } else { 1.0 };
        let title = format!("{}: backoff multiplier over time (seed {})", self.scenario, self.seed);
        let mut chart = main_chart(&main, title).build_cartesian_2d(0.0..xmax, 0.0..ymax)?;
        mesh(&mut chart, LABEL, AXIS)
            .x_desc("time (s)")
            .y_desc("multiplier (x base interval)")
            .x_label_formatter(&|v| num(*v, 3))
            .y_label_formatter(&|v| num(*v, 2))
            .draw()?;
        draw_faults(&mut chart, &self.bands, &self.kills, 0.0, ymax)?;
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(0.0, self.cap), (xmax, self.cap)],
            RGBColor(90, 90, 90).stroke_width(1),
        )))?;
        for l in &self.lines {
            let c = colour(&l.backend);
            if l.dashed {
                chart.draw_series(DashedLineSeries::new(l.points.iter().copied(), 8, 5, c.stroke_width(2)))?;
            } else {
                chart.draw_series(LineSeries::new(l.points.iter().copied(), c.stroke_width(2)))?;
            }
        }
        let mut items: Vec<LegendItem> = self
            .lines
            .iter()
            .map(|l| {
                let c = colour(&l.backend);
                LegendItem::new(
                    if l.dashed { Swatch::Dashed(c) } else { Swatch::Line(c) },
                    format!("{}: {}", l.backend, l.what),
                )
            })
            .collect();
        items.push(LegendItem::new(
            Swatch::Line(RGBColor(90, 90, 90)),
            format!("cap {}", num(self.cap, 2)),
        ));
        if !self.bands.is_empty() {
            items.push(LegendItem::new(
                Swatch::Band(super::FAULT_GREY, super::FAULT_ALPHA * 2.0),
                "fault window",
            ));
        }
        draw_legend(&legend, 56, &items)
    }
}
