//! Download jobs (`[jobs]` scenarios): each download event's life, one row per source, one
//! panel per backend, drawn only for runs with `job_event`s.
//!
//! Along each source's row (x: virtual time), every event the tick created is drawn from its
//! `pending` on:
//!
//! - a thin grey bar while it is pending (queued, re-enqueued on the lock, or delivered again
//!   after a kill);
//! - a thick bar for each walk, from `running` to the last fetch its process made for it,
//!   coloured by how the event ended: `complete`, `partial`, `timeout`, `soft_limit`, red when
//!   it was never finalised (stranded), blue when still running at the end of the run;
//! - after the walk, until the event closed: the walk's colour (phase 3, persisting), or pale
//!   red when the event was left `running` with no walk, until the recovery sweep strands it;
//! - a marker where it closed: a dot in its reason's colour when finalised, a red cross when
//!   stranded by the sweep (whose next tick re-runs the source with a new event).
//!
//! Backfill state changes to `complete` or `stalled` are marked and named above the row;
//! tasks delivered again after a kill are marked with a triangle. Fault windows are shaded
//! and kills marked as in every figure. The caption counts the events by how they closed.

use super::palette::colour;
use super::{
    DrawResult, Figure, LABEL, LegendItem, Mark, Swatch, TITLE, draw_faults, draw_legend, draw_mark, fault_bands, mesh,
    num, split_legend, text,
};
use crate::timeline::{JobLife, Timeline};
use crate::trace::{BackfillState, FaultKind, JobState};
use plotters::coord::Shift;
use plotters::prelude::*;

/// Most source rows drawn per panel; the caption says how many more there are.
pub const MAX_ROWS: usize = 24;

/// What a stretch of an event's life is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Created, not walking: queued, re-enqueued on the lock, or delivered again.
    Pending,
    /// Walking, or running, and still open at the end of the run.
    Running,
    /// Finalised `complete` (the walk reached the bottom).
    Complete,
    /// Finalised `partial` (a chunk that advanced: status ok).
    Partial,
    /// Finalised `timeout` (the subprocess budget: an error).
    Timeout,
    /// Finalised `soft_limit` (the task caught its soft time limit).
    SoftLimit,
    /// A walk of an event that was never finalised: the sweep stranded it.
    Stranded,
    /// Left `running` with no walk, not finalised: waiting for the sweep.
    LeftRunning,
}

impl Kind {
    /// The kind of a walk of an event that closed in `state` (`None`: still open).
    pub fn of(state: Option<JobState>) -> Kind {
        match state {
            None => Kind::Running,
            Some(JobState::Complete) => Kind::Complete,
            Some(JobState::Partial) => Kind::Partial,
            Some(JobState::Timeout) => Kind::Timeout,
            Some(JobState::SoftLimit) => Kind::SoftLimit,
            Some(JobState::Stranded) => Kind::Stranded,
            // not closing states: an event never closes in them
            Some(_) => Kind::Running,
        }
    }

    /// Its colour.
    pub fn colour(self) -> RGBColor {
        match self {
            Kind::Pending => RGBColor(150, 150, 150),
            Kind::Running => RGBColor(31, 119, 180),
            Kind::Complete => RGBColor(44, 160, 44),
            Kind::Partial => RGBColor(23, 170, 170),
            Kind::Timeout => RGBColor(255, 127, 14),
            Kind::SoftLimit => RGBColor(148, 103, 189),
            Kind::Stranded | Kind::LeftRunning => RGBColor(214, 39, 40),
        }
    }

    /// Its legend text.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Pending => "pending: queued, re-enqueued on the lock, or delivered again",
            Kind::Running => "walk, still running at the end of the run",
            Kind::Complete => "walk, finalised complete (reached the bottom)",
            Kind::Partial => "walk, finalised partial (a chunk that advanced: ok)",
            Kind::Timeout => "walk, finalised timeout (the subprocess budget)",
            Kind::SoftLimit => "walk, finalised soft_limit (caught soft time limit)",
            Kind::Stranded => "walk never finalised (cut off by the soft limit or a kill)",
            Kind::LeftRunning => "left running with no walk, until the sweep strands it",
        }
    }
}

/// A stretch of an event's life, seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    /// Start, s.
    pub from: f64,
    /// End, s.
    pub to: f64,
    /// What it is.
    pub kind: Kind,
}

/// One download event, as drawn.
#[derive(Clone, Debug, PartialEq)]
pub struct EventLife {
    /// The event's number.
    pub event: u32,
    /// Its stretches, in time order.
    pub segments: Vec<Segment>,
    /// Where and how it closed (`None`: open at the end of the run).
    pub closed: Option<(f64, JobState)>,
    /// Its task delivered again after a kill, s.
    pub redelivered: Vec<f64>,
}

impl EventLife {
    /// The drawing of `j` in a run ending at `end` ns.
    pub fn of(j: &JobLife, end: u64) -> EventLife {
        let s = |t: u64| t as f64 / 1e9;
        let close = j.closed.map_or(end, |c| c.0).max(j.pending);
        let state = j.closed.map(|c| c.1);
        let walk = Kind::of(state);
        let mut segments = Vec::new();
        let mut cursor = j.pending;
        for w in &j.walks {
            if w.start > cursor {
                segments.push(Segment {
                    from: s(cursor),
                    to: s(w.start),
                    kind: Kind::Pending,
                });
            }
            let stop = w.fetch_end().min(close);
            segments.push(Segment {
                from: s(w.start),
                to: s(stop),
                kind: walk,
            });
            cursor = stop;
        }
        if j.walks.is_empty() {
            segments.push(Segment {
                from: s(j.pending),
                to: s(close),
                kind: Kind::Pending,
            });
        } else if close > cursor {
            // after the last walk's fetches, until the event closed (or the run ended)
            let still_on_it = j.walks.last().is_some_and(|w| w.left.is_none());
            let kind = match state {
                Some(JobState::Stranded) => Kind::LeftRunning,
                None if !still_on_it => Kind::LeftRunning,
                _ => walk,
            };
            segments.push(Segment {
                from: s(cursor),
                to: s(close),
                kind,
            });
        }
        EventLife {
            event: j.event,
            segments,
            closed: j.closed.map(|(t, st)| (s(t), st)),
            redelivered: j.redelivered.iter().map(|&t| s(t)).collect(),
        }
    }

    /// Stranded by the sweep.
    pub fn stranded(&self) -> bool {
        matches!(self.closed, Some((_, JobState::Stranded)))
    }

    /// Finalised by its task (a final state).
    pub fn finalised(&self) -> bool {
        self.closed.is_some_and(|(_, st)| st.is_final())
    }
}

/// One source's row.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceRow {
    /// The source.
    pub source: u32,
    /// Its events, in creation order.
    pub events: Vec<EventLife>,
    /// Its backfill reaching `complete` or `stalled`: `(time s, state, chunks)`.
    pub backfill: Vec<(f64, BackfillState, u32)>,
}

impl SourceRow {
    /// The longest run of consecutive stranded events with none finalised in between.
    pub fn longest_strand_streak(&self) -> usize {
        let (mut run, mut best) = (0, 0);
        for e in &self.events {
            if e.stranded() {
                run += 1;
                best = best.max(run);
            } else if e.finalised() {
                run = 0;
            }
        }
        best
    }
}

/// One backend's panel.
#[derive(Clone, Debug, PartialEq)]
pub struct JobsPanel {
    /// Backend.
    pub backend: String,
    /// The rows drawn (the first [`MAX_ROWS`] sources, in source order).
    pub rows: Vec<SourceRow>,
    /// Sources with events beyond [`MAX_ROWS`], not drawn.
    pub hidden_sources: usize,
    /// Events past the timeline's cap, not drawn.
    pub dropped: u64,
    /// Re-enqueues on the lock, in all.
    pub requeues: u64,
    /// Kill times, s.
    pub kills: Vec<f64>,
}

impl JobsPanel {
    /// Every event drawn.
    pub fn events(&self) -> impl Iterator<Item = &EventLife> {
        self.rows.iter().flat_map(|r| &r.events)
    }

    /// The caption: the backend, then its events by how they closed.
    pub fn caption(&self) -> String {
        let n = self.events().count();
        let mut by: Vec<(JobState, usize)> = Vec::new();
        for e in self.events() {
            if let Some((_, st)) = e.closed {
                match by.iter_mut().find(|b| b.0 == st) {
                    Some(b) => b.1 += 1,
                    None => by.push((st, 1)),
                }
            }
        }
        by.sort();
        let open = self.events().filter(|e| e.closed.is_none()).count();
        let mut parts: Vec<String> = by.iter().map(|(st, k)| format!("{k} {st}")).collect();
        if open > 0 {
            parts.push(format!("{open} open at the end"));
        }
        let streak = self
            .rows
            .iter()
            .map(SourceRow::longest_strand_streak)
            .max()
            .unwrap_or(0);
        let mut c = format!(
            "{}: {n} event{} ({})",
            self.backend,
            if n == 1 { "" } else { "s" },
            parts.join(", ")
        );
        if streak > 1 {
            c.push_str(&format!("; {streak} strands in a row"));
        }
        if self.hidden_sources > 0 {
            c.push_str(&format!("; {} more sources not drawn", self.hidden_sources));
        }
        if self.dropped > 0 {
            c.push_str(&format!("; {} later events not kept", self.dropped));
        }
        c
    }
}

/// The jobs figure of one scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct JobsFigure {
    /// Scenario.
    pub scenario: String,
    /// Seed of the series.
    pub seed: u64,
    /// End of the longest run, s.
    pub end_s: f64,
    /// One panel per backend whose run has job events, in table order.
    pub panels: Vec<JobsPanel>,
    /// Fault bands.
    pub bands: Vec<(FaultKind, f64, f64)>,
}

/// Row height, pixels.
fn row_height(rows: usize) -> u32 {
    if rows <= 4 { 64 } else { 36 }
}

/// Pixel height of a panel of `rows` rows.
fn panel_height(rows: usize) -> u32 {
    96 + row_height(rows) * rows.max(1) as u32
}

impl JobsFigure {
    /// Build from each backend's timeline (with series), in table order; `None` when no run has
    /// job events.
    pub fn new(scenario: &str, seed: u64, runs: &[(&str, &Timeline, f64)]) -> Option<JobsFigure> {
        let end = runs.iter().map(|r| r.1.end()).max().unwrap_or(0).max(1);
        let panels: Vec<JobsPanel> = runs
            .iter()
            .filter(|r| !r.1.jobs().is_empty())
            .map(|(b, tl, _)| {
                let mut sources: Vec<u32> = tl.jobs().iter().map(|j| j.source).collect();
                sources.sort_unstable();
                sources.dedup();
                let hidden = sources.len().saturating_sub(MAX_ROWS);
                sources.truncate(MAX_ROWS);
                let rows = sources
                    .iter()
                    .map(|&src| SourceRow {
                        source: src,
                        events: tl
                            .jobs()
                            .iter()
                            .filter(|j| j.source == src)
                            .map(|j| EventLife::of(j, tl.end()))
                            .collect(),
                        backfill: tl
                            .backfill()
                            .iter()
                            .filter(|m| m.source == src && m.state != BackfillState::Running)
                            .map(|m| (m.t as f64 / 1e9, m.state, m.chunks))
                            .collect(),
                    })
                    .collect();
                JobsPanel {
                    backend: b.to_string(),
                    rows,
                    hidden_sources: hidden,
                    dropped: tl.jobs_dropped(),
                    requeues: tl.jobs().iter().map(|j| j.requeues as u64).sum(),
                    kills: tl.crashes().iter().map(|&t| t as f64 / 1e9).collect(),
                }
            })
            .collect();
        if panels.is_empty() {
            return None;
        }
        let end_s = end as f64 / 1e9;
        Some(JobsFigure {
            scenario: scenario.to_string(),
            seed,
            end_s,
            panels,
            bands: fault_bands(runs.iter().flat_map(|r| r.1.faults()), end_s),
        })
    }

    /// The kinds drawn, in legend order.
    fn kinds(&self) -> Vec<Kind> {
        let mut seen: Vec<Kind> = self
            .panels
            .iter()
            .flat_map(|p| p.events())
            .flat_map(|e| e.segments.iter().map(|s| s.kind))
            .collect();
        seen.sort();
        seen.dedup();
        seen
    }
}

impl Figure for JobsFigure {
    fn size(&self) -> (u32, u32) {
        let h: u32 = self.panels.iter().map(|p| panel_height(p.rows.len())).sum();
        (1200, (60 + h).max(super::legend_height(56, &self.legend_items()) + 16))
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        let (main, legend) = split_legend(root);
        let title = format!(
            "{}: download events per source, tick to close (seed {})",
            self.scenario, self.seed
        );
        let body = main.margin(8, 0, 0, 0).titled(&title, text(TITLE, BLACK))?;
        let mut rest = body;
        let xmax = if self.end_s > 0.0 { self.end_s } else { 1.0 };
        for (i, panel) in self.panels.iter().enumerate() {
            let area = if i + 1 == self.panels.len() {
                rest.clone()
            } else {
                let (a, b) = rest.split_vertically(panel_height(panel.rows.len()));
                rest = b;
                a
            };
            self.draw_panel(&area, panel, xmax)?;
        }

        draw_legend(&legend, 56, &self.legend_items())
    }
}

impl JobsFigure {
    /// The legend: the kinds drawn, then the markers and marks present.
    fn legend_items(&self) -> Vec<LegendItem> {
        let mut items: Vec<LegendItem> = Vec::new();
        for k in self.kinds() {
            let swatch = match k {
                Kind::Pending => Swatch::Line(k.colour()),
                Kind::LeftRunning => Swatch::Band(k.colour(), 0.3),
                _ => Swatch::Band(k.colour(), 1.0),
            };
            items.push(LegendItem::new(swatch, k.label()));
        }
        let events = || self.panels.iter().flat_map(|p| p.events());
        if events().any(|e| e.finalised()) {
            items.push(LegendItem::new(
                Swatch::Mark(Mark::Dot, RGBColor(120, 120, 120)),
                "finalised by its task (dot in its reason's colour)",
            ));
        }
        if events().any(|e| e.stranded()) {
            items.push(LegendItem::new(
                Swatch::Mark(Mark::Cross, Kind::Stranded.colour()),
                "stranded by the recovery sweep; the next tick re-runs the source",
            ));
        }
        if self.panels.iter().flat_map(|p| &p.rows).any(|r| !r.backfill.is_empty()) {
            items.push(LegendItem::new(
                Swatch::Mark(Mark::Diamond, RGBColor(90, 90, 90)),
                "the source's backfill ends: complete or stalled",
            ));
        }
        if events().any(|e| !e.redelivered.is_empty()) {
            items.push(LegendItem::new(
                Swatch::Mark(Mark::Triangle, BLACK),
                "its task delivered again after a kill",
            ));
        }
        if !self.bands.is_empty() {
            items.push(LegendItem::new(
                Swatch::Band(super::FAULT_GREY, super::FAULT_ALPHA * 2.0),
                "fault window (kind named at its top)",
            ));
        }
        if self.panels.iter().any(|p| !p.kills.is_empty()) {
            items.push(LegendItem::new(
                Swatch::Line(RGBColor(90, 90, 90)),
                "kill (thin vertical line, in the backend's colour)",
            ));
        }
        items
    }

    fn draw_panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        panel: &JobsPanel,
        xmax: f64,
    ) -> DrawResult<DB> {
        let n = panel.rows.len().max(1);
        let ymax = n as f64;
        let mut chart = ChartBuilder::on(area)
            .caption(panel.caption(), text(LABEL + 2, colour(&panel.backend)))
            .margin(8)
            .margin_right(20)
            .x_label_area_size(44)
            .y_label_area_size(84)
            .build_cartesian_2d(0.0..xmax, 0.0..ymax)?;
        mesh(&mut chart, LABEL - 1, LABEL)
            .disable_y_mesh()
            .y_labels(0)
            .x_desc("time (s)")
            .x_label_formatter(&|v| num(*v, 3))
            .x_labels(10)
            .draw()?;
        let kills: Vec<(f64, RGBColor)> = panel.kills.iter().map(|&t| (t, colour(&panel.backend))).collect();
        draw_faults(&mut chart, &self.bands, &kills, 0.0, ymax)?;

        // x units per pixel, for a least visible width
        let (px0, _) = chart.backend_coord(&(0.0, 0.0));
        let (px1, _) = chart.backend_coord(&(xmax, 0.0));
        let per_px = xmax / (px1 - px0).max(1) as f64;
        let min_w = 3.0 * per_px;
        let base = area.get_base_pixel();
        for (r, row) in panel.rows.iter().enumerate() {
            let mid = ymax - r as f64 - 0.5;
            // row label, left of the plot area
            let (lx, ly) = chart.backend_coord(&(0.0, mid));
            let label = format!("source {}", row.source);
            let style = text(LABEL - 1, BLACK);
            let (w, h) = area.estimate_text_size(&label, &style)?;
            area.draw(&Text::new(
                label,
                (lx - base.0 - w as i32 - 8, ly - base.1 - h as i32 / 2),
                style,
            ))?;
            // a faint guide along the row
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(0.0, mid), (xmax, mid)],
                RGBColor(235, 235, 235).stroke_width(1),
            )))?;
            for e in &row.events {
                for s in &e.segments {
                    // a walk too short to see is drawn min_w wide, inside the run
                    let (from, to) = if s.kind != Kind::Pending && s.to - s.from < min_w {
                        let from = s.from.min(xmax - min_w).max(0.0);
                        (from, from + min_w)
                    } else {
                        (s.from, s.to)
                    };
                    let c = s.kind.colour();
                    match s.kind {
                        Kind::Pending => {
                            chart.draw_series(std::iter::once(Rectangle::new(
                                [(from, mid - 0.05), (to, mid + 0.05)],
                                c.mix(0.8).filled(),
                            )))?;
                        }
                        Kind::LeftRunning => {
                            chart.draw_series(std::iter::once(Rectangle::new(
                                [(from, mid - 0.28), (to, mid + 0.28)],
                                c.mix(0.22).filled(),
                            )))?;
                            chart.draw_series(std::iter::once(Rectangle::new(
                                [(from, mid - 0.28), (to, mid + 0.28)],
                                c.stroke_width(1),
                            )))?;
                        }
                        _ => {
                            chart.draw_series(std::iter::once(Rectangle::new(
                                [(from, mid - 0.28), (to, mid + 0.28)],
                                c.filled(),
                            )))?;
                        }
                    }
                }
            }
            // markers over the bars
            for e in &row.events {
                if let Some((t, st)) = e.closed {
                    let at = chart.backend_coord(&(t, mid));
                    if st == crate::trace::JobState::Stranded {
                        draw_mark(area, at, Mark::Cross, Kind::Stranded.colour())?;
                    } else {
                        draw_mark(area, at, Mark::Dot, Kind::of(Some(st)).colour())?;
                    }
                }
                for &t in &e.redelivered {
                    let at = chart.backend_coord(&(t, mid + 0.4));
                    draw_mark(area, at, Mark::Triangle, BLACK)?;
                }
            }
            for &(t, st, chunks) in &row.backfill {
                let at = chart.backend_coord(&(t, mid + 0.4));
                draw_mark(area, at, Mark::Diamond, RGBColor(90, 90, 90))?;
                let label = format!("backfill {st} ({chunks} chunk{})", if chunks == 1 { "" } else { "s" });
                let style = text(LABEL - 2, RGBColor(50, 50, 50));
                let (w, h) = area.estimate_text_size(&label, &style)?;
                // right of the mark, or left of it near the right edge
                let x = if at.0 + 10 + w as i32 > px1 {
                    at.0 - 10 - w as i32
                } else {
                    at.0 + 10
                };
                area.draw(&Text::new(label, (x - base.0, at.1 - base.1 - h as i32 / 2), style))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::Walk;

    const S: u64 = 1_000_000_000;

    fn life(walks: Vec<Walk>, closed: Option<(u64, JobState)>) -> JobLife {
        JobLife {
            source: 0,
            event: 0,
            pending: 0,
            walks,
            closed,
            requeues: 0,
            redelivered: Vec::new(),
        }
    }

    fn walk(start: u64, last: u64, left: Option<u64>) -> Walk {
        Walk {
            pid: 0,
            start: start * S,
            last_fetch: Some(last * S),
            left: left.map(|t| t * S),
        }
    }

    fn kinds(e: &EventLife) -> Vec<(f64, f64, Kind)> {
        e.segments.iter().map(|s| (s.from, s.to, s.kind)).collect()
    }

    /// A walk cut at 900 s whose event the sweep strands at 1800 s: red walk, then left
    /// running until the sweep.
    #[test]
    fn a_stranded_event_shows_its_walk_then_left_running() {
        let e = EventLife::of(
            &life(vec![walk(10, 900, None)], Some((1800 * S, JobState::Stranded))),
            4000 * S,
        );
        assert_eq!(
            kinds(&e),
            vec![
                (0.0, 10.0, Kind::Pending),
                (10.0, 900.0, Kind::Stranded),
                (900.0, 1800.0, Kind::LeftRunning)
            ]
        );
        assert!(e.stranded() && !e.finalised());
    }

    /// Finalised 5 s after its walk: the whole of it in the reason's colour.
    #[test]
    fn a_finalised_event_is_its_reasons_colour() {
        let e = EventLife::of(
            &life(vec![walk(0, 1170, Some(1175))], Some((1175 * S, JobState::Timeout))),
            4000 * S,
        );
        assert_eq!(
            kinds(&e),
            vec![(0.0, 1170.0, Kind::Timeout), (1170.0, 1175.0, Kind::Timeout)]
        );
        assert!(e.finalised());
    }

    /// Open at the end: running while its process is on it, left running once it is not.
    #[test]
    fn an_open_event_runs_or_is_left_running() {
        let on = EventLife::of(&life(vec![walk(0, 50, None)], None), 100 * S);
        assert_eq!(kinds(&on).last().unwrap().2, Kind::Running);
        let off = EventLife::of(&life(vec![walk(0, 50, Some(60))], None), 100 * S);
        assert_eq!(kinds(&off).last().unwrap().2, Kind::LeftRunning);
        let never = EventLife::of(&life(Vec::new(), None), 100 * S);
        assert_eq!(kinds(&never), vec![(0.0, 100.0, Kind::Pending)]);
    }
}
