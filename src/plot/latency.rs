//! Permission round trip (a store operation that asks for permission, sent to its reply: a
//! reservation, a GCRA check, a lock try or a backend's own acquire; not reports or unlocks) as a
//! cumulative distribution per backend, log-scaled time axis. Backends without store round trips are left out, and so is
//! the figure when no backend has any (or every one is instantaneous: a zero-latency store).

use super::palette::colour;
use super::{
    AXIS, DrawResult, Figure, LABEL, LegendItem, Swatch, decimate, draw_legend, draw_stacked, main_chart, mesh, num,
    split_legend, text,
};
use crate::timeline::Timeline;
use plotters::coord::Shift;
use plotters::prelude::*;

/// One backend's distribution.
#[derive(Clone, Debug)]
pub struct Cdf {
    /// Backend.
    pub backend: String,
    /// Round trips measured.
    pub count: u64,
    /// `(ms, cumulative %)` as a step line.
    pub points: Vec<(f64, f64)>,
    /// p50, p95, p99, ms (the summary's figures).
    pub quantiles: [f64; 3],
    /// The backend drawn with the very same line, if any.
    pub same_as: Option<String>,
}

/// The latency figure of one scenario.
#[derive(Clone, Debug)]
pub struct LatencyFigure {
    /// Scenario.
    pub scenario: String,
    /// Seed.
    pub seed: u64,
    /// One line per backend that had round trips.
    pub lines: Vec<Cdf>,
}

impl LatencyFigure {
    /// Build from the runs' histograms; `None` when no backend made a store round trip, or
    /// none took longer than a microsecond (a zero-latency store).
    pub fn new(scenario: &str, seed: u64, runs: &[(&str, &Timeline, f64)]) -> Option<LatencyFigure> {
        let mut lines = Vec::new();
        for (backend, tl, _) in runs {
            let h = tl.latency();
            if h.is_empty() {
                continue;
            }
            let total = h.len() as f64;
            let mut cum = 0u64;
            let mut pts: Vec<(f64, f64)> = Vec::new();
            for v in h.iter_recorded() {
                let x = h.highest_equivalent(v.value_iterated_to()) as f64 / 1e6;
                let before = cum as f64 / total * 100.0;
                cum += v.count_since_last_iteration();
                pts.push((x, before));
                pts.push((x, cum as f64 / total * 100.0));
            }
            let ms = |q: f64| h.value_at_quantile(q) as f64 / 1e6;
            lines.push(Cdf {
                backend: backend.to_string(),
                count: h.len(),
                points: decimate(&pts, 150),
                quantiles: [ms(0.50), ms(0.95), ms(0.99)],
                same_as: None,
            });
        }
        let same = super::same_as(&lines.iter().map(|l| &l.points).collect::<Vec<_>>());
        let names: Vec<String> = lines.iter().map(|l| l.backend.clone()).collect();
        for (l, s) in lines.iter_mut().zip(same) {
            l.same_as = s.map(|j| names[j].clone());
        }
        // a store with no latency answers in a nanosecond: nothing to draw
        let longest = runs.iter().map(|r| r.1.latency().max()).max().unwrap_or(0);
        if longest <= 1_000 {
            return None;
        }
        (!lines.is_empty()).then(|| LatencyFigure {
            scenario: scenario.to_string(),
            seed,
            lines,
        })
    }

    /// The x range (ms): the data's, padded, at least one decade wide.
    fn x_range(&self) -> (f64, f64) {
        let xs = self.lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
        let lo = xs.clone().fold(f64::INFINITY, f64::min).max(1e-7);
        let hi = xs.fold(0.0, f64::max).max(lo);
        // whole decades, so the log axis has labelled ticks on both sides of the data
        let lo = 10f64.powf(lo.log10().floor());
        let hi = 10f64.powf(hi.log10().ceil()).max(lo * 10.0);
        (lo, hi)
    }
}

/// A tick label for a log axis in milliseconds.
pub fn ms_label(v: f64) -> String {
    if v >= 0.01 { num(v, 3) } else { format!("{v:.0e}") }
}

impl Figure for LatencyFigure {
    fn size(&self) -> (u32, u32) {
        (1200, 620)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        let (main, legend) = split_legend(root);
        let (lo, hi) = self.x_range();
        let title = format!(
            "{}: permission round trip, sent to reply (seed {})",
            self.scenario, self.seed
        );
        let mut chart = main_chart(&main, title).build_cartesian_2d((lo..hi).log_scale(), 0.0..100.0)?;
        mesh(&mut chart, LABEL, AXIS)
            .x_desc("round trip of a reservation, GCRA check or lock try (ms, log scale)")
            .y_desc("share of round trips at or below (%)")
            .x_label_formatter(&|v| ms_label(*v))
            .y_label_formatter(&|v| num(*v, 1))
            .draw()?;
        for (q, name) in [(50.0, "p50"), (95.0, "p95"), (99.0, "p99")] {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(lo, q), (hi, q)],
                RGBColor(175, 175, 175).stroke_width(1),
            )))?;
            chart.draw_series(std::iter::once(Text::new(
                name.to_string(),
                (lo * 1.05, q),
                text(LABEL - 2, RGBColor(100, 100, 100)).pos(plotters::style::text_anchor::Pos::new(
                    plotters::style::text_anchor::HPos::Left,
                    plotters::style::text_anchor::VPos::Bottom,
                )),
            )))?;
        }
        let lines: Vec<_> = self.lines.iter().map(|l| (l.backend.as_str(), &l.points[..])).collect();
        draw_stacked(&mut chart, &lines)?;
        let items: Vec<LegendItem> = self
            .lines
            .iter()
            .map(|l| {
                LegendItem::new(
                    Swatch::Line(colour(&l.backend)),
                    format!(
                        "{}: p50 {} · p95 {} · p99 {} ms ({} round trips{})",
                        l.backend,
                        ms_label(l.quantiles[0]),
                        ms_label(l.quantiles[1]),
                        ms_label(l.quantiles[2]),
                        l.count,
                        l.same_as
                            .as_ref()
                            .map_or(String::new(), |o| format!("; same line as {o}"))
                    ),
                )
            })
            .collect();
        draw_legend(&legend, 56, &items)
    }
}
