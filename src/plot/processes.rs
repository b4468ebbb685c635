//! Each process's contribution: small multiples, one panel per backend, each a stacked area of
//! the per-process arrival rates (same sliding window as the rate plot) under the ceiling
//! (dashed, as on the rate plot). Processes are shades of the backend's colour, darkest (p0) at
//! the bottom; above [`MAX_LAYERS`] processes, neighbouring pids are grouped into one layer.
//!
//! A run with platforms has no fleet-wide ceiling: its panels are one per platform (rows) and
//! backend (columns), each the stack of the processes' arrivals on that platform under that
//! platform's own limit. A serialised platform shows one process at a time; an uncapped one
//! shows several stacked.

use super::palette::{colour, shade, tint};
use super::rate::{window_for, window_label};
use super::{
    DrawResult, Figure, LABEL, LegendItem, Swatch, TITLE, draw_faults, draw_legend, fault_bands, mesh, nice_ceil, num,
    split_legend, text,
};
use crate::timeline::{Grid, MAX_PLATFORM_SERIES, PROCESS_GROUPS, Timeline};
use crate::trace::{FaultKind, PlatformDetail};
use plotters::coord::Shift;
use plotters::prelude::*;

/// Most layers in one stack.
pub const MAX_LAYERS: usize = PROCESS_GROUPS;
/// Points per layer after smoothing.
const POINTS: usize = 250;

/// One backend's panel.
#[derive(Clone, Debug)]
pub struct Panel {
    /// Backend.
    pub backend: String,
    /// Layer labels (`p0`, or `p0–p5` when grouped), bottom first.
    pub labels: Vec<String>,
    /// Fetches per layer.
    pub totals: Vec<u64>,
    /// Fetches per process.
    pub per_process: Vec<u64>,
    /// Cumulative stacks: `stacks[j]` is the top of layer `j`, as `(time s, arrivals /s)`.
    pub stacks: Vec<Vec<(f64, f64)>>,
    /// Kill times, seconds.
    pub kills: Vec<f64>,
    /// With platforms: the platform (index into [`ProcessFigure::platforms`]) whose arrivals
    /// the panel stacks; `None` for the fleet's.
    pub platform: Option<usize>,
}

/// The per-process figure of one scenario.
#[derive(Clone, Debug)]
pub struct ProcessFigure {
    /// Scenario.
    pub scenario: String,
    /// Seed of the series.
    pub seed: u64,
    /// Ceiling, per second.
    pub ceiling: f64,
    /// Window, ns.
    pub window_ns: u64,
    /// End of the longest run, seconds.
    pub end_s: f64,
    /// One panel per backend; with platforms, one per platform and backend, platform-major.
    pub panels: Vec<Panel>,
    /// Fault bands.
    pub bands: Vec<(FaultKind, f64, f64)>,
    /// The platforms drawn (the first [`MAX_PLATFORM_SERIES`]), each with its own limit;
    /// empty without platforms.
    pub platforms: Vec<PlatformDetail>,
    /// Platforms the run declares.
    pub platform_count: usize,
}

/// Stack per-layer counts into cumulative sliding-window rates (window `k` bins of `width` ns,
/// `win_s` seconds), averaged into at most [`POINTS`] groups: `stacks[j]` is the top of layer `j`.
fn stack(counts: &[Vec<u32>], k: usize, win_s: f64, nbins: usize, width: u64, end: u64) -> Vec<Vec<(f64, f64)>> {
    let group = nbins.div_ceil(POINTS).max(1);
    let mut stacks: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut below = vec![0.0f64; nbins];
    for c in counts {
        let mut run: u64 = 0;
        let mut top = vec![0.0f64; nbins];
        for i in 0..nbins {
            run += c[i] as u64;
            if i >= k {
                run -= c[i - k] as u64;
            }
            top[i] = below[i] + run as f64 / win_s;
        }
        let mut pts = vec![(0.0, 0.0)];
        for (gi, chunk) in top.chunks(group).enumerate() {
            let mean = chunk.iter().sum::<f64>() / chunk.len() as f64;
            let t_end = ((gi * group + chunk.len()) as u64 * width) as f64 / 1e9;
            pts.push((t_end.min(end as f64 / 1e9), mean));
        }
        stacks.push(super::collapse_flat(pts));
        below = top;
    }
    stacks
}

/// `p0`, or `p0–p5` for a group.
fn layer_label(lo: usize, hi: usize) -> String {
    if lo == hi {
        format!("p{lo}")
    } else {
        format!("p{lo}–p{hi}")
    }
}

/// Per-bin counts of `grid` at `width`, padded with zeros to `n` bins.
fn cells_at(grid: &Grid<u32>, width: u64, n: usize) -> Vec<u32> {
    let mut g = grid.clone();
    g.coarsen_to(width);
    let mut v = g.cells().to_vec();
    v.resize(n.max(v.len()), 0);
    v
}

impl ProcessFigure {
    /// Build from each backend's timeline (with series), in table order.
    pub fn new(scenario: &str, seed: u64, ceiling: f64, runs: &[(&str, &Timeline, f64)]) -> ProcessFigure {
        let end = runs.iter().map(|r| r.1.end()).max().unwrap_or(0).max(1);
        let platformed = runs.iter().map(|r| r.1).find(|tl| !tl.platforms().is_empty());
        let width = runs
            .iter()
            .flat_map(|r| {
                let shown = r.1.platform_arrivals().len();
                r.1.per_process()
                    .iter()
                    .chain((0..shown).flat_map(|p| r.1.platform_layers(p)))
                    .map(|g| g.width())
            })
            .max()
            .unwrap_or(crate::timeline::FINE_WIDTH_NS);
        let window_ns = window_for(end, width);
        let k = (window_ns / width).max(1) as usize;
        let win_s = (k as u64 * width) as f64 / 1e9;
        let nbins = end.div_ceil(width) as usize + 1;
        let mut panels = Vec::new();
        // without platforms: one panel per backend, the fleet's arrivals
        for (backend, tl, _) in runs.iter().filter(|_| platformed.is_none()) {
            let procs = tl.per_process();
            let p = procs.len().max(1);
            let per_layer = p.div_ceil(MAX_LAYERS);
            let layers = p.div_ceil(per_layer);
            let mut labels = Vec::new();
            let mut totals = Vec::new();
            let mut counts: Vec<Vec<u32>> = Vec::new();
            for j in 0..layers {
                let lo = j * per_layer;
                let hi = ((j + 1) * per_layer).min(p) - 1;
                labels.push(layer_label(lo, hi));
                totals.push(
                    (lo..=hi)
                        .map(|i| tl.per_process_total().get(i).copied().unwrap_or(0))
                        .sum(),
                );
                let mut sum = vec![0u32; nbins];
                for g in procs.iter().take(hi + 1).skip(lo) {
                    for (i, c) in cells_at(g, width, nbins).into_iter().enumerate().take(nbins) {
                        sum[i] += c;
                    }
                }
                counts.push(sum);
            }
            // sliding-window rate per layer, stacked, then averaged into at most POINTS groups
            let stacks = stack(&counts, k, win_s, nbins, width, end);
            panels.push(Panel {
                backend: backend.to_string(),
                labels,
                totals,
                per_process: tl.per_process_total().to_vec(),
                stacks,
                kills: tl.crashes().iter().map(|&t| t as f64 / 1e9).collect(),
                platform: None,
            });
        }
        let mut platforms = Vec::new();
        let mut platform_count = 0;
        if let Some(first) = platformed {
            // one panel per platform and backend: the processes' arrivals on that platform
            platform_count = first.platforms().len();
            platforms = first.platforms().iter().take(MAX_PLATFORM_SERIES).cloned().collect();
            for p in 0..platforms.len() {
                for (backend, tl, _) in runs {
                    let size = tl.platform_group_size();
                    let n = tl
                        .header()
                        .map_or(tl.per_process().len(), |h| h.processes as usize)
                        .max(1);
                    let layers = tl.platform_layers(p);
                    let counts: Vec<Vec<u32>> = layers.iter().map(|g| cells_at(g, width, nbins)).collect();
                    let labels = (0..layers.len())
                        .map(|j| layer_label(j * size, ((j + 1) * size).min(n) - 1))
                        .collect();
                    let totals = counts.iter().map(|c| c.iter().map(|&x| x as u64).sum()).collect();
                    panels.push(Panel {
                        backend: backend.to_string(),
                        labels,
                        totals,
                        per_process: Vec::new(),
                        stacks: stack(&counts, k, win_s, nbins, width, end),
                        kills: tl.crashes().iter().map(|&t| t as f64 / 1e9).collect(),
                        platform: Some(p),
                    });
                }
            }
        }
        let end_s = end as f64 / 1e9;
        ProcessFigure {
            scenario: scenario.to_string(),
            seed,
            ceiling,
            window_ns,
            end_s,
            panels,
            bands: fault_bands(runs.iter().flat_map(|r| r.1.faults()), end_s),
            platforms,
            platform_count,
        }
    }

    fn cols(&self) -> usize {
        if !self.platforms.is_empty() {
            return self.panels.len().div_ceil(self.platforms.len()).max(1);
        }
        if self.panels.len() <= 1 { 1 } else { 2 }
    }
    fn rows(&self) -> usize {
        self.panels.len().div_ceil(self.cols()).max(1)
    }

    /// The figure of a run with platforms: a row per platform, each panel under its limit.
    fn draw_platforms<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        let (main, legend) = split_legend(root);
        let shown = if self.platform_count > self.platforms.len() {
            format!(
                ", the first {} of {} platforms",
                self.platforms.len(),
                self.platform_count
            )
        } else {
            String::new()
        };
        let title = format!(
            "{}: arrivals per process on each platform, stacked (seed {}{shown})",
            self.scenario, self.seed
        );
        let body = main.margin(8, 0, 0, 0).titled(&title, text(TITLE, BLACK))?;
        let cells = body.split_evenly((self.rows(), self.cols()));
        let xmax = if self.end_s > 0.0 { self.end_s } else { 1.0 };
        let one_backend = self.cols() == 1;
        for (panel, area) in self.panels.iter().zip(cells.iter()) {
            let Some(pl) = panel.platform.and_then(|p| self.platforms.get(p)) else {
                continue;
            };
            // one scale per platform (row), so a row's panels compare
            let top = self
                .panels
                .iter()
                .filter(|q| q.platform == panel.platform)
                .flat_map(|q| q.stacks.last().into_iter().flatten().map(|v| v.1))
                .fold(0.0, f64::max);
            let ymax = nice_ceil(top.max(pl.limit) * 1.08);
            let n = panel.stacks.len();
            let arrivals: u64 = panel.totals.iter().sum();
            let from = panel.totals.iter().filter(|&&t| t > 0).count();
            let walks = if pl.serialized {
                "serialised"
            } else {
                "uncapped, not serialised"
            };
            let caption = format!(
                "{}{} ({walks}): {arrivals} arrivals from {from} {}",
                if one_backend {
                    String::new()
                } else {
                    format!("{}: ", panel.backend)
                },
                pl.name,
                if panel.labels.iter().any(|l| l.contains('–')) {
                    if from == 1 {
                        "group of processes"
                    } else {
                        "groups of processes"
                    }
                } else if from == 1 {
                    "process"
                } else {
                    "processes"
                }
            );
            let mut chart = ChartBuilder::on(area)
                .caption(caption, text(LABEL + 2, colour(&panel.backend)))
                .margin(8)
                .margin_right(16)
                .x_label_area_size(40)
                .y_label_area_size(62)
                .build_cartesian_2d(0.0..xmax, 0.0..ymax)?;
            mesh(&mut chart, LABEL - 1, LABEL)
                .x_desc("time (s)")
                .y_desc(format!("arrivals/s (last {})", window_label(self.window_ns)))
                .x_label_formatter(&|v| num(*v, 3))
                .y_label_formatter(&|v| num(*v, 2))
                .x_labels(8)
                .y_labels(6)
                .draw()?;
            let kills: Vec<(f64, RGBColor)> = panel.kills.iter().map(|&t| (t, colour(&panel.backend))).collect();
            draw_faults(&mut chart, &self.bands, &kills, 0.0, ymax)?;
            for poly in stacked(&panel.stacks, &panel.backend, n) {
                chart.draw_series(std::iter::once(poly))?;
            }
            // dashed, as on the rate plot: a ceiling reads the same in every figure
            chart.draw_series(DashedLineSeries::new(
                vec![(0.0, pl.limit), (xmax, pl.limit)],
                14,
                8,
                BLACK.stroke_width(2),
            ))?;
            let at = chart.backend_coord(&(xmax, pl.limit));
            super::boxed_label(
                area,
                at,
                &format!(
                    "{} limit {}/s{}",
                    pl.name,
                    num(pl.limit, 3),
                    if pl.serialized { "" } else { " (uncapped)" }
                ),
            )?;
        }

        let mut items = vec![LegendItem::new(
            Swatch::Dashed(BLACK),
            "the panel's platform's limit: its own destination's ceiling (no fleet-wide one)",
        )];
        for p in self.panels.iter().filter(|p| p.platform == Some(0)) {
            let n = p.labels.len();
            let ramp = (0..n).map(|j| layer_colour(&p.backend, j, n)).collect();
            let label = match (p.labels.first(), p.labels.last()) {
                (Some(a), Some(b)) if n > 1 => format!("{}: {a} (dark, bottom) to {b} (light, top)", p.backend),
                (Some(a), _) => format!("{}: {a}", p.backend),
                _ => p.backend.clone(),
            };
            items.push(LegendItem::new(Swatch::Ramp(ramp), label));
        }
        items.push(LegendItem::new(
            Swatch::Blank,
            "a process's job is on one platform at a time: its arrivals stack under that platform's panel",
        ));
        if !self.bands.is_empty() {
            items.push(LegendItem::new(
                Swatch::Band(super::FAULT_GREY, super::FAULT_ALPHA * 2.0),
                "fault window",
            ));
        }
        if self.panels.iter().any(|p| !p.kills.is_empty()) {
            items.push(LegendItem::new(
                Swatch::Line(RGBColor(90, 90, 90)),
                "kill (thin vertical line)",
            ));
        }
        draw_legend(&legend, 56, &items)
    }
}

/// The stacked layers of `n` processes as filled polygons, top layer first: each lower one is
/// painted over it down to the baseline.
fn stacked<'a>(
    stacks: &'a [Vec<(f64, f64)>],
    backend: &'a str,
    n: usize,
) -> impl Iterator<Item = Polygon<(f64, f64)>> + 'a {
    (0..n).rev().map(move |j| {
        let mut poly = stacks[j].clone();
        if let (Some(first), Some(last)) = (poly.first().copied(), poly.last().copied()) {
            poly.push((last.0, 0.0));
            poly.push((first.0, 0.0));
        }
        Polygon::new(poly, layer_colour(backend, j, n).filled())
    })
}

/// The shade of layer `j` of `n` in `backend`'s colour (darkest at the bottom).
pub fn layer_colour(backend: &str, j: usize, n: usize) -> RGBColor {
    let c = colour(backend);
    if n <= 1 {
        return c;
    }
    let f = j as f64 / (n - 1) as f64;
    // from a little darker than the colour to a light tint
    if f < 0.2 {
        shade(c, 0.25 * (0.2 - f) / 0.2)
    } else {
        tint(c, 0.72 * (f - 0.2) / 0.8)
    }
}

impl Figure for ProcessFigure {
    fn size(&self) -> (u32, u32) {
        (1200, 70 + 300 * self.rows() as u32)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        if !self.platforms.is_empty() {
            return self.draw_platforms(root);
        }
        let (main, legend) = split_legend(root);
        let title = format!(
            "{}: arrivals per process, stacked ({} sliding window, seed {})",
            self.scenario,
            window_label(self.window_ns),
            self.seed
        );
        let body = main.margin(8, 0, 0, 0).titled(&title, text(TITLE, BLACK))?;
        let cells = body.split_evenly((self.rows(), self.cols()));
        let top = self
            .panels
            .iter()
            .flat_map(|p| p.stacks.last().into_iter().flatten().map(|q| q.1))
            .fold(0.0, f64::max);
        let ymax = nice_ceil(top.max(self.ceiling) * 1.08);
        let xmax = if self.end_s > 0.0 { self.end_s } else { 1.0 };
        for (panel, area) in self.panels.iter().zip(cells.iter()) {
            let n = panel.stacks.len();
            let lo = panel.per_process.iter().min().copied().unwrap_or(0);
            let hi = panel.per_process.iter().max().copied().unwrap_or(0);
            let caption = format!(
                "{}: {} process{}, {} fetches each",
                panel.backend,
                panel.per_process.len(),
                if panel.per_process.len() == 1 { "" } else { "es" },
                if lo == hi {
                    lo.to_string()
                } else {
                    format!("{lo}–{hi}")
                }
            );
            let mut chart = ChartBuilder::on(area)
                .caption(caption, text(LABEL + 2, colour(&panel.backend)))
                .margin(8)
                .margin_right(16)
                .x_label_area_size(40)
                .y_label_area_size(62)
                .build_cartesian_2d(0.0..xmax, 0.0..ymax)?;
            mesh(&mut chart, LABEL - 1, LABEL)
                .x_desc("time (s)")
                .y_desc("arrivals per second")
                .x_label_formatter(&|v| num(*v, 3))
                .y_label_formatter(&|v| num(*v, 2))
                .x_labels(8)
                .y_labels(6)
                .draw()?;
            let kills: Vec<(f64, RGBColor)> = panel.kills.iter().map(|&t| (t, colour(&panel.backend))).collect();
            draw_faults(&mut chart, &self.bands, &kills, 0.0, ymax)?;
            for poly in stacked(&panel.stacks, &panel.backend, n) {
                chart.draw_series(std::iter::once(poly))?;
            }
            // dashed, as on the rate plot: a ceiling reads the same in every figure
            chart.draw_series(DashedLineSeries::new(
                vec![(0.0, self.ceiling), (xmax, self.ceiling)],
                14,
                8,
                BLACK.stroke_width(2),
            ))?;
        }

        let mut items = vec![LegendItem::new(
            Swatch::Dashed(BLACK),
            format!("ceiling {}/s", num(self.ceiling, 3)),
        )];
        for p in &self.panels {
            let n = p.labels.len();
            let ramp = (0..n).map(|j| layer_colour(&p.backend, j, n)).collect();
            let label = match (p.labels.first(), p.labels.last()) {
                (Some(a), Some(b)) if n > 1 => format!("{}: {a} (dark, bottom) to {b} (light, top)", p.backend),
                (Some(a), _) => format!("{}: {a}", p.backend),
                _ => p.backend.clone(),
            };
            items.push(LegendItem::new(Swatch::Ramp(ramp), label));
        }
        if !self.bands.is_empty() {
            items.push(LegendItem::new(
                Swatch::Band(super::FAULT_GREY, super::FAULT_ALPHA * 2.0),
                "fault window",
            ));
        }
        if self.panels.iter().any(|p| !p.kills.is_empty()) {
            items.push(LegendItem::new(
                Swatch::Line(RGBColor(90, 90, 90)),
                "kill (thin vertical line)",
            ));
        }
        draw_legend(&legend, 56, &items)
    }
}
