//! Choice files: a run's decisions, written out and read back (`pacesim run FILE --choices
//! CHOICES`, `--record-choices CHOICES`).
//!
//! ```json
//! {"version": 1, "scenario": "racy", "backend": "row", "seed": 1, "mode": "steered",
//!  "bounds": {"quantiles": [0.01, 0.5, 0.99], "kills": 1, "kill_points": ["mid_reservation"],
//!             "restart_after": 1000000000, "order_width": 8},
//!  "choices": [{"kind": "value", "index": 2, "of": 3, "pid": 0}, ...]}
//! ```
//!
//! `mode = "steered"`: an explorer's run (each choice an index, then the first way past the
//! end); `mode = "words"`: an ordinary run's random words, in the order drawn.
//!
//! `scenario_hash` is a hash of the scenario file's text the choices were made on
//! ([`text_hash`]): a replay on another text (an edited scenario whose name, backend and seed
//! still match) is refused. A replay of words that draws more words than the file holds (or
//! fewer) is not the recorded run: it ends (past the end each stream draws its own words), and
//! is then refused with the counts.

use crate::choice::{Bounds, Choice, Source, Tape};
use crate::fault::KillPoint;
use crate::scenario::Scenario;
use std::path::Path;

/// The version this build writes and reads.
pub const VERSION: u32 = 1;

/// The largest choice file read, in bytes (a recorded word is about 20 bytes of JSON).
pub const MAX_FILE_BYTES: u64 = 1 << 30;

pub use crate::scenario::text_hash;

/// A choice file.
// (no `deny_unknown_fields`: serde cannot combine it with the flattened body)
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ChoiceFile {
    /// [`VERSION`].
    pub version: u32,
    /// The scenario's name (a replay of another scenario is refused).
    pub scenario: String,
    /// The backend.
    pub backend: String,
    /// The seed (the streams that are not choices draw from it).
    pub seed: u64,
    /// The hash of the scenario file's text the choices were made on ([`text_hash`]); absent
    /// in files written before it was recorded (then not checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario_hash: Option<String>,
    /// The decisions.
    #[serde(flatten)]
    pub body: Body,
}

/// What a choice file holds.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Body {
    /// An explorer's run.
    Steered {
        /// The bounds it ran within.
        bounds: Bounds,
        /// Its choices, in order.
        choices: Vec<Choice>,
    },
    /// An ordinary run's words.
    Words {
        /// The words, in the order drawn.
        words: Vec<u64>,
    },
}

impl ChoiceFile {
    /// Read `path`; an error names the file, and the line and column JSON gives.
    pub fn read(path: &Path) -> Result<ChoiceFile, String> {
        let text = {
            use std::io::Read;
            let mut bytes = Vec::new();
            std::fs::File::open(path)
                .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
                .map_err(|e| format!("{}: {e}", path.display()))?;
            if bytes.len() as u64 > MAX_FILE_BYTES {
                return Err(format!(
                    "{}: larger than {} MiB: not a choice file",
                    path.display(),
                    MAX_FILE_BYTES >> 20
                ));
            }
            String::from_utf8(bytes).map_err(|e| format!("{}: not UTF-8 text: {e}", path.display()))?
        };
        let f: ChoiceFile = serde_json::from_str(&text).map_err(|e| match bad_kill_point(&text) {
            Some(why) => format!("{}: field `bounds.kill_points`: {why}", path.display()),
            None => format!("{}:{}:{}: not a choice file: {e}", path.display(), e.line(), e.column()),
        })?;
        if f.version != VERSION {
            return Err(format!(
                "{}: field `version`: {} (this pacesim reads version {VERSION})",
                path.display(),
                f.version
            ));
        }
        if let Body::Steered { bounds, .. } = &f.body
            && bounds.quantiles.iter().any(|q| !(*q > 0.0 && *q < 1.0))
        {
            return Err(format!(
                "{}: field `bounds.quantiles`: each must lie strictly between 0 and 1",
                path.display()
            ));
        }
        Ok(f)
    }

    /// Write it to `path` (pretty JSON).
    pub fn write(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Check it belongs to `sc` (name, backend, seed, and the text it was made on when the
    /// file records it); the error names the field.
    pub fn fits(&self, path: &Path, sc: &Scenario) -> Result<(), String> {
        let p = path.display();
        if let Some(h) = &self.scenario_hash
            && let Some(now) = sc.text_hash()
            && *h != now
        {
            return Err(format!(
                "{p}: field `scenario_hash`: the choices were made on another text of scenario `{}` \
                 (hash {h}; {} has {now}): replay them on the scenario file they were made on",
                sc.name,
                sc.origin.file()
            ));
        }
        if self.scenario != sc.name {
            return Err(format!(
                "{p}: field `scenario`: the choices are of scenario `{}`, not `{}`",
                self.scenario, sc.name
            ));
        }
        if self.backend != sc.pacer.backend {
            return Err(format!(
                "{p}: field `backend`: the choices are of backend `{}`, not `{}` (pass --backend {})",
                self.backend, sc.pacer.backend, self.backend
            ));
        }
        if self.seed != sc.seed {
            return Err(format!(
                "{p}: field `seed`: the choices were made with seed {}, not {} (pass --seed {})",
                self.seed, sc.seed, self.seed
            ));
        }
        Ok(())
    }

    /// After a replay of words (`source`, from [`ChoiceFile::source`]): an error when the run
    /// drew more words than the file holds, or fewer: it was not the recorded run.
    pub(crate) fn replayed_whole(&self, path: &Path, source: &Source) -> Result<(), String> {
        match source.replayed() {
            Some((drawn, held)) if drawn != held => Err(format!(
                "{}: field `words`: the run drew {drawn} random words, the file holds {held}: \
                 the choices do not fit this scenario (another text of it, or a file cut short), \
                 so the run was not the recorded one",
                path.display()
            )),
            _ => Ok(()),
        }
    }

    /// The source that replays it.
    pub fn source(&self) -> Source {
        match &self.body {
            Body::Words { words } => Source::new(Tape::replay(words.clone())),
            Body::Steered { bounds, choices } => {
                let mask = KillPoint::mask(&bounds.kill_points);
                let prefix = choices.iter().map(|c| c.index).collect();
                Source::new(Tape::steer(
                    bounds.clone(),
                    mask,
                    prefix,
                    Box::new(crate::choice::First),
                ))
            }
        }
    }
}

/// Why a choice file that does not parse fails, when it is a kill point's name in
/// `bounds.kill_points` ([`KillPoint::parse`]'s error: the name and every point).
fn bad_kill_point(text: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    v.get("bounds")?
        .get("kill_points")?
        .as_array()?
        .iter()
        .find_map(|p| KillPoint::parse(p.as_str()?).err())
}
