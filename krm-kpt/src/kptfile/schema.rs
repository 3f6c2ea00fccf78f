//! The Kptfile's Go types as kpt v1.0.0-beta.67 declares them
//! (`api/kptfile/v1/types.go@v1.0.0-beta.67`): each struct's fields, in
//! order, and what each holds. Reading decodes by them strictly; `eval
//! --save` and `render`'s status write through them, as yaml.v3 marshals
//! them. beta.67 added the function's `tag`, the generic upstream lock and
//! the status's `renderStatus` (beta.56 refuses a Kptfile with any of
//! them: `field renderStatus not found in type v1.Status`).

/// What a field holds, as the Go type kpt decodes it into. Every field is
/// `omitempty` but those marked otherwise.
#[derive(Clone, Copy)]
pub(super) enum Ty {
    Str,
    /// A string without `omitempty`: written even when empty.
    StrAlways,
    StrList,
    StrMap,
    /// An `int` with `omitempty`.
    Int,
    /// An `int` without `omitempty`: written even when 0.
    IntAlways,
    /// A string its type's own unmarshaller fills from any node (a
    /// collection becomes its YAML text, trimmed): fnresult's `Field`
    /// values.
    Text,
    /// A struct with its own unmarshaller that takes any mapping, unknown
    /// fields too (fnresult's `Field`).
    Lenient(&'static Schema),
    /// A pointer to a struct: omitted when nil (absent or null), written
    /// (maybe as `{}`) otherwise.
    Obj(&'static Schema),
    /// A struct value: omitted when all its fields are empty.
    Struct(&'static Schema),
    List(&'static Schema),
}

/// A Go struct: its name in yaml.v3's messages and its fields, in the
/// struct's order (the order yaml.v3 writes them in).
pub(super) struct Schema {
    pub(super) name: &'static str,
    pub(super) fields: &'static [(&'static str, Ty)],
}

const OBJECT_META: Schema = Schema {
    name: "yaml.ObjectMeta",
    fields: &[
        ("name", Ty::Str),
        ("namespace", Ty::Str),
        ("labels", Ty::StrMap),
        ("annotations", Ty::StrMap),
    ],
};
const GIT: Schema = Schema {
    name: "v1.Git",
    fields: &[("repo", Ty::Str), ("directory", Ty::Str), ("ref", Ty::Str)],
};
const UPSTREAM: Schema = Schema {
    name: "v1.Upstream",
    fields: &[
        ("type", Ty::Str),
        ("git", Ty::Obj(&GIT)),
        ("updateStrategy", Ty::Str),
    ],
};
const GIT_LOCK: Schema = Schema {
    name: "v1.GitLock",
    fields: &[
        ("repo", Ty::Str),
        ("directory", Ty::Str),
        ("ref", Ty::Str),
        ("commit", Ty::Str),
    ],
};
const GENERIC_LOCK: Schema = Schema {
    name: "v1.GenericLock",
    fields: &[
        ("storeID", Ty::Str),
        ("resourceID", Ty::Str),
        ("resourceVersion", Ty::Str),
    ],
};
const LOCATOR: Schema = Schema {
    name: "v1.Locator",
    fields: &[
        ("type", Ty::Str),
        ("git", Ty::Obj(&GIT_LOCK)),
        ("generic", Ty::Obj(&GENERIC_LOCK)),
    ],
};
const READINESS_GATE: Schema = Schema {
    name: "v1.ReadinessGate",
    fields: &[("conditionType", Ty::StrAlways)],
};
const PACKAGE_INFO: Schema = Schema {
    name: "v1.PackageInfo",
    fields: &[
        ("site", Ty::Str),
        ("emails", Ty::StrList),
        ("license", Ty::Str),
        ("licenseFile", Ty::Str),
        ("description", Ty::Str),
        ("keywords", Ty::StrList),
        ("man", Ty::Str),
        ("readinessGates", Ty::List(&READINESS_GATE)),
    ],
};
const SELECTOR: Schema = Schema {
    name: "v1.Selector",
    fields: &[
        ("apiVersion", Ty::Str),
        ("kind", Ty::Str),
        ("name", Ty::Str),
        ("namespace", Ty::Str),
        ("labels", Ty::StrMap),
        ("annotations", Ty::StrMap),
    ],
};
const FUNCTION: Schema = Schema {
    name: "v1.Function",
    fields: &[
        ("image", Ty::Str),
        ("exec", Ty::Str),
        ("configPath", Ty::Str),
        ("configMap", Ty::StrMap),
        ("name", Ty::Str),
        ("tag", Ty::Str),
        ("selectors", Ty::List(&SELECTOR)),
        ("exclude", Ty::List(&SELECTOR)),
    ],
};
const PIPELINE: Schema = Schema {
    name: "v1.Pipeline",
    fields: &[
        ("mutators", Ty::List(&FUNCTION)),
        ("validators", Ty::List(&FUNCTION)),
    ],
};
const INVENTORY: Schema = Schema {
    name: "v1.Inventory",
    fields: &[
        ("namespace", Ty::Str),
        ("name", Ty::Str),
        ("inventoryID", Ty::Str),
        ("labels", Ty::StrMap),
        ("annotations", Ty::StrMap),
    ],
};
const CONDITION: Schema = Schema {
    name: "v1.Condition",
    fields: &[
        ("type", Ty::StrAlways),
        ("status", Ty::StrAlways),
        ("reason", Ty::Str),
        ("message", Ty::Str),
    ],
};
/// fnresult's `ResultItem` (`api/fnresult/v1/types.go@v1.0.0-beta.67:101-161`;
/// its package is `v1` too).
const RESOURCE_IDENTIFIER: Schema = Schema {
    name: "yaml.ResourceIdentifier",
    fields: &[
        ("apiVersion", Ty::Str),
        ("kind", Ty::Str),
        ("name", Ty::Str),
        ("namespace", Ty::Str),
    ],
};
const FIELD: Schema = Schema {
    name: "v1.Field",
    fields: &[
        ("path", Ty::Text),
        ("currentValue", Ty::Text),
        ("proposedValue", Ty::Text),
    ],
};
const FILE: Schema = Schema {
    name: "framework.File",
    fields: &[("path", Ty::Str), ("index", Ty::Int)],
};
pub(super) const RESULT_ITEM: Schema = Schema {
    name: "v1.ResultItem",
    fields: &[
        ("message", Ty::Str),
        ("severity", Ty::Str),
        ("resourceRef", Ty::Obj(&RESOURCE_IDENTIFIER)),
        ("field", Ty::Lenient(&FIELD)),
        ("file", Ty::Obj(&FILE)),
        ("tags", Ty::StrMap),
    ],
};
const STEP_RESULT: Schema = Schema {
    name: "v1.PipelineStepResult",
    fields: &[
        ("name", Ty::Str),
        ("image", Ty::Str),
        ("exec", Ty::Str),
        ("executionError", Ty::Str),
        ("stderr", Ty::Str),
        ("exitCode", Ty::IntAlways),
        ("results", Ty::List(&RESULT_ITEM)),
        ("errorResults", Ty::List(&RESULT_ITEM)),
    ],
};
const RENDER_STATUS: Schema = Schema {
    name: "v1.RenderStatus",
    fields: &[
        ("mutationSteps", Ty::List(&STEP_RESULT)),
        ("validationSteps", Ty::List(&STEP_RESULT)),
        ("errorSummary", Ty::Str),
    ],
};
const STATUS: Schema = Schema {
    name: "v1.Status",
    fields: &[
        ("conditions", Ty::List(&CONDITION)),
        ("renderStatus", Ty::Obj(&RENDER_STATUS)),
    ],
};
pub(super) const KPTFILE: Schema = Schema {
    name: "v1.KptFile",
    fields: &[
        ("apiVersion", Ty::Str),
        ("kind", Ty::Str),
        ("metadata", Ty::Struct(&OBJECT_META)),
        ("upstream", Ty::Obj(&UPSTREAM)),
        ("upstreamLock", Ty::Obj(&LOCATOR)),
        ("info", Ty::Obj(&PACKAGE_INFO)),
        ("pipeline", Ty::Obj(&PIPELINE)),
        ("inventory", Ty::Obj(&INVENTORY)),
        ("status", Ty::Obj(&STATUS)),
    ],
};
