//! The aggregate arrival rate over time: one line per backend (arrivals at the destination in
//! a sliding window), the ceiling as a dashed horizontal line, fault windows shaded, kills as
//! dashed vertical marks, and a strip below showing when each backend had processes in
//! fallback.
//!
//! A run whose trace declares platforms has no fleet-wide ceiling: each platform is a
//! destination of its own, judged at its own limit (`crate::check::platforms`). Its figure is
//! one panel per platform, stacked, each with that platform's arrivals (one line per backend)
//! against that platform's limit, and says whether the platform's walks are serialised (one
//! at a time, under its lock) or uncapped.
//!
//! The window is 1 s, as the ceiling's headline figure reads, unless the run is shorter than
//! 10 s: a 1 s window over a 0.8 s run would hide a 4x burst, so short runs use the smallest of
//! 10, 20, 50, 100, 200, 500 ms that is at least a tenth of the run (the title says which).

use super::palette::{colour, tint};
use super::{
    AXIS, DrawResult, Figure, LABEL, LegendItem, Swatch, draw_faults, draw_legend, draw_stacked, fault_bands,
    main_chart, mesh, nice_ceil, num, split_legend, text,
};
use crate::timeline::{Grid, MAX_PLATFORM_SERIES, Timeline};
use crate::trace::FaultKind;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Windows a short run may use, nanoseconds.
const SHORT_WINDOWS: [u64; 6] = [
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
];

/// The sliding window for a run ending at `end_ns` binned at `width` ns (see the module doc).
pub fn window_for(end_ns: u64, width: u64) -> u64 {
    let w = if end_ns >= 10_000_000_000 {
        1_000_000_000
    } else {
        SHORT_WINDOWS
            .iter()
            .copied()
            .find(|&w| w * 10 >= end_ns)
            .unwrap_or(1_000_000_000)
    };
    let w = w.max(width);
    w.div_ceil(width) * width
}

/// A window length for titles: `1 s`, `100 ms`.
pub fn window_label(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{} s", num(ns as f64 / 1e9, 3))
    } else {
        format!("{} ms", num(ns as f64 / 1e6, 3))
    }
}

/// Count per second in the window ending at each bin's end: `(time s, rate /s)`, from `(0, 0)`.
pub fn sliding(grid: &Grid<u32>, window_ns: u64) -> Vec<(f64, f64)> {
    let w = grid.width();
    let k = (window_ns / w).max(1) as usize;
    let win_s = (k as u64 * w) as f64 / 1e9;
    let cells = grid.cells();
    let mut out = Vec::with_capacity(cells.len() + 1);
    out.push((0.0, 0.0));
    let mut sum: u64 = 0;
    for (i, &c) in cells.iter().enumerate() {
        sum += c as u64;
        if i >= k {
            sum -= cells[i - k] as u64;
        }
        out.push((((i as u64 + 1) * w) as f64 / 1e9, sum as f64 / win_s));
    }
    out
}

/// One backend's line.
#[derive(Clone, Debug)]
pub struct RateLine {
    /// Backend.
    pub backend: String,
    /// `(time s, arrivals /s)`: the windowed rate itself, or in long runs its mean over each
    /// group of bins that shares a pixel column.
    pub points: Vec<(f64, f64)>,
    /// In long runs, `(time s, lowest, highest)` windowed rate in each group: the band
    /// around the mean line (so a one-bin overshoot stays visible).
    pub band: Vec<Band>,
    /// The backend drawn with the very same line, if any (identical runs).
    pub same_as: Option<String>,
    /// The summary's achieved rate, for the legend.
    pub achieved: f64,
    /// Windows with a process in fallback, seconds.
    pub fallback: Vec<(f64, f64)>,
    /// Kill times, seconds.
    pub kills: Vec<f64>,
    /// The run's verdicts, for its legend entry (`PASS`, `FAIL: ceiling burst 31`); empty:
    /// none shown (the report sets them, [`RateFigure::set_verdict`]).
    pub verdict: String,
    /// Spans `(from s, to s)` where the sliding window held more than `ceiling x window + 1`
    /// arrivals, marked on the plot when the run fails its ceiling ([`RateFigure::set_verdict`]).
    pub over: Vec<(f64, f64)>,
}

/// `(time s, lowest, highest)`.
pub type Band = (f64, f64, f64);

/// Groups (pixel columns) a rate line is reduced to.
pub const GROUPS: usize = 400;

/// Reduce a windowed-rate series to at most [`GROUPS`] groups: the mean line and the
/// lowest-highest band. A series of up to `4 * GROUPS` points is drawn as one line instead,
/// with no band.
pub fn mean_and_band(points: &[(f64, f64)]) -> (Vec<(f64, f64)>, Vec<Band>) {
    if points.len() <= 4 * GROUPS {
        // few enough to draw as one line (its extremes kept), with no band
        return (super::decimate(points, GROUPS), Vec::new());
    }
    let per = points.len().div_ceil(GROUPS);
    let mut mean = Vec::with_capacity(GROUPS + 1);
    let mut band = Vec::with_capacity(GROUPS + 1);
    for g in points.chunks(per) {
        let t = g[g.len() / 2].0;
        let m = g.iter().map(|p| p.1).sum::<f64>() / g.len() as f64;
        let lo = g.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
        let hi = g.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
        mean.push((t, m));
        band.push((t, lo, hi));
    }
    (mean, band)
}

/// The rate-over-time figure of one scenario.
#[derive(Clone, Debug)]
pub struct RateFigure {
    /// Scenario name.
    pub scenario: String,
    /// Seed the series come from.
    pub seed: u64,
    /// The ceiling, per second.
    pub ceiling: f64,
    /// Window length, ns.
    pub window_ns: u64,
    /// End of the longest run, seconds.
    pub end_s: f64,
    /// One line per backend.
    pub lines: Vec<RateLine>,
    /// Fault bands `(kind, start s, end s)`.
    pub bands: Vec<(FaultKind, f64, f64)>,
    /// Per backend whose multiplier left 1: the effective ceiling, `ceiling / multiplier`
    /// (the shared multiplier, or the mean over processes), as steps `(time s, per second)`.
    /// Empty for a run with platforms (the multiplier paces walks, not a platform's limit).
    pub effective: Vec<EffectiveCeiling>,
    /// With platforms: one panel per platform (the first [`MAX_PLATFORM_SERIES`]), each
    /// against its own limit, drawn in place of the fleet-wide chart (`lines`, `ceiling`).
    /// Empty without platforms.
    pub platforms: Vec<PlatformPanel>,
    /// Platforms the run declares (more than `platforms.len()` past [`MAX_PLATFORM_SERIES`]).
    pub platform_count: usize,
    /// Arrivals of processes on no platform yet (none in a well-formed trace), per backend.
    pub unplaced: Vec<(String, u64)>,
    /// A violation to mark (an explorer's counterexample): from, to (seconds), and what broke.
    pub violation: Option<(f64, f64, String)>,
}

/// One platform's panel: its arrivals against its own limit.
#[derive(Clone, Debug)]
pub struct PlatformPanel {
    /// The platform's name.
    pub name: String,
    /// Its destination's ceiling, per second: the line its arrivals are judged against.
    pub limit: f64,
    /// The burst its `ceiling` tolerates.
    pub burst: u64,
    /// Whether its walks are serialised (one at a time, under its lock); else uncapped.
    pub serialized: bool,
    /// One line per backend, in table order.
    pub lines: Vec<PlatformLine>,
}

impl PlatformPanel {
    /// How its walks run, for its panel's caption: serialised (one at a time, under its lock)
    /// or uncapped.
    pub fn walks(&self) -> &'static str {
        if self.serialized {
            "serialised: one walk at a time, under its lock"
        } else {
            "uncapped: walks not serialised, no lock"
        }
    }

    /// The label of its limit line: `patreon limit 2.5/s`, with `(uncapped)` for an uncapped one.
    pub fn limit_label(&self) -> String {
        format!(
            "{} limit {}/s{}",
            self.name,
            num(self.limit, 3),
            if self.serialized { "" } else { " (uncapped)" }
        )
    }
}

/// One backend's arrivals on one platform.
#[derive(Clone, Debug)]
pub struct PlatformLine {
    /// Backend.
    pub backend: String,
    /// `(time s, arrivals /s)`, as [`RateLine::points`].
    pub points: Vec<(f64, f64)>,
    /// The lowest-highest band, as [`RateLine::band`].
    pub band: Vec<Band>,
    /// Arrivals on the platform in all (the data behind `mean`, which the legend prints).
    #[cfg_attr(not(test), allow(dead_code, reason = "the figure's data, checked by its tests"))]
    pub total: u64,
    /// Their mean rate over the run, per second.
    pub mean: f64,
}

/// One backend's effective ceiling over time.
#[derive(Clone, Debug)]
pub struct EffectiveCeiling {
    /// Backend.
    pub backend: String,
    /// Which multiplier divides the ceiling: the shared one, or the mean per-process one.
    pub which: &'static str,
    /// Steps `(time s, per second)`.
    pub points: Vec<(f64, f64)>,
}

/// The spans `(from s, to s)` where a run's arrivals (binned: `grid`) outran the ceiling: the
/// ceiling check's bucket overdrawn beyond its burst, and a window ending there holding more
/// than `ceiling x window + 1` arrivals, the plot's own window or a horizon of ten intervals
/// of the ceiling (so the stretches that ran over, and up to a horizon after them, not the
/// paced stretches after those while the debt they left stands). The horizon sees what the
/// plot's window cannot: a run at twice a 0.5/s ceiling never puts more than one arrival in
/// a 1 s window, yet runs over. The bucket is a GCRA at `ceiling`/s with `burst`, each bin's
/// arrivals taken at its end (so a span is never marked early).
pub fn over_spans(grid: &Grid<u32>, ceiling: f64, burst: u64, window_ns: u64) -> Vec<(f64, f64)> {
    if ceiling <= 0.0 {
        return Vec::new();
    }
    let interval = 1.0 / ceiling;
    let w = grid.width() as f64 / 1e9;
    let allowed = burst.max(1) as f64 * interval + 1e-9;
    // (bins in the plot's window, and in the horizon)
    let short = ((window_ns as f64 / 1e9 / w).round() as usize).max(1);
    let long = ((10.0 * interval / w).round() as usize).max(short);
    let over = |sum: u64, k: usize| sum as f64 > ceiling * k as f64 * w + 1.0 + 1e-9;
    let cells = grid.cells();
    let (mut tat, mut near, mut far) = (0.0_f64, 0_u64, 0_u64);
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (i, &n) in cells.iter().enumerate() {
        let (from, to) = (i as f64 * w, (i + 1) as f64 * w);
        if n > 0 {
            tat = tat.max(to) + f64::from(n) * interval;
        }
        near += u64::from(n);
        far += u64::from(n);
        if i >= short {
            near -= u64::from(cells[i - short]);
        }
        if i >= long {
            far -= u64::from(cells[i - long]);
        }
        if tat - to > allowed && (over(near, short) || over(far, long)) {
            match out.last_mut() {
                Some(last) if from <= last.1 => last.1 = to,
                _ => out.push((from, to)),
            }
        }
    }
    out
}

/// The colour a violation is marked in.
const VIOLATION: RGBColor = RGBColor(214, 39, 40);

impl RateFigure {
    /// Build from each backend's timeline (with series) and achieved rate, in table order.
    pub fn new(scenario: &str, seed: u64, ceiling: f64, runs: &[(&str, &Timeline, f64)]) -> RateFigure {
        let end = runs.iter().map(|r| r.1.end()).max().unwrap_or(0).max(1);
        let width = runs.iter().map(|r| r.1.arrivals().width()).max().unwrap_or(1);
        let window_ns = window_for(end, width);
        let end_s = end as f64 / 1e9;
        let mut lines: Vec<RateLine> = runs
            .iter()
            .map(|(b, tl, achieved)| {
                let raw = sliding(tl.arrivals(), window_ns);
                let over = over_spans(tl.arrivals(), ceiling, tl.header().map_or(1, |h| h.burst), window_ns);
                let (points, band) = mean_and_band(&raw);
                RateLine {
                    verdict: String::new(),
                    over,
                    backend: b.to_string(),
                    points,
                    band,
                    same_as: None,
                    achieved: *achieved,
                    fallback: tl
                        .fallback()
                        .iter()
                        .map(|&(s, e)| (s as f64 / 1e9, e.unwrap_or(tl.end()) as f64 / 1e9))
                        .collect(),
                    kills: tl.crashes().iter().map(|&t| t as f64 / 1e9).collect(),
                }
            })
            .collect();
        let keys: Vec<_> = lines.iter().map(|l| (&l.points, &l.band)).collect();
        let same = super::same_as(&keys);
        let names: Vec<String> = lines.iter().map(|l| l.backend.clone()).collect();
        for (l, s) in lines.iter_mut().zip(same) {
            l.same_as = s.map(|j| names[j].clone());
        }
        let bands = fault_bands(runs.iter().flat_map(|r| r.1.faults()), end_s);
        let effective = runs
            .iter()
            .filter_map(|(b, tl, _)| {
                let (g, which) = match tl.global_multiplier() {
                    Some(g) => (g, "backoff multiplier"),
                    None => (tl.per_process_multiplier()?.0, "mean per-process multiplier"),
                };
                let pts = super::multiplier::steps(g, tl.end());
                pts.iter().any(|p| p.1 > 1.0).then(|| EffectiveCeiling {
                    backend: b.to_string(),
                    which,
                    points: pts.iter().map(|&(t, m)| (t, ceiling / m.max(1.0))).collect(),
                })
            })
            .collect();
        let mut fig = RateFigure {
            scenario: scenario.to_string(),
            seed,
            ceiling,
            window_ns,
            end_s,
            lines,
            bands,
            effective,
            platforms: Vec::new(),
            platform_count: 0,
            unplaced: Vec::new(),
            violation: None,
        };
        fig.add_platforms(runs, end);
        fig
    }

    /// Show backend `label`'s verdicts in its legend entry, and mark the windows over the
    /// ceiling when its run fails the `ceiling` check (`fails_ceiling`); otherwise they are not
    /// drawn (a burst the design allows is not a violation).
    pub fn set_verdict(&mut self, label: &str, verdict: &str, fails_ceiling: bool) {
        for l in self.lines.iter_mut().filter(|l| l.backend == label) {
            l.verdict = verdict.to_string();
            if !fails_ceiling {
                l.over.clear();
            }
        }
    }

    /// With platforms: the per-platform panels, on a window for their own bins.
    fn add_platforms(&mut self, runs: &[(&str, &Timeline, f64)], end: u64) {
        let Some(first) = runs.iter().map(|r| r.1).find(|tl| !tl.platforms().is_empty()) else {
            return;
        };
        let burst = first.header().map_or(1, |h| h.burst);
        self.platform_count = first.platforms().len();
        // every platform grid padded to the end, at one common width
        let mut grids: Vec<Vec<Grid<u32>>> = runs
            .iter()
            .map(|r| {
                r.1.platform_arrivals()
                    .iter()
                    .map(|g| {
                        let mut g = g.clone();
                        g.extend_to(end);
                        g
                    })
                    .collect()
            })
            .collect();
        let width = grids.iter().flatten().map(|g| g.width()).max().unwrap_or(1);
        for g in grids.iter_mut().flatten() {
            g.coarsen_to(width);
        }
        self.window_ns = window_for(end, width);
        let end_s = end as f64 / 1e9;
        self.effective.clear();
        self.platforms = first
            .platforms()
            .iter()
            .take(MAX_PLATFORM_SERIES)
            .enumerate()
            .map(|(p, d)| PlatformPanel {
                name: d.name.clone(),
                limit: d.limit,
                burst: d.burst.unwrap_or(burst),
                serialized: d.serialized,
                lines: runs
                    .iter()
                    .zip(&grids)
                    .map(|((b, tl, _), gs)| {
                        let (points, band) = match gs.get(p) {
                            Some(g) => mean_and_band(&sliding(g, self.window_ns)),
                            None => (vec![(0.0, 0.0), (end_s, 0.0)], Vec::new()),
                        };
                        let total = tl.platform_totals().get(p).copied().unwrap_or(0);
                        PlatformLine {
                            backend: b.to_string(),
                            points,
                            band,
                            total,
                            mean: total as f64 / end_s,
                        }
                    })
                    .collect(),
            })
            .collect();
        self.unplaced = runs
            .iter()
            .filter(|r| r.1.unplaced_arrivals() > 0)
            .map(|r| (r.0.to_string(), r.1.unplaced_arrivals()))
            .collect();
    }

    fn has_fallback(&self) -> bool {
        self.lines.iter().any(|l| !l.fallback.is_empty())
    }

    /// Height of the strip of processes in fallback below the chart (0 without fallback).
    fn strip_height(&self) -> u32 {
        if self.has_fallback() {
            40 + 26 * self.lines.iter().filter(|l| !l.fallback.is_empty()).count() as u32
        } else {
            0
        }
    }

    /// The strip below the chart: when each backend had processes in fallback.
    fn draw_fallback_strip<DB: DrawingBackend>(&self, strip: &DrawingArea<DB, Shift>, xmax: f64) -> DrawResult<DB> {
        let fb_rows: Vec<&RateLine> = self.lines.iter().filter(|l| !l.fallback.is_empty()).collect();
        if !fb_rows.is_empty() {
            let n = fb_rows.len() as u32;
            let mut sc = ChartBuilder::on(strip)
                .margin_left(12)
                .margin_right(20)
                .margin_bottom(6)
                .x_label_area_size(0)
                .y_label_area_size(72)
                .caption("processes in fallback", text(LABEL, BLACK))
                .build_cartesian_2d(0.0..xmax, (0..n).into_segmented())?;
            sc.configure_mesh()
                .disable_mesh()
                .label_style(text(LABEL - 2, BLACK))
                .y_label_formatter(&|_| String::new())
                .draw()?;
            for (j, l) in fb_rows.iter().enumerate() {
                let c = colour(&l.backend);
                sc.draw_series(l.fallback.iter().map(|&(s, e)| {
                    Rectangle::new(
                        [
                            (s, SegmentValue::Exact(j as u32)),
                            (e.max(s + xmax * 0.002), SegmentValue::Exact(j as u32 + 1)),
                        ],
                        c.mix(0.7).filled(),
                    )
                }))?;
                // the row's name inside it, at the left: a variant's label is too long for the
                // axis
                sc.draw_series(std::iter::once(Text::new(
                    l.backend.clone(),
                    (xmax * 0.004, SegmentValue::Exact(j as u32 + 1)),
                    text(LABEL - 2, BLACK),
                )))?;
            }
        }

        Ok(())
    }

    /// The figure of a run with platforms: one panel per platform, each against its own limit.
    fn draw_platforms<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        let (main, legend) = split_legend(root);
        let h_main = main.dim_in_pixel().1;
        let (top, strip) = main.split_vertically(h_main - self.strip_height());
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
            "{}: arrival rate per platform, each against its own limit (seed {}{shown})",
            self.scenario, self.seed
        );
        let body = top.margin(8, 0, 0, 0).titled(&title, text(super::TITLE, BLACK))?;
        let cells = body.split_evenly((self.platforms.len(), 1));
        let xmax = if self.end_s > 0.0 { self.end_s } else { 1.0 };
        let kills: Vec<(f64, RGBColor)> = self
            .lines
            .iter()
            .flat_map(|l| l.kills.iter().map(move |&t| (t, colour(&l.backend))))
            .collect();
        let last = self.platforms.len() - 1;
        for (i, (panel, area)) in self.platforms.iter().zip(cells.iter()).enumerate() {
            let peak = panel
                .lines
                .iter()
                .flat_map(|l| l.points.iter().map(|p| p.1).chain(l.band.iter().map(|b| b.2)))
                .fold(0.0, f64::max);
            let ymax = nice_ceil(peak.max(panel.limit) * 1.08);
            let caption = format!(
                "{} ({}): limit {}/s, burst {}",
                panel.name,
                panel.walks(),
                num(panel.limit, 3),
                panel.burst
            );
            let mut chart = ChartBuilder::on(area)
                .caption(caption, text(LABEL + 2, BLACK))
                .margin(8)
                .margin_right(20)
                .x_label_area_size(if i == last { 44 } else { 28 })
                .y_label_area_size(72)
                .build_cartesian_2d(0.0..xmax, 0.0..ymax)?;
            let mut m = mesh(&mut chart, LABEL - 1, LABEL);
            m.y_desc(format!("arrivals/s (last {})", window_label(self.window_ns)))
                .x_label_formatter(&|v| num(*v, 3))
                .y_label_formatter(&|v| num(*v, 2))
                .x_labels(10)
                .y_labels(6);
            if i == last {
                m.x_desc("time (s)");
            }
            m.draw()?;
            draw_faults(&mut chart, &self.bands, &kills, 0.0, ymax)?;
            for l in panel.lines.iter().filter(|l| !l.band.is_empty()) {
                let mut poly: Vec<(f64, f64)> = l.band.iter().map(|b| (b.0, b.2)).collect();
                poly.extend(l.band.iter().rev().map(|b| (b.0, b.1)));
                chart.draw_series(std::iter::once(Polygon::new(
                    poly,
                    colour(&l.backend).mix(0.18).filled(),
                )))?;
            }
            let lines: Vec<_> = panel
                .lines
                .iter()
                .map(|l| (l.backend.as_str(), &l.points[..]))
                .collect();
            draw_stacked(&mut chart, &lines)?;
            chart.draw_series(DashedLineSeries::new(
                vec![(0.0, panel.limit), (xmax, panel.limit)],
                14,
                8,
                BLACK.stroke_width(2),
            ))?;
            let at = chart.backend_coord(&(xmax, panel.limit));
            super::boxed_label(area, at, &panel.limit_label())?;
        }
        self.draw_fallback_strip(&strip, xmax)?;

        let few = self.platforms.len() <= 3;
        let mut items: Vec<LegendItem> = self
            .lines
            .iter()
            .enumerate()
            .map(|(j, l)| {
                let label = if few {
                    let means: Vec<String> = self
                        .platforms
                        .iter()
                        .filter_map(|p| p.lines.get(j))
                        .zip(&self.platforms)
                        .map(|(pl, p)| format!("{} {}/s", p.name, num(pl.mean, 2)))
                        .collect();
                    format!("{} (mean: {})", l.backend, means.join(", "))
                } else {
                    format!("{} (achieved {}/s over all platforms)", l.backend, num(l.achieved, 1))
                };
                let label = if l.verdict.is_empty() {
                    label
                } else {
                    format!("{label}: {}", l.verdict)
                };
                LegendItem::new(Swatch::Line(colour(&l.backend)), label)
            })
            .collect();
        items.push(LegendItem::new(
            Swatch::Dashed(BLACK),
            "the platform's limit: its own destination's ceiling (no fleet-wide one)",
        ));
        let banded: Vec<&str> = (self.platforms.iter().flat_map(|p| &p.lines))
            .filter(|l| !l.band.is_empty())
            .map(|l| l.backend.as_str())
            .collect();
        if !banded.is_empty() {
            items.push(band_item(&banded));
        }
        if !self.bands.is_empty() {
            items.push(LegendItem::new(
                Swatch::Band(super::FAULT_GREY, super::FAULT_ALPHA * 2.0),
                "fault window (kind named at its top)",
            ));
        }
        if !kills.is_empty() {
            items.push(LegendItem::new(
                Swatch::Line(RGBColor(90, 90, 90)),
                "kill (thin vertical line, in the backend's colour)",
            ));
        }
        if self.has_fallback() {
            items.push(fallback_item(&backends_with(&self.lines, |l| !l.fallback.is_empty())));
        }
        for (b, n) in &self.unplaced {
            items.push(LegendItem::new(
                Swatch::Blank,
                format!("{b}: {n} arrivals before any platform event (not drawn)"),
            ));
        }
        draw_legend(&legend, 56, &items)
    }
}

impl Figure for RateFigure {
    fn size(&self) -> (u32, u32) {
        if self.platforms.is_empty() {
            (1200, 640)
        } else {
            let panels = 80 + 270 * self.platforms.len() as u32 + self.strip_height();
            (1200, panels.max(640))
        }
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        if !self.platforms.is_empty() {
            return self.draw_platforms(root);
        }
        let (main, legend) = split_legend(root);
        let fb_rows: Vec<&RateLine> = self.lines.iter().filter(|l| !l.fallback.is_empty()).collect();
        let strip_h = if self.has_fallback() {
            40 + 26 * fb_rows.len() as u32
        } else {
            0
        };
        let (h_main, _) = (main.dim_in_pixel().1, ());
        let (top, strip) = main.split_vertically(h_main - strip_h);

        let peak = self
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1).chain(l.band.iter().map(|b| b.2)))
            .fold(0.0, f64::max);
        let ymax = nice_ceil(peak.max(self.ceiling) * 1.08);
        let xmax = if self.end_s > 0.0 { self.end_s } else { 1.0 };
        let title = format!(
            "{}: arrival rate at the destination ({} sliding window, seed {})",
            self.scenario,
            window_label(self.window_ns),
            self.seed
        );
        let mut chart = main_chart(&top, title).build_cartesian_2d(0.0..xmax, 0.0..ymax)?;
        mesh(&mut chart, LABEL, AXIS)
            .x_desc("time (s)")
            .y_desc(format!("arrivals per second (last {})", window_label(self.window_ns)))
            .x_label_formatter(&|v| num(*v, 3))
            .y_label_formatter(&|v| num(*v, 2))
            .draw()?;
        let kills: Vec<(f64, RGBColor)> = self
            .lines
            .iter()
            .flat_map(|l| l.kills.iter().map(move |&t| (t, colour(&l.backend))))
            .collect();
        draw_faults(&mut chart, &self.bands, &kills, 0.0, ymax)?;
        if let Some((a, b, _)) = &self.violation {
            // at least 3 px wide, as a fault window is (a violation can be one instant)
            let px = xmax / f64::from(top.dim_in_pixel().0.max(1));
            let (a, b) = (a.min(b - 3.0 * px).max(0.0), *b);
            chart.draw_series(std::iter::once(Rectangle::new(
                [(a, 0.0), (b, ymax)],
                VIOLATION.mix(0.35).filled(),
            )))?;
        }
        for l in self.lines.iter().filter(|l| !l.band.is_empty() && l.same_as.is_none()) {
            let mut poly: Vec<(f64, f64)> = l.band.iter().map(|b| (b.0, b.2)).collect();
            poly.extend(l.band.iter().rev().map(|b| (b.0, b.1)));
            chart.draw_series(std::iter::once(Polygon::new(
                poly,
                colour(&l.backend).mix(0.18).filled(),
            )))?;
        }
        let lines: Vec<_> = self.lines.iter().map(|l| (l.backend.as_str(), &l.points[..])).collect();
        draw_stacked(&mut chart, &lines)?;
        chart.draw_series(DashedLineSeries::new(
            vec![(0.0, self.ceiling), (xmax, self.ceiling)],
            14,
            8,
            BLACK.stroke_width(2),
        ))?;
        let at = chart.backend_coord(&(xmax, self.ceiling));
        super::boxed_label(&top, at, &format!("ceiling {}/s", num(self.ceiling, 3)))?;
        for e in &self.effective {
            chart.draw_series(DashedLineSeries::new(
                e.points.iter().copied(),
                5,
                4,
                colour(&e.backend).stroke_width(2),
            ))?;
        }

        // the windows over the ceiling of each run that fails it: a bar along the bottom, one
        // row per such run, in its colour (at least 3 px wide: one window can be an instant)
        let px = xmax / f64::from(top.dim_in_pixel().0.max(1));
        let marked: Vec<&RateLine> = self.lines.iter().filter(|l| !l.over.is_empty()).collect();
        for (row, l) in marked.iter().enumerate() {
            let y0 = ymax * 0.025 * row as f64;
            let y1 = y0 + ymax * 0.02;
            let c = colour(&l.backend);
            chart.draw_series(
                l.over
                    .iter()
                    .map(|&(a, b)| Rectangle::new([(a.min(b - 3.0 * px).max(0.0), y0), (b, y1)], c.mix(0.9).filled())),
            )?;
        }

        self.draw_fallback_strip(&strip, xmax)?;

        let mut items: Vec<LegendItem> = self
            .lines
            .iter()
            .map(|l| {
                let same = l
                    .same_as
                    .as_ref()
                    .map_or(String::new(), |o| format!("; same line as {o}"));
                let verdict = if l.verdict.is_empty() {
                    String::new()
                } else {
                    format!(": {}", l.verdict)
                };
                LegendItem::new(
                    Swatch::Line(colour(&l.backend)),
                    format!("{} (achieved {}/s{same}){verdict}", l.backend, num(l.achieved, 1)),
                )
            })
            .collect();
        if !marked.is_empty() {
            // one bar per failing run, in its colour (its legend entry says FAIL): the entry
            // does not list them again, which would crowd the legend out of its panel
            items.push(LegendItem::new(
                Swatch::Band(colour(&marked[0].backend), 0.9),
                format!(
                    "over the ceiling: where arrivals outran it by more than the burst allowed (the ceiling check's bucket overdrawn; a bar along the bottom per run failing the ceiling, in its colour: {})",
                    marked.len()
                ),
            ));
        }
        items.push(LegendItem::new(
            Swatch::Dashed(BLACK),
            format!("ceiling {}/s", num(self.ceiling, 3)),
        ));
        for e in &self.effective {
            let whose = if self.lines.len() == 1 {
                String::new()
            } else {
                format!("{}: ", e.backend)
            };
            items.push(LegendItem::new(
                Swatch::Dashed(colour(&e.backend)),
                format!(
                    "{whose}effective ceiling = ceiling / {} (the pace the backoff allows)",
                    e.which
                ),
            ));
        }
        let banded = backends_with(&self.lines, |l| !l.band.is_empty());
        if !banded.is_empty() {
            items.push(band_item(&banded));
        }
        if let Some((a, b, what)) = &self.violation {
            items.push(LegendItem::new(
                Swatch::Band(VIOLATION, 0.35),
                format!("violation: {what} ({} s to {} s)", num(*a, 3), num(*b, 3)),
            ));
        }
        if !self.bands.is_empty() {
            items.push(LegendItem::new(
                Swatch::Band(super::FAULT_GREY, super::FAULT_ALPHA * 2.0),
                "fault window (kind named at its top)",
            ));
        }
        if !kills.is_empty() {
            items.push(LegendItem::new(
                Swatch::Line(RGBColor(90, 90, 90)),
                "kill (thin vertical line, in the backend's colour)",
            ));
        }
        if !fb_rows.is_empty() {
            let fb: Vec<&str> = fb_rows.iter().map(|l| l.backend.as_str()).collect();
            items.push(fallback_item(&fb));
        }
        draw_legend(&legend, 56, &items)
    }
}

/// The backends of the lines that `has`, in order.
fn backends_with<'a>(lines: impl IntoIterator<Item = &'a RateLine>, has: impl Fn(&RateLine) -> bool) -> Vec<&'a str> {
    lines
        .into_iter()
        .filter(|l| has(l))
        .map(|l| l.backend.as_str())
        .collect()
}

/// Each backend's colour as `alpha` of it over white, in order, once each: a legend swatch for
/// marks drawn in their backend's colour.
fn backend_ramp(backends: &[&str], alpha: f64) -> Swatch {
    let mut seen: Vec<&str> = Vec::new();
    for b in backends {
        if !seen.contains(b) {
            seen.push(b);
        }
    }
    Swatch::Ramp(seen.iter().map(|b| tint(colour(b), 1.0 - alpha)).collect())
}

/// The legend entry of the lowest-to-highest bands (as `draw_stacked` fills them).
fn band_item(backends: &[&str]) -> LegendItem {
    LegendItem::new(
        backend_ramp(backends, 0.18),
        "band, in its backend's colour: lowest to highest window in each pixel column; line: their mean",
    )
}

/// The legend entry of the fallback strip (as drawn below the plot).
fn fallback_item(backends: &[&str]) -> LegendItem {
    LegendItem::new(
        backend_ramp(backends, 0.7),
        "a process in fallback (strip below the plot, in its backend's colour)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows() {
        assert_eq!(window_for(780_000_000, 1_000_000), 100_000_000);
        assert_eq!(window_for(60_000_000_000, 10_000_000), 1_000_000_000);
        assert_eq!(window_for(3_000_000_000, 100_000_000), 500_000_000);
        assert_eq!(window_label(100_000_000), "100 ms");
        assert_eq!(window_label(1_000_000_000), "1 s");
    }

    #[test]
    fn sliding_counts_per_second() {
        let mut g: Grid<u32> = Grid::new(100_000_000, 100);
        for t in [0, 50_000_000, 150_000_000, 950_000_000, 1_050_000_000] {
            *g.at(t) += 1;
        }
        let s = sliding(&g, 1_000_000_000);
        assert_eq!(s[0], (0.0, 0.0));
        assert_eq!(s[1], (0.1, 2.0));
        assert_eq!(s[10], (1.0, 4.0));
        assert_eq!(s[11], (1.1, 3.0)); // the first bin left the window
    }
}

#[cfg(test)]
mod over_tests {
    use super::over_spans;
    use crate::timeline::Grid;

    fn grid(counts: &[u32], width_ns: u64) -> Grid<u32> {
        let mut g = Grid::new(width_ns, 10_000);
        for (i, &n) in counts.iter().enumerate() {
            *g.at(i as u64 * width_ns) += n;
        }
        g
    }

    #[test]
    fn a_burst_over_the_allowed_one_is_marked_where_it_lands() {
        // 10/s, burst 2, bins of 0.1 s: one arrival a bin is paced; five at once overdraw the
        // bucket, and the bin they land in holds more than 10 x 0.1 + 1
        let g = grid(&[1, 1, 5, 0, 0, 0, 0, 1, 1], 100_000_000);
        let s = over_spans(&g, 10.0, 2, 100_000_000);
        assert_eq!(s.len(), 1, "{s:?}");
        assert!((s[0].0 - 0.2).abs() < 1e-9 && (s[0].1 - 0.3).abs() < 1e-9, "{s:?}");
        assert!(over_spans(&g, 10.0, 5, 100_000_000).is_empty());
        assert!(over_spans(&grid(&[1; 9], 100_000_000), 10.0, 1, 100_000_000).is_empty());
    }

    #[test]
    fn a_sustained_excess_no_window_shows_is_marked() {
        // one arrival a second at a 0.5/s ceiling, burst 2: never more than one in a 1 s
        // window, yet over the ceiling (marked once 20 s, ten intervals, hold 12)
        let g = grid(&[1; 30], 1_000_000_000);
        let s = over_spans(&g, 0.5, 2, 1_000_000_000);
        assert_eq!(s.len(), 1, "{s:?}");
        assert!(s[0].0 <= 12.0 && (s[0].1 - 30.0).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn the_paced_stretch_after_an_excess_is_not_marked() {
        // twice the ceiling for 40 s, then at the ceiling for 60 s: the debt stands, but only
        // the excess is marked (and up to a horizon, 20 s, after it)
        let mut counts = vec![1_u32; 40];
        counts.extend((0..60).map(|i| u32::from(i % 2 == 0)));
        let s = over_spans(&grid(&counts, 1_000_000_000), 0.5, 2, 1_000_000_000);
        assert_eq!(s.len(), 1, "{s:?}");
        assert!(s[0].1 <= 60.0, "{s:?}");
    }
}
