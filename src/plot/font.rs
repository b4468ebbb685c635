//! The embedded font: DejaVu Sans (`assets/DejaVuSans.ttf`, license in
//! `assets/DejaVuSans-LICENSE.txt`), registered with plotters' ab_glyph text renderer so plots
//! never depend on the fonts a machine happens to have.

use plotters::style::{FontStyle, register_font};
use std::sync::Once;

/// The TTF bytes.
pub static DEJAVU_SANS: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

/// Register the font as [`super::FAMILY`] (all styles fall back to it); idempotent.
pub fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if register_font(super::FAMILY, FontStyle::Normal, DEJAVU_SANS).is_err() {
            panic!("the embedded DejaVu Sans is a valid TrueType font");
        }
    });
}
