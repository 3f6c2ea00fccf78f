//! `zipfile.star` (starlib's `zipfile`): the `ZipFile` symbol loads, but
//! calling it fails: a zip archive is bytes, which a Starlark string here
//! (UTF-8 text) cannot hold, and no zip reader is built in.

use starlark::environment::GlobalsBuilder;
use starlark::starlark_module;
use starlark::values::dict::DictRef;
use starlark::values::tuple::UnpackTuple;
use starlark::values::Value;

use super::unbuilt::not_built_in;

#[starlark_module]
pub(super) fn module(builder: &mut GlobalsBuilder) {
    #[allow(non_snake_case)]
    fn ZipFile<'v>(
        #[starlark(args)] _args: UnpackTuple<Value<'v>>,
        #[starlark(kwargs)] _kwargs: DictRef<'v>,
    ) -> anyhow::Result<Value<'v>> {
        Err(not_built_in("ZipFile"))
    }
}
