//! `xlsx.star` (starlib's `xlsx`): loads, but `get_url` fails: it fetches
//! a spreadsheet over HTTP, and the program has no network (nor a reader
//! of Excel files built in).

use starlark::environment::GlobalsBuilder;
use starlark::starlark_module;
use starlark::values::dict::DictRef;
use starlark::values::tuple::UnpackTuple;
use starlark::values::Value;

pub(super) fn module(builder: &mut GlobalsBuilder) {
    builder.namespace("xlsx", members);
}

#[starlark_module]
fn members(builder: &mut GlobalsBuilder) {
    fn get_url<'v>(
        #[starlark(args)] _args: UnpackTuple<Value<'v>>,
        #[starlark(kwargs)] _kwargs: DictRef<'v>,
    ) -> anyhow::Result<Value<'v>> {
        Err(anyhow::anyhow!(
            "xlsx.get_url is not available in the built-in starlark function, which has no network (it runs in a sandbox); run the catalog's image with --no-default-builtins"
        ))
    }
}
