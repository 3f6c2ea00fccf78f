//! The Kptfile's Go types as kpt 1.0.0-beta.56 declares them: each
//! struct's fields, in order, and what each holds. Reading decodes by them
//! strictly; `eval --save` writes through them, as yaml.v3 marshals them.

/// What a field holds, as the Go type kpt decodes it into. Every field is
/// `omitempty` but those marked otherwise.
#[derive(Clone, Copy)]
pub(super) enum Ty {
    Str,
    /// A string without `omitempty`: written even when empty.
    StrAlways,
    StrList,
    StrMap,
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
const UPSTREAM_LOCK: Schema = Schema {
    name: "v1.UpstreamLock",
    fields: &[("type", Ty::Str), ("git", Ty::Obj(&GIT_LOCK))],
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
const STATUS: Schema = Schema {
    name: "v1.Status",
    fields: &[("conditions", Ty::List(&CONDITION))],
};
pub(super) const KPTFILE: Schema = Schema {
    name: "v1.KptFile",
    fields: &[
        ("apiVersion", Ty::Str),
        ("kind", Ty::Str),
        ("metadata", Ty::Struct(&OBJECT_META)),
        ("upstream", Ty::Obj(&UPSTREAM)),
        ("upstreamLock", Ty::Obj(&UPSTREAM_LOCK)),
        ("info", Ty::Obj(&PACKAGE_INFO)),
        ("pipeline", Ty::Obj(&PIPELINE)),
        ("inventory", Ty::Obj(&INVENTORY)),
        ("status", Ty::Obj(&STATUS)),
    ],
};
