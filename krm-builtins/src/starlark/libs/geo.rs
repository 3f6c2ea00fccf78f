//! `geo.star` (starlib's `geo`, on paulmach/orb): loads with starlib's
//! names (`Point`, `Line`, `Polygon`, `MultiPolygon`, `within`,
//! `intersects`, `parseGeoJSON`), each of which fails: the geometry types
//! are not built in.

use starlark::environment::GlobalsBuilder;
use starlark::starlark_module;
use starlark::values::dict::DictRef;
use starlark::values::tuple::UnpackTuple;
use starlark::values::Value;

use super::unbuilt::not_built_in;

pub(super) fn module(builder: &mut GlobalsBuilder) {
    builder.namespace("geo", members);
}

#[starlark_module]
fn members(builder: &mut GlobalsBuilder) {
    #[allow(non_snake_case)]
    fn Point<'v>(
        #[starlark(args)] _args: UnpackTuple<Value<'v>>,
        #[starlark(kwargs)] _kwargs: DictRef<'v>,
    ) -> anyhow::Result<Value<'v>> {
        Err(not_built_in("geo.Point"))
    }

    #[allow(non_snake_case)]
    fn Line<'v>(
        #[starlark(args)] _args: UnpackTuple<Value<'v>>,
        #[starlark(kwargs)] _kwargs: DictRef<'v>,
    ) -> anyhow::Result<Value<'v>> {
        Err(not_built_in("geo.Line"))
    }

    #[allow(non_snake_case)]
    fn Polygon<'v>(
        #[starlark(args)] _args: UnpackTuple<Value<'v>>,
        #[starlark(kwargs)] _kwargs: DictRef<'v>,
    ) -> anyhow::Result<Value<'v>> {
        Err(not_built_in("geo.Polygon"))
    }

    #[allow(non_snake_case)]
    fn MultiPolygon<'v>(
        #[starlark(args)] _args: UnpackTuple<Value<'v>>,
        #[starlark(kwargs)] _kwargs: DictRef<'v>,
    ) -> anyhow::Result<Value<'v>> {
        Err(not_built_in("geo.MultiPolygon"))
    }

    fn within<'v>(
        #[starlark(args)] _args: UnpackTuple<Value<'v>>,
        #[starlark(kwargs)] _kwargs: DictRef<'v>,
    ) -> anyhow::Result<Value<'v>> {
        Err(not_built_in("geo.within"))
    }

    fn intersects<'v>(
        #[starlark(args)] _args: UnpackTuple<Value<'v>>,
        #[starlark(kwargs)] _kwargs: DictRef<'v>,
    ) -> anyhow::Result<Value<'v>> {
        Err(not_built_in("geo.intersects"))
    }

    #[allow(non_snake_case)]
    fn parseGeoJSON<'v>(
        #[starlark(args)] _args: UnpackTuple<Value<'v>>,
        #[starlark(kwargs)] _kwargs: DictRef<'v>,
    ) -> anyhow::Result<Value<'v>> {
        Err(not_built_in("geo.parseGeoJSON"))
    }
}
