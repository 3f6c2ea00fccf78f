//! `html.star` (starlib's `html`, jQuery-like selections on goquery):
//! loads, so a program that loads every module runs, but `html(markup)`
//! fails: no HTML parser is built in.

use starlark::environment::GlobalsBuilder;
use starlark::starlark_module;
use starlark::values::dict::DictRef;
use starlark::values::tuple::UnpackTuple;
use starlark::values::Value;

use super::unbuilt::not_built_in;

#[starlark_module]
pub(super) fn module(builder: &mut GlobalsBuilder) {
    fn html<'v>(
        #[starlark(args)] _args: UnpackTuple<Value<'v>>,
        #[starlark(kwargs)] _kwargs: DictRef<'v>,
    ) -> anyhow::Result<Value<'v>> {
        Err(not_built_in("html"))
    }
}
