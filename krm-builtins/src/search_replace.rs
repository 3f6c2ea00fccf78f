use crate::{Context, ResourceList, Stop};

pub(crate) fn run(_rl: &mut ResourceList, _ctx: &Context) -> Result<(), Stop> {
    Ok(())
}
