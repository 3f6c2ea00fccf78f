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
    /// The catalog's master (v0.5.1 on, `krmfn/krmfn.go@starlark/v0.5.1:32`):
    /// `IsGroupVersionKind(GroupVersionKind{Group: "", Version: apiVersion,
    /// Kind: kind})`, the resource's own GVK parsed from its `apiVersion`
    /// (apimachinery's `ParseGroupVersion`). So a resource of a named
    /// group (`apps/v1`) never matches, whatever is asked; a core one
    /// (`v1`) matches its apiVersion and kind. (v0.4.1–v0.5.0 compared
    /// the apiVersion string whole, `IsGVK`.)
    fn match_gvk<'v>(
        #[starlark(require = pos)] resource: Value<'v>,
        #[starlark(require = pos)] api_version: &str,
        #[starlark(require = pos)] kind: &str,
    ) -> anyhow::Result<bool> {
        let (own_api_version, own_kind) =
            (field(resource, &["apiVersion"]), field(resource, &["kind"]));
        // `ParseGroupVersion`: "" and "/" are the empty version; no slash a
        // core version; one slash group/version; more an error, which
        // `GroupVersionKind()` answers with the empty GVK (kind too).
        let (group, version, own_kind) = match own_api_version.matches('/').count() {
            _ if own_api_version.is_empty() || own_api_version == "/" => {
                (String::new(), String::new(), own_kind)
            }
            0 => (String::new(), own_api_version, own_kind),
            1 => match own_api_version.split_once('/') {
                Some((g, v)) => (g.to_owned(), v.to_owned(), own_kind),
                None => (String::new(), String::new(), String::new()),
            },
            _ => (String::new(), String::new(), String::new()),
        };
        Ok(group.is_empty() && version == api_version && own_kind == kind)
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
