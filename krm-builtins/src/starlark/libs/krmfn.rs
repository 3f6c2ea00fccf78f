//! `krmfn.star` (the catalog's `krmfn/krmfn.go`): `match_gvk`,
//! `match_name`, `match_namespace` on a resource (a dict).

use starlark::environment::GlobalsBuilder;
use starlark::starlark_module;
use starlark::values::dict::DictRef;
use starlark::values::Value;

pub(super) fn module(builder: &mut GlobalsBuilder) {
    builder.namespace("krmfn", members);
}

/// `obj[a][b]...` when each step is a dict, as a string ("" otherwise, as
/// the SDK's getters read a missing field).
fn field(obj: Value<'_>, path: &[&str]) -> String {
    let mut cur = obj;
    for key in path {
        match DictRef::from_value(cur).and_then(|d| d.get_str(key)) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    cur.unpack_str().map(str::to_owned).unwrap_or_default()
}

#[starlark_module]
fn members(builder: &mut GlobalsBuilder) {
    /// Whether the resource has this apiVersion and kind (the catalog
    /// compares `apiVersion` whole, group included).
    fn match_gvk<'v>(
        #[starlark(require = pos)] resource: Value<'v>,
        #[starlark(require = pos)] api_version: &str,
        #[starlark(require = pos)] kind: &str,
    ) -> anyhow::Result<bool> {
        Ok(field(resource, &["apiVersion"]) == api_version && field(resource, &["kind"]) == kind)
    }

    fn match_name<'v>(
        #[starlark(require = pos)] resource: Value<'v>,
        #[starlark(require = pos)] name: &str,
    ) -> anyhow::Result<bool> {
        Ok(field(resource, &["metadata", "name"]) == name)
    }

    fn match_namespace<'v>(
        #[starlark(require = pos)] resource: Value<'v>,
        #[starlark(require = pos)] namespace: &str,
    ) -> anyhow::Result<bool> {
        Ok(field(resource, &["metadata", "namespace"]) == namespace)
    }
}
