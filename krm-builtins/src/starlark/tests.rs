use krm_yaml::Node;

use crate::test_support::*;
use crate::{Context, ResourceList, Stop};

fn run(config: &str, items: &str) -> (Result<(), Stop>, ResourceList) {
    let mut rl = list(items, Some(config));
    let r = super::run(&mut rl, &Context::new());
    (r, rl)
}
