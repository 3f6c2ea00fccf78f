//! kpt's `Function.validate` (`pkg/api/kptfile/v1/validation.go`): what
//! render refuses in a pipeline function before anything runs, with kpt's
//! `ValidateError` text.

use std::path::Path;

use krm_yaml::package::{self, kyaml};
use krm_yaml::{Kind, Node};

/// kpt's `ValidateError`, as kpt prints it (a space on the last line, as
/// its error printer leaves it).
fn invalid(field: &str, value: &str, reason: &str) -> String {
    let value = if value.is_empty() {
        String::new()
    } else {
        format!("Value: {}\n", package::go_quote(value))
    };
    format!("Kptfile is invalid:\nField: `{field}`\n{value}Reason: {reason}\n ")
}

/// The checks on function `i` of the pipeline's `list` (`mutators` or
/// `validators`) of the package at `dir`, in kpt's order.
pub(super) fn function(dir: &Path, f: &Node, list: &str, i: usize) -> Result<(), String> {
    let text = |k: &str| kyaml::value_of(kyaml::field(f, k));
    let (image, exec) = (text("image"), text("exec"));
    let at = format!("pipeline.{list}[{i}]");
    match (image.is_empty(), exec.is_empty()) {
        // kpt's own spelling.
        (true, true) => {
            return Err(invalid(
                &at,
                "",
                "must specify a functon (`image` or `exec`) to execute",
            ))
        }
        (false, false) => {
            return Err(invalid(
                &at,
                "",
                "must not specify both `image` and `exec` at the same time",
            ))
        }
        _ => {}
    }
    if !image.is_empty() && !valid_image_name(image) {
        return Err(invalid(
            &format!("{at}.image"),
            image,
            &format!("function name {} is invalid", package::go_quote(image)),
        ));
    }
    let config_path = text("configPath");
    let config_map = kyaml::field(f, "configMap").is_some_and(|m| !m.content.is_empty());
    if config_map && !config_path.is_empty() {
        return Err(invalid(
            &at,
            "",
            "functionConfig must not specify both `configMap` and `configPath` at the same time",
        ));
    }
    if !config_path.is_empty() {
        if let Err(reason) = config_path_syntax(config_path).and_then(|clean| {
            // An `Err` here is the whole reason, kpt's words.
            config_file(&dir.join(clean), config_path)
        }) {
            return Err(invalid(&format!("{at}.configPath"), config_path, &reason));
        }
    }
    Ok(())
}

/// `validateFnConfigPathSyntax`: the path, cleaned, if it is relative and
/// stays in the package (kpt refuses any `..` left after cleaning, even
/// inside a name).
fn config_path_syntax(p: &str) -> Result<String, String> {
    if p.trim().is_empty() {
        return Err("path must not be empty".into());
    }
    let clean = package::clean_path(p);
    if clean.starts_with('/') {
        return Err("path must be relative".into());
    }
    if clean.contains("..") {
        return Err("path must not be outside the package".into());
    }
    Ok(clean)
}

/// `GetValidatedFnConfigFromPath`: the file at `path` (`shown` as the
/// Kptfile writes it) read as kyaml's `ByteReader` reads it, one KRM
/// resource. Where kpt crashes (a file with no document), this says so.
fn config_file(path: &Path, shown: &str) -> Result<(), String> {
    let quoted = package::go_quote(shown);
    let failed = |e: &dyn std::fmt::Display| format!("failed to read functionConfig {quoted}: {e}");
    let bytes = match std::fs::File::open(path) {
        Ok(mut f) => {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut f, &mut bytes).map_err(|e| {
                // Go's `*PathError` text, as os.File.Read gives it.
                let why = match e.raw_os_error() {
                    Some(21) => "is a directory".to_owned(),
                    _ => e.to_string(),
                };
                failed(&format!("read {}: {why}", path.display()))
            })?;
            bytes
        }
        Err(_) => return Err("functionConfig must exist in the current package".into()),
    };
    let text = String::from_utf8_lossy(&bytes);
    let docs = package::read_documents(&text).map_err(|e| failed(&e))?;
    let mut nodes = Vec::with_capacity(docs.len());
    for doc in docs {
        let mut node = doc.node;
        // `WrapBareSeqNode`: a bare list goes under a key of a mapping.
        if kyaml::content(&node).kind == Kind::Sequence {
            let seq = std::mem::take(kyaml::content_mut(&mut node));
            node = Node::mapping(vec![Node::scalar("bareSeqNodeWrappingKey"), seq]);
        }
        // The reader's annotations go on each: kyaml names the node that
        // cannot take them.
        if let Some(culprit) = not_a_mapping(&node) {
            return Err(failed(&format!(
                "wrong node kind: expected MappingNode but got {}: node contents:\n{}",
                kyaml::kind_name(culprit.kind),
                krm_yaml::emit::encode_node(culprit, true)
            )));
        }
        nodes.push(node);
    }
    match nodes.as_slice() {
        [] => Err(format!("functionConfig {quoted} holds no resource")),
        [node] => match krm_problem(node) {
            Some(problem) => Err(format!("functionConfig {quoted}: {problem}")),
            None => Ok(()),
        },
        more => Err(format!(
            "functionConfig {quoted} must not contain more than one config, got {}",
            more.len()
        )),
    }
}

/// The node kyaml's `SetAnnotation` fails on, if any: a resource that is
/// not a mapping, a `metadata` that is not one (nor null), or
/// `annotations` that are not one and not empty (an empty one is cleared
/// first, as `ClearEmptyAnnotations` clears it).
fn not_a_mapping(node: &Node) -> Option<&Node> {
    let not_map = |n: &&Node| n.kind != Kind::Mapping && n.tag != kyaml::NULL_TAG;
    let root = kyaml::content(node);
    let metadata = kyaml::field(root, "metadata");
    let annotations = metadata
        .and_then(|m| kyaml::field(m, "annotations"))
        .filter(|a| !a.content.is_empty());
    [Some(root), metadata, annotations]
        .into_iter()
        .flatten()
        .find(not_map)
}

/// kpt's `IsKRM`: `apiVersion`, `kind` and `metadata.name`, except for a
/// Kustomization (an apiVersion of kustomize's group, or no apiVersion and
/// kind `Kustomization`).
fn krm_problem(node: &Node) -> Option<&'static str> {
    let meta = kyaml::meta(node);
    let kustomization = meta.api_version.starts_with("kustomize.config.k8s.io")
        || (meta.api_version.is_empty() && meta.kind == "Kustomization");
    if kustomization {
        None
    } else if meta.api_version.is_empty() {
        Some("resource must have `apiVersion`")
    } else if meta.kind.is_empty() {
        Some("resource must have `kind`")
    } else if meta.name.is_empty() {
        Some("resource must have `metadata.name`")
    } else {
        None
    }
}

/// kpt's `ValidateFunctionImageURL`: Docker's reference grammar,
///
/// ```text
/// name      := [domain '/'] path ('/' path)*
/// domain    := component ('.' component)* [':' [0-9]+]
/// component := [a-zA-Z0-9] | [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]
/// path      := [a-z0-9]+ (separator [a-z0-9]+)*,  separator := '.' | '_' | '__' | '-'*
/// image     := name [(':' | '@') (tag | 'sha256:' [a-zA-Z0-9]{64})]
/// tag       := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
/// ```
///
/// matched here without a regular expression: the version may start at
/// any `:` or `@`, so each is tried.
pub fn valid_image_name(image: &str) -> bool {
    if is_name(image) {
        return true;
    }
    image
        .char_indices()
        .any(|(i, c)| (c == ':' || c == '@') && is_name(&image[..i]) && is_version(&image[i + 1..]))
}

fn is_name(s: &str) -> bool {
    let parts: Vec<&str> = s.split('/').collect();
    let all_paths = |ps: &[&str]| !ps.is_empty() && ps.iter().all(|p| is_path_component(p));
    all_paths(&parts) || (parts.len() > 1 && is_domain(parts[0]) && all_paths(&parts[1..]))
}

fn is_domain(s: &str) -> bool {
    let (host, port) = match s.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (s, None),
    };
    let component = |c: &str| {
        !c.is_empty()
            && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !c.starts_with('-')
            && !c.ends_with('-')
    };
    host.split('.').all(component)
        && port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

fn is_path_component(s: &str) -> bool {
    let lower_alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let b = s.as_bytes();
    if b.is_empty() || !lower_alnum(b[0]) || !lower_alnum(b[b.len() - 1]) {
        return false;
    }
    // The runs between alphanumerics must each be a separator.
    let mut rest = s;
    while let Some(start) = rest.find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit())) {
        let run_len = rest[start..]
            .find(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            .unwrap_or(rest.len() - start);
        let run = &rest[start..start + run_len];
        let separator =
            matches!(run, "." | "_" | "__") || (!run.is_empty() && run.bytes().all(|b| b == b'-'));
        if !separator {
            return false;
        }
        rest = &rest[start + run_len..];
    }
    true
}

fn is_version(s: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let tag = !s.is_empty()
        && s.len() <= 128
        && word(s.as_bytes()[0])
        && s.bytes().all(|b| word(b) || b == b'.' || b == b'-');
    let digest = s
        .strip_prefix("sha256:")
        .is_some_and(|d| d.len() == 64 && d.bytes().all(|b| b.is_ascii_alphanumeric()));
    tag || digest
}

#[cfg(test)]
mod tests {
    use super::valid_image_name;

    /// kpt 1.0.0-beta.56's answers (`kpt fn render` on a Kptfile with each
    /// as a function's image).
    #[test]
    fn image_names_as_kpt_judges_them() {
        let long = |n: usize| format!("a:{}", "x".repeat(n));
        let digest = "0123456789012345678901234567890123456789012345678901234567890123";
        let valid = [
            "ok".to_owned(),
            "gcr.io/kpt-fn/set-labels:v0.1".into(),
            "localhost:5000/foo".into(),
            "localhost:5000/foo:v1".into(),
            format!("a@sha256:{digest}"),
            format!("a:sha256:{digest}"),
            format!("sha256:{digest}"),
            "Upper.io/x".into(),
            "a__b".into(),
            "a--b".into(),
            "a:_x".into(),
            "a:x.y-z".into(),
            "a/b/c:1".into(),
            "a@v1".into(),
            long(128),
        ];
        let invalid = [
            "a@sha256:abc".to_owned(),
            "A".into(),
            "x/Upper".into(),
            "a___b".into(),
            "a-".into(),
            "-a".into(),
            "a..b".into(),
            "a._b".into(),
            "a:".into(),
            "a:-x".into(),
            "a:1:2".into(),
            "host-:1/x".into(),
            "h.-a/x".into(),
            "h:/x".into(),
            "a//b".into(),
            "/a".into(),
            "a/".into(),
            long(129),
            "a b".into(),
            "é".into(),
            "a:b@c".into(),
            "Bad!Image".into(),
            "".into(),
        ];
        for name in &valid {
            assert!(valid_image_name(name), "{name} is valid");
        }
        for name in &invalid {
            assert!(!valid_image_name(name), "{name} is invalid");
        }
    }
}
