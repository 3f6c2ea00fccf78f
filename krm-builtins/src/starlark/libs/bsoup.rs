//! `bsoup.star` (starlib's `bsoup`, a Beautiful Soup-like HTML API on Go's
//! `x/net/html`): loads, so a program that loads every module runs, but
//! `parseHtml` fails: no HTML parser is built in.

use starlark::environment::GlobalsBuilder;
use starlark::starlark_module;
use starlark::values::dict::DictRef;
use starlark::values::tuple::UnpackTuple;
use starlark::values::Value;

use super::unbuilt::not_built_in;

pub(super) fn module(builder: &mut GlobalsBuilder) {
    builder.namespace("bsoup", members);
}

#[starlark_module]
fn members(builder: &mut GlobalsBuilder) {
    #[allow(non_snake_case)]
    fn parseHtml<'v>(
        #[starlark(args)] _args: UnpackTuple<Value<'v>>,
        #[starlark(kwargs)] _kwargs: DictRef<'v>,
    ) -> anyhow::Result<Value<'v>> {
        Err(not_built_in("bsoup.parseHtml"))
    }
}
