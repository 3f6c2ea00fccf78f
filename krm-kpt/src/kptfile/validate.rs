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
    if !image.is_empty() {
        if let Err(reason) = check_image_reference(image) {
            return Err(invalid(&format!("{at}.image"), image, &reason));
        }
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
pub(crate) fn config_file(path: &Path, shown: &str) -> Result<(), String> {
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
        // beta.67's text (beta.56: `functionConfig must exist in the
        // current package`).
        Err(e) => {
            return Err(format!(
                "failed to open functionConfig from path {quoted}: open {}: {}",
                path.display(),
                crate::eval::go_os_error(&e)
            ))
        }
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

/// kpt v1.0.0-beta.67's `ValidateFunctionImageURL`: distribution's
/// `reference.Parse` (v0.6.0; beta.56 had a grammar of its own that took
/// `a@v1` and refused a tag and a digest together), with its errors'
/// texts, as `function image reference "<image>" is invalid: <why>`.
pub fn check_image_reference(image: &str) -> Result<(), String> {
    reference_error(image).map_or(Ok(()), |why| {
        Err(format!(
            "function image reference {} is invalid: {why}",
            package::go_quote(image)
        ))
    })
}

/// distribution's `DomainRegexp`, anchored.
static DOMAIN: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    let domain_component = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
    let pattern = format!(
        r"^(?:{c}(?:\.{c})*|\[(?:[a-fA-F0-9:]+)\])(?::[0-9]+)?$",
        c = domain_component
    );
    regex::Regex::new(&pattern).unwrap_or_else(|e| unreachable!("the grammar is fixed: {e}"))
});

/// distribution's `ReferenceRegexp` (`regexp.go@v0.6.0`), anchored.
static REFERENCE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    let alnum = "[a-z0-9]+";
    let separator = "(?:[._]|__|[-]+)";
    let path_component = format!("{alnum}(?:{separator}{alnum})*");
    let domain_component = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
    let domain_name = format!("{domain_component}(?:\\.{domain_component})*");
    let ipv6 = r"\[(?:[a-fA-F0-9:]+)\]";
    let host = format!("(?:{domain_name}|{ipv6})");
    let domain = format!("{host}(?::[0-9]+)?");
    let name = format!("(?:{domain}/)?{path_component}(?:/{path_component})*");
    // Go's `\w` is ASCII.
    let tag = "[0-9A-Za-z_][0-9A-Za-z_.-]{0,127}";
    let digest = "[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][[:xdigit:]]{32,}";
    let pattern = format!("^({name})(?::({tag}))?(?:@({digest}))?$");
    regex::Regex::new(&pattern).unwrap_or_else(|e| unreachable!("the grammar is fixed: {e}"))
});

/// Why distribution's `Parse` refuses `s`, in its words; `None`: it
/// takes it.
fn reference_error(s: &str) -> Option<&'static str> {
    let Some(m) = REFERENCE.captures(s) else {
        return Some(if s.is_empty() {
            "repository name must have at least one component"
        } else if REFERENCE.is_match(&s.to_lowercase()) {
            "repository name must be lowercase"
        } else {
            "invalid reference format"
        });
    };
    // The limit is on the repository path: the name without its domain
    // (a first component the domain grammar takes, as the anchored name
    // grammar splits it).
    let name = m.get(1).map_or("", |n| n.as_str());
    let path = match name.split_once('/') {
        Some((first, rest)) if DOMAIN.is_match(first) => rest,
        _ => name,
    };
    if path.len() > 255 {
        return Some("repository name must not be more than 255 characters");
    }
    // go-digest's `Validate`: a known algorithm, its hex length, lower
    // case.
    let digest = m.get(3)?.as_str();
    let (algorithm, hex) = digest.split_once(':')?;
    let size = match algorithm {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return Some("unsupported digest algorithm"),
    };
    if hex.len() != size {
        return Some("invalid checksum digest length");
    }
    if !hex
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Some("invalid checksum digest format");
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::check_image_reference;

    /// distribution/reference v0.6.0's answers, kpt beta.67's text
    /// (`validation_test.go@v1.0.0-beta.67:236-247`: a tag and a digest
    /// together are taken, `name@v0.1.0` is not).
    #[test]
    fn image_references_as_beta_67_judges_them() {
        let long = |n: usize| format!("a:{}", "x".repeat(n));
        let digest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let valid = [
            "ok".to_owned(),
            "ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.1".into(),
            "localhost:5000/foo".into(),
            "localhost:5000/foo:v1".into(),
            format!("a@sha256:{digest}"),
            format!("example.com/foo/generate-folders:v0.1.0@sha256:{digest}"),
            format!("example:v0.1.0@sha256:{digest}"),
            "Upper.io/x".into(),
            "[::1]:5000/x".into(),
            "a__b".into(),
            "a--b".into(),
            "a:_x".into(),
            "a/b/c:1".into(),
            long(128),
        ];
        for name in &valid {
            assert_eq!(check_image_reference(name), Ok(()), "{name}");
        }
        let why = |s: &str| check_image_reference(s).unwrap_err();
        assert_eq!(
            why("generate-folders@v0.1.0"),
            "function image reference \"generate-folders@v0.1.0\" is invalid: invalid reference format"
        );
        // Upper case is for a domain only.
        assert_eq!(check_image_reference("Foo/bar"), Ok(()));
        assert!(why("foo/Bar").ends_with(": repository name must be lowercase"));
        assert!(why("").ends_with(": repository name must have at least one component"));
        assert!(why(&format!("a@sha256:{}", &digest[..60]))
            .ends_with(": invalid checksum digest length"));
        assert!(why(&format!("a@md5:{digest}")).ends_with(": unsupported digest algorithm"));
        assert!(why(&format!("a@sha256:{}", digest.to_uppercase()))
            .ends_with(": invalid checksum digest format"));
        // The limit counts the path, not the domain.
        assert!(why(&format!("x/{}", "a".repeat(256))).ends_with("more than 255 characters"));
        assert_eq!(
            check_image_reference(&format!("{}/x", "a".repeat(255))),
            Ok(())
        );
        for bad in [
            "a___b",
            "a-",
            "-a",
            "a:",
            "a:-x",
            "a//b",
            "/a",
            "a/",
            "a b",
            "é",
            "Bad!Image",
        ] {
            assert!(why(bad).ends_with(": invalid reference format"), "{bad}");
        }
        assert!(why(&long(129)).ends_with(": invalid reference format"));
    }
}
