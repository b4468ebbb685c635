//! One colour per backend, the same in every plot of every report.
//!
//! Each backend of the registry has a fixed colour (its entry's `colour`, from a
//! colour-blind-aware categorical palette); any other name (a backend of your own) gets a
//! deterministic colour from a hash of the name, so it is drawn the same way in every figure and
//! every run.

use plotters::style::RGBColor;

/// The colour of `backend` (or of a variant's [`crate::registry::label`]): its registry
/// entry's, else one derived from its name.
pub fn colour(backend: &str) -> RGBColor {
    // a variant's label (`row (clock=process_monotonic)`) is drawn in its backend's colour
    let backend = crate::registry::base_of(backend);
    if let Some((r, g, b)) = crate::registry::spec(backend).and_then(|s| s.colour) {
        return RGBColor(r, g, b);
    }
    // FNV-1a of the name -> a hue; mid saturation and lightness keep it readable on white.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in backend.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
    }
    hsl((h % 360) as f64, 0.6, 0.42)
}

/// `c` mixed with white: `t = 0` is `c`, `t = 1` is white.
pub fn tint(c: RGBColor, t: f64) -> RGBColor {
    let m = |v: u8| (v as f64 + (255.0 - v as f64) * t.clamp(0.0, 1.0)).round() as u8;
    RGBColor(m(c.0), m(c.1), m(c.2))
}

/// `c` mixed with black: `t = 0` is `c`, `t = 1` is black.
pub fn shade(c: RGBColor, t: f64) -> RGBColor {
    let m = |v: u8| (v as f64 * (1.0 - t.clamp(0.0, 1.0))).round() as u8;
    RGBColor(m(c.0), m(c.1), m(c.2))
}

/// HSL (hue in degrees) to RGB.
pub fn hsl(h: f64, s: f64, l: f64) -> RGBColor {
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let hp = (h % 360.0) / 60.0;
    let x = c * (1.0 - (hp % 2.0 - 1.0).abs());
    let (r, g, b) = match hp as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    let to = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    RGBColor(to(r), to(g), to(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_and_fallback_colours_are_fixed() {
        assert_eq!(colour("row"), RGBColor(31, 119, 180));
        let a = colour("some_future_backend");
        assert_eq!(a, colour("some_future_backend"));
        assert!(
            crate::registry::REGISTRY
                .iter()
                .all(|s| s.colour.map(|(r, g, b)| RGBColor(r, g, b)) != Some(a))
        );
        assert_eq!(tint(RGBColor(0, 0, 0), 1.0), RGBColor(255, 255, 255));
        assert_eq!(hsl(0.0, 1.0, 0.5), RGBColor(255, 0, 0));
    }
}
