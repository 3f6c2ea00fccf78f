//! `http.star` (starlib's `http`): loads, with starlib's functions (`get`,
//! `put`, `post`, `delete`, `patch`, `options`), each of which fails: the
//! program runs in a sandbox with no network, where the catalog's
//! container would make the request.

use starlark::environment::GlobalsBuilder;
use starlark::starlark_module;
use starlark::values::dict::DictRef;
use starlark::values::tuple::UnpackTuple;
use starlark::values::Value;

pub(super) fn module(builder: &mut GlobalsBuilder) {
    builder.namespace("http", members);
}

fn refuse<T>(function: &str) -> anyhow::Result<T> {
    Err(anyhow::anyhow!(
        "http.{function}: functions have no network (the starlark function runs in a sandbox)"
    ))
}

#[starlark_module]
fn members(builder: &mut GlobalsBuilder) {
    fn get<'v>(
        #[starlark(args)] _args: UnpackTuple<Value<'v>>,
        #[starlark(kwargs)] _kwargs: DictRef<'v>,
    ) -> anyhow::Result<Value<'v>> {
        refuse("get")
    }

    fn put<'v>(
        #[starlark(args)] _args: UnpackTuple<Value<'v>>,
        #[starlark(kwargs)] _kwargs: DictRef<'v>,
    ) -> anyhow::Result<Value<'v>> {
        refuse("put")
    }

    fn post<'v>(
        #[starlark(args)] _args: UnpackTuple<Value<'v>>,
        #[starlark(kwargs)] _kwargs: DictRef<'v>,
    ) -> anyhow::Result<Value<'v>> {
        refuse("post")
    }

    fn delete<'v>(
        #[starlark(args)] _args: UnpackTuple<Value<'v>>,
        #[starlark(kwargs)] _kwargs: DictRef<'v>,
    ) -> anyhow::Result<Value<'v>> {
        refuse("delete")
    }

    fn patch<'v>(
        #[starlark(args)] _args: UnpackTuple<Value<'v>>,
        #[starlark(kwargs)] _kwargs: DictRef<'v>,
    ) -> anyhow::Result<Value<'v>> {
        refuse("patch")
    }

    fn options<'v>(
        #[starlark(args)] _args: UnpackTuple<Value<'v>>,
        #[starlark(kwargs)] _kwargs: DictRef<'v>,
    ) -> anyhow::Result<Value<'v>> {
        refuse("options")
    }
}
