//! The conversions between the resources' data and Starlark values, both
//! ways: the program's input, `json`/`yaml` decoding, `ctx.open_api` and
//! what the program leaves all go through them, so they sit below both
//! the interpreter's run ([`super::interp`]) and the modules it loads
//! ([`super::libs`]).

use krm_yaml::Node;
use starlark::values::dict::{AllocDict, DictRef};
use starlark::values::list::{AllocList, ListRef};
use starlark::values::tuple::TupleRef;
use starlark::values::{Heap, Value};

use super::data::Data;

/// A node's data as Starlark values, types as yaml.v3 decodes them
/// (aliases followed).
pub(super) fn node_value<'v>(heap: Heap<'v>, node: &Node) -> Result<Value<'v>, String> {
    data_to_value(heap, &Data::from_node(node)?)
}

/// Data as Starlark values.
pub(super) fn data_to_value<'v>(heap: Heap<'v>, d: &Data) -> Result<Value<'v>, String> {
    Ok(match d {
        Data::Null => Value::new_none(),
        Data::Bool(b) => Value::new_bool(*b),
        Data::Int(i) => heap.alloc(*i),
        Data::Big(s) => heap.alloc(s.parse::<f64>().unwrap_or(f64::NAN)),
        Data::Float(f) => heap.alloc(*f),
        Data::Str(s) => heap.alloc(s.as_str()),
        Data::Seq(seq) => {
            let mut out = Vec::with_capacity(seq.len());
            for x in seq {
                out.push(data_to_value(heap, x)?);
            }
            heap.alloc(AllocList(out))
        }
        Data::Map(map) => {
            let mut out = Vec::with_capacity(map.len());
            for (k, x) in map {
                if matches!(k, Data::Seq(_) | Data::Map(_)) {
                    return Err(
                        "a mapping key that is itself a mapping or a sequence cannot be a Starlark dict key"
                            .into(),
                    );
                }
                out.push((data_to_value(heap, k)?, data_to_value(heap, x)?));
            }
            heap.alloc(AllocDict(out))
        }
    })
}

/// Plain data as Starlark values.
pub(super) fn data_value<'v>(
    heap: Heap<'v>,
    v: &serde_yaml_ng::Value,
) -> Result<Value<'v>, String> {
    data_to_value(heap, &Data::from_value(v))
}

/// How deep a value written back may nest (a list that contains itself
/// would otherwise never end).
const MAX_NESTING: usize = 1_000;

/// A Starlark value as a node, as yaml.v3 encodes the Go value the
/// catalog's conversion makes of it.
pub(super) fn value_node(v: Value<'_>, depth: usize) -> Result<Node, String> {
    value_data(v, depth).map(|d| d.to_node())
}

/// A Starlark value as data (what the catalog's conversion makes of it).
/// starlib's `util.Unmarshal` (v0.5.0) takes an int into a Go `int` with
/// `starlark.AsInt`: past 64 bits it fails with Go Starlark's message,
/// each dict on the way prefixing `unmarshaling starlark value: ` (or
/// `key: `), as Go's does.
pub(super) fn value_data(v: Value<'_>, depth: usize) -> Result<Data, String> {
    to_data(v, depth).map_err(|e| e.msg)
}

/// A resource the program left in `ctx.resource_list["items"]`, as data:
/// [`value_data`], where Go's errors have one prefix more, of the
/// ResourceList dict the catalog unmarshals whole.
pub(super) fn resource_data(v: Value<'_>) -> Result<Data, String> {
    to_data(v, 0).map_err(|e| in_dict("value")(e).msg)
}

/// An error of [`to_data`]; `go` when it is one of Go's, which the dicts
/// around it prefix as Go's do.
struct ToDataError {
    msg: String,
    go: bool,
}

impl From<String> for ToDataError {
    fn from(msg: String) -> Self {
        ToDataError { msg, go: false }
    }
}

fn in_dict(what: &str) -> impl Fn(ToDataError) -> ToDataError + '_ {
    move |e| {
        if e.go {
            ToDataError {
                msg: format!("unmarshaling starlark {what}: {}", e.msg),
                go: true,
            }
        } else {
            e
        }
    }
}

fn to_data(v: Value<'_>, depth: usize) -> Result<Data, ToDataError> {
    if depth > MAX_NESTING {
        return Err(format!(
            "a value nests deeper than {MAX_NESTING} levels (does a list or dict contain itself?)"
        )
        .into());
    }
    if v.is_none() {
        return Ok(Data::Null);
    }
    if let Some(b) = v.unpack_bool() {
        return Ok(Data::Bool(b));
    }
    if let Some(s) = v.unpack_str() {
        return Ok(Data::Str(s.to_owned()));
    }
    match v.get_type() {
        "int" => {
            let repr = v.to_repr();
            return repr.parse().map(Data::Int).map_err(|_| ToDataError {
                msg: format!("{repr} out of range (want value in signed 64-bit range)"),
                go: true,
            });
        }
        "float" => {
            let f = match v.to_repr().as_str() {
                "+inf" | "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                r => r.parse().unwrap_or(f64::NAN),
            };
            return Ok(Data::Float(f));
        }
        _ => {}
    }
    if let Some(d) = DictRef::from_value(v) {
        let mut map = Vec::with_capacity(d.len());
        for (k, x) in d.iter() {
            let value = to_data(x, depth + 1).map_err(in_dict("value"))?;
            let key = match k.get_type() {
                "string" | "int" | "float" | "bool" | "NoneType" => {
                    to_data(k, depth + 1).map_err(in_dict("key"))?
                }
                t => return Err(format!("a dict key of type {t} cannot be written as YAML").into()),
            };
            map.push((key, value));
        }
        return Ok(Data::Map(map));
    }
    let elems: Option<Vec<Value<'_>>> = ListRef::from_value(v)
        .map(|l| l.content().to_vec())
        .or_else(|| TupleRef::from_value(v).map(|t| t.content().to_vec()));
    if let Some(elems) = elems {
        let mut seq = Vec::with_capacity(elems.len());
        for x in elems {
            seq.push(to_data(x, depth + 1)?);
        }
        return Ok(Data::Seq(seq));
    }
    Err(format!("a value of type {} cannot be written as YAML", v.get_type()).into())
}
