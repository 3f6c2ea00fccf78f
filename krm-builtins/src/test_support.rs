//! What the functions' tests share: a package's text read into items, a
//! ResourceList built from it, a function run over it, and the items and
//! results written back to text.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use krm_yaml::package::kyaml;
use krm_yaml::{emit, Node};

use crate::find;
use crate::function::{Context, ResourceList, Run, Stop};
use crate::result::FnResult;

/// Each document of a stream, as an item (its content node).
pub(crate) fn nodes(text: &str) -> Vec<Node> {
    krm_yaml::parse::parse(text)
        .unwrap()
        .iter()
        .map(|d| kyaml::content(d).clone())
        .collect()
}

/// The first document of a stream, as an item (a config, say).
pub(crate) fn node(text: &str) -> Node {
    nodes(text).remove(0)
}

/// A ResourceList with the items of one stream and a config.
pub(crate) fn list(items: &str, config: Option<&str>) -> ResourceList {
    ResourceList {
        items: nodes(items),
        function_config: config.map(node),
        ..ResourceList::default()
    }
}

/// A ResourceList with one item per text (its first document) and a
/// config.
pub(crate) fn list_each(items: &[&str], config: Option<&str>) -> ResourceList {
    ResourceList {
        items: items.iter().map(|t| node(t)).collect(),
        function_config: config.map(node),
        ..ResourceList::default()
    }
}

/// Runs the function `run` over `rl`, never cancelled.
pub(crate) fn go(run: Run, rl: &mut ResourceList) -> Result<(), Stop> {
    run(rl, &Context::new())
}

/// The items as kpt writes them: documents joined by `---`.
pub(crate) fn stream(items: &[Node]) -> String {
    emit::encode(items, false)
}

/// The ResourceList's items as kpt writes them ([`stream`]).
pub(crate) fn out(rl: &ResourceList) -> String {
    stream(&rl.items)
}

/// Each item written as a document of its own, joined by `---`.
pub(crate) fn text(items: &[Node]) -> String {
    items
        .iter()
        .map(|n| emit::encode_node(n, true))
        .collect::<Vec<_>>()
        .join("---\n")
}

/// The results as the ResourceList's `results` would hold them (`[]`
/// when there are none).
pub(crate) fn results_yaml(results: &[FnResult]) -> String {
    let seq = Node::sequence(results.iter().map(crate::result::to_node).collect());
    emit::encode_node(&seq, false)
}

/// [`results_yaml`], but "" when there are no results.
pub(crate) fn results(results: &[FnResult]) -> String {
    if results.is_empty() {
        return String::new();
    }
    results_yaml(results)
}

/// Each result as `severity: message`.
pub(crate) fn messages(rl: &ResourceList) -> Vec<String> {
    rl.results
        .iter()
        .map(|r| format!("{}: {}", r.severity.as_written(), r.message))
        .collect()
}

/// Runs the built-in `name` over `items` with `config`: the items'
/// text, the results' text and the outcome.
pub(crate) fn run(
    name: &str,
    config: Option<&str>,
    items_text: &str,
) -> (String, String, Result<(), Stop>) {
    let mut rl = list(items_text, config);
    let outcome = find(name).unwrap().run(&mut rl, &Context::new());
    (out(&rl), results(&rl.results), outcome)
}
