//! The comparison tables: one set of formatted cells, printed to the terminal as aligned text
//! and written into `index.md` as Markdown, so both show exactly the same numbers.

use crate::run::compare::{Row, ScenarioRuns, SeedStats};
use crate::stats::MeanCi;

/// A table of formatted cells.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// Column headers.
    pub headers: Vec<String>,
    /// Rows of cells, one per header.
    pub rows: Vec<Vec<String>>,
    /// Columns aligned left (the rest align right).
    pub left: Vec<bool>,
}

/// Column keys of the comparison table, in order (`stall_s` only when some run had a kill).
pub const COLUMNS: &[(&str, &str)] = &[
    ("backend", "backend"),
    ("fetches", "fetches"),
    ("last", "last s"),
    ("rate", "rate/s"),
    ("ceiling", "ceiling/s"),
    ("util", "util"),
    ("max1s", "max 1s/bound"),
    ("burst", "burst"),
    ("slots", "slots"),
    ("s429", "429s"),
    ("p50", "p50 ms"),
    ("p95", "p95 ms"),
    ("p99", "p99 ms"),
    ("stall", "stall s"),
    ("fallback", "fallback s"),
    ("verdicts", "verdicts"),
];

/// The verdict cell: `all pass`, or the failing checks; then the checks not judged.
pub fn verdicts(row: &Row) -> String {
    let fails: Vec<&str> = row
        .summary
        .checks
        .iter()
        .filter(|c| c.1.failed())
        .map(|c| c.0.as_str())
        .collect();
    let unjudged = row.summary.not_judged();
    let tail = if unjudged.is_empty() {
        String::new()
    } else {
        format!("; not judged: {}", unjudged.join(", "))
    };
    if fails.is_empty() && unjudged.is_empty() {
        "all pass".to_string()
    } else if fails.is_empty() {
        format!("pass{tail}")
    } else {
        format!("FAIL: {}{tail}", fails.join(", "))
    }
}

/// One cell of the comparison table, by column key.
pub fn cell(row: &Row, key: &str) -> String {
    let s = &row.summary;
    let lat = |v: f64| {
        if s.reservation.count > 0 {
            format!("{v:.3}")
        } else {
            "-".to_string()
        }
    };
    // with platforms there is no fleet-wide ceiling: each platform is judged at its own limit
    // (the verdicts), and a fleet-wide burst or utilisation would read as a failure it is not
    let fleet_wide = s.backend_detail.platforms().is_empty();
    match key {
        "ceiling" | "util" | "max1s" | "burst" if !fleet_wide => "-".to_string(),
        "backend" => s.backend.clone(),
        "fetches" => s.fetches.to_string(),
        "last" => format!("{:.3}", s.last_start_s),
        "rate" => format!("{:.2}", s.achieved_rate),
        "ceiling" => crate::plot::num(s.rate, 3),
        "util" => format!("{:.2}", row.derived.utilisation),
        "max1s" => format!("{}/{}", s.max_window.count, s.max_window.bound),
        "burst" => s.burst_needed.to_string(),
        "slots" => s.slot_burst_needed.to_string(),
        "s429" => s.status_429.to_string(),
        "p50" => lat(s.reservation.p50_ms),
        "p95" => lat(s.reservation.p95_ms),
        "p99" => lat(s.reservation.p99_ms),
        "stall" => row
            .derived
            .largest_stall_after_kill_s
            .map_or("-".to_string(), |v| format!("{v:.3}")),
        "fallback" => format!("{:.3}", s.fallback_s),
        "verdicts" => verdicts(row),
        _ => String::new(),
    }
}

/// The comparison table of a scenario's first-seed runs.
pub fn comparison(sr: &ScenarioRuns) -> Table {
    let kills = sr.has_kills();
    let cols: Vec<&(&str, &str)> = COLUMNS.iter().filter(|c| c.0 != "stall" || kills).collect();
    Table {
        headers: cols.iter().map(|c| c.1.to_string()).collect(),
        rows: sr
            .base()
            .iter()
            .map(|r| {
                cols.iter()
                    .map(|c| {
                        if c.0 == "backend" {
                            super::label(sr, &r.backend)
                        } else {
                            cell(&r.row, c.0)
                        }
                    })
                    .collect()
            })
            .collect(),
        left: cols.iter().map(|c| c.0 == "backend" || c.0 == "verdicts").collect(),
    }
}

/// A scenario's statistics across seeds with each backend named by its label
/// ([`super::label`]), for [`across_seeds`].
pub(crate) fn labelled_seed_stats(sr: &ScenarioRuns) -> Vec<SeedStats> {
    let mut stats = sr.seed_stats();
    for s in &mut stats {
        s.backend = super::label(sr, &s.backend);
    }
    stats
}

/// `mean ± half-width` (or just the mean for one seed), with `digits` decimals.
pub(crate) fn ci_cell(ci: Option<&MeanCi>, digits: usize) -> String {
    match ci {
        None => "-".to_string(),
        Some(c) if c.n == 0 => "-".to_string(),
        Some(c) => match c.half_width {
            Some(h) => format!("{:.d$} ± {:.d$}", c.mean, h, d = digits),
            None => format!("{:.d$}", c.mean, d = digits),
        },
    }
}

/// Mean ± 95% CI half-width across seeds, per backend.
pub fn across_seeds(stats: &[SeedStats]) -> Table {
    Table {
        headers: ["backend", "seeds", "rate/s", "max 1s/bound", "p99 ms", "burst"]
            .map(String::from)
            .to_vec(),
        rows: stats
            .iter()
            .map(|s| {
                vec![
                    s.backend.clone(),
                    s.n.to_string(),
                    ci_cell(Some(&s.achieved_rate), 2),
                    ci_cell(Some(&s.max_window_overshoot), 3),
                    ci_cell(s.reservation_p99_ms.as_ref(), 3),
                    ci_cell(Some(&s.burst_needed), 1),
                ]
            })
            .collect(),
        left: vec![true, false, false, false, false, false],
    }
}

impl Table {
    fn widths(&self) -> Vec<usize> {
        let mut w: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        w
    }

    /// Aligned plain text, one line per row, header first.
    pub fn text(&self) -> String {
        let w = self.widths();
        let line = |cells: &[String]| -> String {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                let pad = w[i].saturating_sub(c.chars().count());
                if i > 0 {
                    s.push_str("  ");
                }
                if self.left[i] {
                    s.push_str(c);
                    if i + 1 < cells.len() {
                        s.push_str(&" ".repeat(pad));
                    }
                } else {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(c);
                }
            }
            s.push('\n');
            s
        };
        let mut out = line(&self.headers);
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }

    /// A Markdown (GitHub-flavoured) table.
    pub fn markdown(&self) -> String {
        let esc = |c: &str| c.replace('|', "\\|");
        let mut out = String::new();
        out.push_str(&format!(
            "| {} |\n",
            self.headers.iter().map(|h| esc(h)).collect::<Vec<_>>().join(" | ")
        ));
        out.push_str(&format!(
            "|{}|\n",
            self.left
                .iter()
                .map(|&l| if l { " --- " } else { " ---: " })
                .collect::<Vec<_>>()
                .join("|")
        ));
        for r in &self.rows {
            out.push_str(&format!(
                "| {} |\n",
                r.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | ")
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_markdown_align() {
        let t = Table {
            headers: vec!["backend".into(), "rate/s".into(), "verdicts".into()],
            rows: vec![vec!["row".into(), "50.00".into(), "all pass".into()]],
            left: vec![true, false, true],
        };
        assert_eq!(t.text(), "backend  rate/s  verdicts\nrow       50.00  all pass\n");
        assert_eq!(
            t.markdown(),
            "| backend | rate/s | verdicts |\n| --- | ---: | --- |\n| row | 50.00 | all pass |\n"
        );
    }
}
