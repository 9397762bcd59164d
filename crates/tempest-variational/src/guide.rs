//! The guide family a model names for its latent GP, checked against the
//! engine that runs it.

use crate::error::{Error, ErrorKind};
use crate::ir::bind::Bound;
use crate::ir::graph::{Family, GuideTarget};
use tempest_infer::seam::{Def, EngineDef};

/// The family the model's guide names for the latent GP, checked against
/// the engine's [`tempest_infer::seam::Accepts::families`] (`None`: no
/// guide, or the engine replaces the model's own with `--engine`, which
/// ignores a guide written for another engine and uses the default
/// family). Families match by name (`inducing` of any size). A family the
/// engine refuses is an error whose note says which family `def` takes
/// (see [`guide_family_among`]).
pub fn guide_family(bound: &Bound, def: &Def) -> Result<Option<Family>, Error> {
    guide_family_among(bound, def, &[])
}

/// [`guide_family`], the error's note saying which family each engine of
/// `engines` takes (`def`'s alone when `engines` is empty).
pub fn guide_family_among(
    bound: &Bound,
    def: &Def,
    engines: &[&dyn EngineDef],
) -> Result<Option<Family>, Error> {
    let g = &bound.graph;
    let engine = def.schema.name;
    if g.infer.as_ref().is_some_and(|e| e.name.name != engine) {
        return Ok(None);
    }
    let latent = tempest_infer::structure::latent_observation(bound, engine)?;
    let Some(guide) = g
        .guides
        .iter()
        .find(|guide| guide.target == GuideTarget::Gp(latent.gp))
    else {
        return Ok(None);
    };
    let families = def.accepts.families;
    if families.iter().any(|f| f.name() == guide.family.name()) {
        return Ok(Some(guide.family.clone()));
    }
    let names = |fs: &[Family]| -> String {
        let v: Vec<String> = fs.iter().map(|f| format!("`{}`", f.name())).collect();
        v.join(" or ")
    };
    // Which engine takes which family, from the registry's list.
    let own: [&dyn EngineDef; 1] = [def];
    let engines = if engines.is_empty() {
        &own[..]
    } else {
        engines
    };
    let takes: Vec<String> = engines
        .iter()
        .filter(|e| !e.accepts().families.is_empty())
        .map(|e| format!("{} takes {}", e.schema().name, names(e.accepts().families)))
        .collect();
    Err(Error::at(
        ErrorKind::Unsupported,
        guide.span,
        format!(
            "the `{engine}` engine works with the family {}",
            names(families)
        ),
    )
    .with_label("this family")
    .with_note(takes.join("; ")))
}
