//! What the renderers share: numbers written alike, the A/A control's name,
//! the roles a session was run with.

use crate::{analysis::stats::median, results::record::RunRecord};

/// The median of `f` over `runs`.
pub fn med(runs: &[&RunRecord], f: impl Fn(&RunRecord) -> f64) -> f64 {
    median(&runs.iter().map(|r| f(r)).collect::<Vec<_>>())
}

/// A number with about three significant digits.
pub fn num(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The name of the A/A control of a variant.
pub fn aa_name(variant: &str) -> String {
    format!("{variant}{}", crate::analysis::expected::AA_SUFFIX)
}

/// The variant roles a session was run with; a session recorded before roles
/// were kept is read with today's `patches/variants.toml`.
pub fn session_roles(
    session: &crate::results::session::Session,
) -> anyhow::Result<crate::kernel::variants::Roles> {
    use crate::kernel::variants::{Variants, VARIANTS_FILE};
    match &session.roles {
        Some(r) => Ok(r.clone()),
        None => Ok(Variants::load(&crate::util::project_root().join(VARIANTS_FILE))?.roles),
    }
}
