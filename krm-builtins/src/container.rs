//! A built-in answering as the catalog's container would: the
//! ResourceList's bytes read into the tree, the function run on a thread
//! with room for deep input, and the ResourceList it leaves written back,
//! with the exit code and stderr the catalog's binary would give. The
//! runner's built-in evaluator and `eval`/`render` both run functions
//! through this.

use krm_yaml::package::kyaml;
use krm_yaml::{Kind, Node};

use crate::function::{Builtin, Context, ResourceList, Stop};

/// Why a ResourceList could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("the ResourceList is not UTF-8: {0}")]
    NotUtf8(#[from] std::str::Utf8Error),
    #[error("the ResourceList does not parse: {0}")]
    Parse(#[from] krm_yaml::parse::ParseError),
    #[error("the input is empty: no ResourceList")]
    Empty,
    #[error("the input is not a ResourceList: {0}")]
    NotAResourceList(String),
}

/// A ResourceList's text read into the tree: its `items` and
/// `functionConfig` (JSON too: it is YAML).
pub fn read_resource_list(input: &[u8]) -> Result<ResourceList, InputError> {
    let text = std::str::from_utf8(input)?;
    let mut docs = krm_yaml::parse::parse(text)?;
    if docs.is_empty() {
        return Err(InputError::Empty);
    }
    let mut doc = docs.swap_remove(0);
    let root = kyaml::content_mut(&mut doc);
    if root.kind != Kind::Mapping {
        return Err(InputError::NotAResourceList(format!(
            "a {}, not a mapping",
            kyaml::kind_name(root.kind)
        )));
    }
    let kind = kyaml::value_of(kyaml::field(root, "kind"));
    if kind != "ResourceList" {
        return Err(InputError::NotAResourceList(format!(
            "kind is {kind:?}, not \"ResourceList\""
        )));
    }
    let mut rl = ResourceList::default();
    let mut content = std::mem::take(&mut root.content).into_iter();
    while let (Some(key), Some(value)) = (content.next(), content.next()) {
        match key.value.as_str() {
            "items" => match value.kind {
                Kind::Sequence => rl.items = value.content,
                Kind::Scalar if value.tag == kyaml::NULL_TAG => {}
                k => {
                    return Err(InputError::NotAResourceList(format!(
                        "items is a {}, not a sequence",
                        kyaml::kind_name(k)
                    )))
                }
            },
            "functionConfig" if value.tag != kyaml::NULL_TAG => rl.function_config = Some(value),
            _ => {}
        }
    }
    Ok(rl)
}

/// The ResourceList a catalog function writes: its items, its
/// functionConfig and its results.
pub fn write_resource_list(rl: ResourceList) -> String {
    let mut m = vec![
        Node::string("apiVersion"),
        Node::string("config.kubernetes.io/v1"),
        Node::string("kind"),
        Node::string("ResourceList"),
        Node::string("items"),
        Node::sequence(rl.items),
    ];
    if let Some(fc) = rl.function_config {
        m.push(Node::string("functionConfig"));
        m.push(fc);
    }
    if !rl.results.is_empty() {
        m.push(Node::string("results"));
        m.push(Node::sequence(
            rl.results.iter().map(crate::result::to_node).collect(),
        ));
    }
    krm_yaml::emit::encode_node(&Node::mapping(m), true)
}

/// What the catalog's binary leaves: its exit code, its stdout (the
/// ResourceList) and its stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// What the catalog's binary would have done with `input`: exit status,
/// stdout (the ResourceList) and stderr. `None`: cancelled.
pub fn run_on_bytes(builtin: &Builtin, input: &[u8], ctx: &Context) -> Option<Answer> {
    let failed = |stderr: String| Answer {
        exit_code: 1,
        stdout: String::new(),
        stderr,
    };
    let mut rl = match read_resource_list(input) {
        Ok(rl) => rl,
        Err(err) => return Some(failed(format!("{}: {err}\n", builtin.name))),
    };
    let outcome = builtin.run(&mut rl, ctx);
    let mut stderr = std::mem::take(&mut rl.log);
    let exit_code = match outcome {
        Ok(()) => 0,
        Err(Stop::Cancelled) => return None,
        Err(Stop::Failed(text)) => {
            stderr.push_str(&text);
            1
        }
    };
    Some(Answer {
        exit_code,
        stdout: write_resource_list(rl),
        stderr,
    })
}

/// Gives untagged scalars the tag a YAML reader would (`!!int` for a plain
/// `3`, `!!str` for a quoted one), as writing the items out and reading
/// them back between two functions would: the catalog's setters leave new
/// values untagged, and the next function in a pipeline reads tags.
pub fn retag(items: &mut [Node]) {
    let mut stack: Vec<&mut Node> = items.iter_mut().collect();
    while let Some(n) = stack.pop() {
        if n.kind == Kind::Scalar && n.tag.is_empty() {
            n.tag = if n.style.is_empty() {
                krm_yaml::resolve::resolve_plain(&n.value)
            } else {
                "!!str"
            }
            .into();
        }
        stack.extend(n.content.iter_mut());
    }
}

/// Runs `f` on a thread with [`CALL_STACK_BYTES`] of stack (the
/// caller's may be smaller than deep input needs); `None` if no thread
/// could start.
pub fn on_big_stack<R: Send>(f: impl FnOnce() -> R + Send) -> Option<R> {
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .stack_size(CALL_STACK_BYTES)
            .spawn_scoped(scope, f);
        match spawned {
            Ok(thread) => Some(
                thread
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            ),
            Err(err) => {
                tracing::warn!(%err, "no thread for a built-in function");
                None
            }
        }
    })
}

/// [`Builtin::run`] on a big stack ([`on_big_stack`]).
pub fn run_with_stack(builtin: &Builtin, rl: &mut ResourceList, ctx: &Context) -> Result<(), Stop> {
    on_big_stack(|| builtin.run(rl, ctx)).unwrap_or_else(|| {
        Err(Stop::Failed(format!(
            "no thread could start for built-in {}",
            builtin.name
        )))
    })
}

/// Stack of the threads built-in calls run on: the tree is walked
/// recursively, and the parser accepts nesting 10,000 deep (reserved, not
/// committed, until used).
pub const CALL_STACK_BYTES: usize = 256 << 20;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    use super::*;

    const INPUT: &str = "apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: cm
functionConfig:
  apiVersion: v1
  kind: ConfigMap
  metadata:
    name: function-input
  data:
    namespace: prod
";

    #[test]
    fn untagged_values_get_the_tag_a_reader_gives() {
        let mut items = krm_yaml::parse::parse("a: 1\nb: x\nc: 'q'\nd: [true]\n").unwrap();
        let mut stack = vec![&mut items[0]];
        while let Some(n) = stack.pop() {
            if n.kind == Kind::Scalar {
                n.tag = krm_yaml::Tag::default();
            }
            stack.extend(n.content.iter_mut());
        }
        retag(&mut items);
        let map = &items[0].content[0];
        let tags: Vec<&str> = map.content.iter().map(|n| n.tag.as_str()).collect();
        assert_eq!(
            tags,
            ["!!str", "!!int", "!!str", "!!str", "!!str", "!!str", "!!str", "!!seq"]
        );
        assert_eq!(map.content[7].content[0].tag.as_str(), "!!bool");
    }

    #[test]
    fn a_cancelled_context_stops_a_function() {
        let flag = Arc::new(AtomicBool::new(true));
        let ctx = Context::new().with_cancel(flag);
        let b = crate::find("set-namespace").unwrap();
        assert!(run_on_bytes(b, INPUT.as_bytes(), &ctx).is_none());
    }

    #[test]
    fn every_built_in_survives_odd_input() {
        // No config, configs of every shape, items of every shape: an answer
        // or a failure, never a panic (release builds abort on one).
        let items = [
            "- a\n",
            "- {}\n",
            "- null\n",
            "- [1, 2]\n",
            "- {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: [x], labels: a, annotations: [1]}, data: {k: {x: 1}}}\n",
            "- {apiVersion: apps/v1, kind: Deployment, metadata: {name: d}, spec: {template: {spec: {containers: [{name: c, image: nginx}, null, 3]}}, selector: 7}}\n",
            "- {apiVersion: kpt.dev/v1, kind: Kptfile, metadata: {name: k}, pipeline: {mutators: [{image: apply-setters, configMap: [1]}]}}\n",
        ];
        let configs = [
            "",
            "functionConfig: null\n",
            "functionConfig: 3\n",
            "functionConfig: [a]\n",
            "functionConfig: {apiVersion: v1, kind: ConfigMap, metadata: {name: x}}\n",
            "functionConfig: {apiVersion: v1, kind: ConfigMap, metadata: {name: x}, data: {a: {b: c}, '': '', namespace: '', image: ':', name: ns, by-path: '**', put-value: x, replacements: y}}\n",
            "functionConfig: {apiVersion: v1, kind: ConfigMap, metadata: {name: x}, data: [1]}\n",
            "functionConfig: {apiVersion: fn.kpt.dev/v1alpha1, kind: ApplyReplacements, metadata: {name: x}, replacements: [{source: {kind: ConfigMap, fieldPath: 'data.[=]'}, targets: [{select: {kind: '*'}, fieldPaths: ['a.b[c=d].*', '[', '']}]}]}\n",
            "functionConfig: {apiVersion: fn.kpt.dev/v1alpha1, kind: SetImage, metadata: {name: x}, image: {name: '(', newName: 'a:b'}}\n",
            "functionConfig: {kind: List, items: [1, {kind: X}]}\n",
        ];
        for b in crate::ALL {
            for item in items {
                for config in configs {
                    let input = format!("kind: ResourceList\nitems:\n{item}{config}");
                    let ctx = Context::new();
                    let out = run_on_bytes(b, input.as_bytes(), &ctx);
                    assert!(out.is_some(), "{} on {input}", b.name);
                }
            }
        }
    }
}
