//! Reading the input: a package directory, or a ResourceList or stream of
//! documents from stdin, into items with kpt's annotations (and the
//! selection a function sees); the `functionConfig` (a file, or the
//! `function-input` ConfigMap of `key=value` arguments); the ResourceList
//! sent to the function.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::error::Error;
use super::options::FnConfig;
use crate::select::{self, Selector};
use krm_yaml::package::{self, annotations as ann, kyaml, Meta, PackageError, Progress};
use krm_yaml::{self as yaml, Kind, Node, Style};

/// What was read, ready to send.
pub(super) struct Input {
    /// Items as sent (with kpt's annotations): documents, or the bare
    /// items of a ResourceList read from stdin.
    pub(super) items: Vec<Node>,
    /// Paths of the items as sent, for messages (`""` when none).
    pub(super) paths: Vec<String>,
    /// The path and index sent, by migration id (kyaml's `nodeAnnosMap`,
    /// to tell which of the two forms a function changed).
    pub(super) originals: HashMap<String, [String; 2]>,
    /// Whether the input used the internal / legacy path annotations.
    pub(super) use_internal: bool,
    pub(super) use_legacy: bool,
    /// Files read (package directory).
    pub(super) files_read: Vec<String>,
    pub(super) dir: Option<PathBuf>,
    /// `apiVersion`, `kind` of the list written to stdout.
    pub(super) wrapper: (String, String),
    /// Whether the function's output was checked to hold resources only
    /// before it was merged back among the resources it did not see (kpt
    /// checks only what the function returned).
    pub(super) krm_checked: bool,
}

const RESOURCE_LIST_HEADER: (&str, &str) = ("config.kubernetes.io/v1", "ResourceList");

pub(super) fn read_dir_input(dir: &Path, stderr: &mut (dyn Write + Send)) -> Result<Input, Error> {
    let files = {
        let mut progress = Progress::new(Some(&mut *stderr));
        package::read_package(dir, &mut progress)?
    };
    let mut input = Input {
        items: Vec::new(),
        paths: Vec::new(),
        originals: HashMap::new(),
        use_internal: true,
        use_legacy: true,
        files_read: Vec::new(),
        dir: Some(dir.to_path_buf()),
        wrapper: (RESOURCE_LIST_HEADER.0.into(), RESOURCE_LIST_HEADER.1.into()),
        krm_checked: false,
    };
    let mut n = 0usize;
    for file in files {
        for (i, doc) in file.documents.into_iter().enumerate() {
            let index = i.to_string();
            let mid = n.to_string();
            let id = (n + 1).to_string();
            // kyaml's reader annotations (sorted), kpt's migration id, the
            // function filter's ids.
            let set = [
                (ann::LEGACY_INDEX, index.as_str()),
                (ann::LEGACY_PATH, file.path.as_str()),
                (ann::INDEX, index.as_str()),
                (ann::PATH, file.path.as_str()),
                (ann::SEQ_INDENT, doc.seq_indent),
                (ann::MIGRATION_ID, mid.as_str()),
                (ann::ID, id.as_str()),
                (ann::LEGACY_ID, id.as_str()),
            ];
            let mut node = doc.node;
            set_all(&mut node, &set).map_err(|e| doc_error(&file.path, e))?;
            input.items.push(node);
            input.paths.push(file.path.clone());
            input.originals.insert(mid, [file.path.clone(), index]);
            n += 1;
        }
        input.files_read.push(file.path);
    }
    input.files_read.sort();
    Ok(input)
}

pub(crate) fn set_all(node: &mut Node, set: &[(&str, &str)]) -> Result<(), kyaml::NotAMapping> {
    for (k, v) in set {
        kyaml::set_annotation(node, k, v)?;
    }
    Ok(())
}

pub(crate) fn doc_error(path: &str, e: impl std::fmt::Display) -> Error {
    Error::Package(PackageError::File {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// Narrows `input` to the resources the function is to see, as kpt's
/// `runfn` does: every resource gets its [`select::RESOURCE_ID`], then the
/// selected ones (copies) get the function's ids, numbered among
/// themselves. Returns every resource (without the function's ids) and the
/// positions of the selected ones, for [`select::merge`].
pub(super) fn select_input(
    input: &mut Input,
    selectors: &[Selector],
    exclusions: &[Selector],
) -> Result<(Vec<Node>, Vec<usize>), Error> {
    let mut all = std::mem::take(&mut input.items);
    for item in &mut all {
        for k in ann::IDS {
            kyaml::clear_annotation(item, k);
        }
    }
    select::set_ids(&mut all).map_err(|e| Error::Input(e.to_string()))?;
    let picked = select::select(&all, selectors, exclusions);
    let paths = std::mem::take(&mut input.paths);
    let originals = std::mem::take(&mut input.originals);
    // The path and index each was sent with, by its old migration id (its
    // position).
    for (n, &i) in picked.iter().enumerate() {
        let mut item = all[i].clone();
        let (mid, id) = (n.to_string(), (n + 1).to_string());
        set_all(
            &mut item,
            &[
                (ann::MIGRATION_ID, mid.as_str()),
                (ann::ID, id.as_str()),
                (ann::LEGACY_ID, id.as_str()),
            ],
        )
        .map_err(|e| Error::Input(e.to_string()))?;
        if let Some(o) = originals.get(&i.to_string()) {
            input.originals.insert(mid, o.clone());
        }
        input.paths.push(paths.get(i).cloned().unwrap_or_default());
        input.items.push(item);
    }
    Ok((all, picked))
}

pub(super) fn read_stream_input(bytes: &[u8]) -> Result<Input, Error> {
    let text =
        std::str::from_utf8(bytes).map_err(|_| Error::Input("input is not UTF-8 text".into()))?;
    let mut input = Input {
        items: Vec::new(),
        paths: Vec::new(),
        originals: HashMap::new(),
        use_internal: true,
        use_legacy: true,
        files_read: Vec::new(),
        dir: None,
        wrapper: (RESOURCE_LIST_HEADER.0.into(), RESOURCE_LIST_HEADER.1.into()),
        krm_checked: false,
    };
    let mut docs = read_stream(text).map_err(|e| Error::Input(e.to_string()))?;
    if wrapped_list(text, &docs).is_some() {
        // A ResourceList (or List): its items as they are, plus kpt's ids.
        let mut list = docs.pop().map(|d| d.node).unwrap_or_default();
        let meta = kyaml::meta(&list);
        input.wrapper = (meta.api_version, meta.kind);
        input.use_internal = false;
        input.use_legacy = false;
        let root = kyaml::content_mut(&mut list);
        let items: Vec<Node> = match kyaml::field_index(root, "items") {
            Some(i) => std::mem::take(&mut root.content[i + 1].content),
            None => Vec::new(),
        };
        drop(list);
        let mut parsed = Vec::with_capacity(items.len());
        for item in items {
            let get = |k: &str| kyaml::annotation(&item, k).map(str::to_owned);
            let found = [
                get(ann::LEGACY_PATH),
                get(ann::LEGACY_INDEX),
                get(ann::PATH),
                get(ann::INDEX),
            ];
            input.use_legacy |= found[0].is_some() || found[1].is_some();
            input.use_internal |= found[2].is_some() || found[3].is_some();
            parsed.push((item, found));
        }
        for (n, (mut item, [lp, li, ip, ii])) in parsed.into_iter().enumerate() {
            let mid = n.to_string();
            let id = (n + 1).to_string();
            let mut set: Vec<(&str, &str)> = vec![(ann::MIGRATION_ID, mid.as_str())];
            match (&ip, &lp) {
                (None, Some(p)) => set.push((ann::PATH, p)),
                (Some(p), None) => set.push((ann::LEGACY_PATH, p)),
                _ => {}
            }
            match (&ii, &li) {
                (None, Some(i)) => set.push((ann::INDEX, i)),
                (Some(i), None) => set.push((ann::LEGACY_INDEX, i)),
                _ => {}
            }
            set.push((ann::ID, id.as_str()));
            set.push((ann::LEGACY_ID, id.as_str()));
            set_all(&mut item, &set).map_err(|e| Error::Input(e.to_string()))?;
            let path = ip.clone().or(lp.clone()).unwrap_or_default();
            input.paths.push(path.clone());
            input
                .originals
                .insert(mid.clone(), [path, ii.or(li).unwrap_or_default()]);
            input.items.push(item);
        }
        return Ok(input);
    }
    for (n, doc) in docs.into_iter().enumerate() {
        let index = n.to_string();
        let id = (n + 1).to_string();
        let set = [
            (ann::LEGACY_INDEX, index.as_str()),
            (ann::INDEX, index.as_str()),
            (ann::SEQ_INDENT, doc.seq_indent),
            (ann::MIGRATION_ID, index.as_str()),
            (ann::ID, id.as_str()),
            (ann::LEGACY_ID, id.as_str()),
        ];
        let mut node = doc.node;
        set_all(&mut node, &set).map_err(|e| Error::Input(e.to_string()))?;
        input.items.push(node);
        input.paths.push(String::new());
        input
            .originals
            .insert(index.clone(), [String::new(), index]);
    }
    Ok(input)
}

/// A stream's documents as kyaml's `ByteReader` reads them.
pub(super) fn read_stream(text: &str) -> Result<Vec<package::Document>, package::DocError> {
    package::read_documents(text)
}

/// The one document of a stream that is one ResourceList or List (with
/// `items` or `functionConfig`), as kyaml unwraps it.
pub(super) fn wrapped_list<'a>(text: &str, docs: &'a [package::Document]) -> Option<&'a Node> {
    // kyaml unwraps only when the stream is one piece.
    let single =
        package::split_pieces(&package::normalize_newlines(text)).is_ok_and(|p| p.len() == 1);
    let [doc] = docs else {
        return None;
    };
    if !single {
        return None;
    }
    let meta = kyaml::meta(&doc.node);
    if meta.kind != "ResourceList" && meta.kind != "List" {
        return None;
    }
    if kyaml::field(&doc.node, "items").is_none()
        && kyaml::field(&doc.node, "functionConfig").is_none()
    {
        return None;
    }
    Some(&doc.node)
}

/// The `functionConfig` node.
pub(crate) fn function_config(cfg: &FnConfig) -> Result<Node, Error> {
    match cfg {
        FnConfig::File(path) => {
            let shown = path.display().to_string();
            if !path.exists() {
                return Err(Error::MissingFnConfig(shown));
            }
            // kpt's `GetValidatedFnConfigFromPath` on the file, named by
            // its absolute path: one KRM resource (a name, one document).
            let absolute = std::path::absolute(path)
                .map(|a| package::clean_path(&a.to_string_lossy()))
                .unwrap_or_else(|_| shown.clone());
            crate::kptfile::check_config_file(path, &absolute).map_err(Error::Input)?;
            let text =
                std::fs::read_to_string(path).map_err(|_| Error::MissingFnConfig(shown.clone()))?;
            let docs =
                read_stream(&text).map_err(|e| Error::BadFnConfig(shown.clone(), e.to_string()))?;
            let Some(doc) = docs.into_iter().next() else {
                return Err(Error::BadFnConfig(shown, "it is empty".into()));
            };
            let set = [
                (ann::LEGACY_INDEX, "0"),
                (ann::INDEX, "0"),
                (ann::SEQ_INDENT, doc.seq_indent),
            ];
            let mut node = doc.node;
            set_all(&mut node, &set).map_err(|e| Error::BadFnConfig(shown, e.to_string()))?;
            Ok(node)
        }
        FnConfig::Args(args) => {
            let mut kind = "ConfigMap";
            let mut data: Vec<(&str, &str)> = Vec::new();
            for (i, arg) in args.iter().enumerate() {
                match arg.split_once('=') {
                    Some(("", _)) => return Err(Error::BadArg),
                    Some((k, v)) => match data.iter_mut().find(|d| d.0 == k) {
                        Some(d) => d.1 = v,
                        None => data.push((k, v)),
                    },
                    None if i == 0 => kind = arg,
                    None => return Err(Error::BadArg),
                }
            }
            // kpt's `getCLIFunctionConfig`: a parsed skeleton, fields set
            // with kyaml's `SetField` (string values; kind and apiVersion
            // untagged).
            let skeleton = "metadata:\n  name: function-input\ndata: {}\n";
            let mut doc = yaml::parse::parse(skeleton)
                .ok()
                .and_then(|d| d.into_iter().next())
                .ok_or_else(|| Error::Input("the function-input skeleton".into()))?;
            let root = kyaml::content_mut(&mut doc);
            let set = |map: &mut Node, k: &str, v: Node| {
                kyaml::set_field(map, k, v).map_err(|e| Error::Input(e.to_string()))
            };
            if let Some(i) = kyaml::field_index(root, "data") {
                for (k, v) in &data {
                    // kyaml's `NewStringRNode`: multi-line values literal.
                    let mut value = Node::string(*v);
                    if v.contains('\n') {
                        value.style = Style::LITERAL;
                    }
                    set(&mut root.content[i + 1], k, value)?;
                }
            }
            set(root, "kind", bare(kind))?;
            set(root, "apiVersion", bare("v1"))?;
            Ok(doc)
        }
    }
}

/// An untagged scalar, as kyaml builds keys.
pub(super) fn bare(s: &str) -> Node {
    Node {
        kind: Kind::Scalar,
        value: s.into(),
        ..Node::default()
    }
}

/// kyaml's `ByteWriter` with a wrapper: `apiVersion`, `kind`, `items` (each
/// a document's content), then the extra fields, by the yaml.v3 encoder
/// with compact sequences. The items are moved in and back out, not copied.
pub(super) fn wrap_and_encode(
    header: (&str, &str),
    items: &mut [Node],
    extra: Vec<(&str, Node)>,
) -> String {
    let mut seq = Node {
        kind: Kind::Sequence,
        ..Node::default()
    };
    seq.content = items
        .iter_mut()
        .map(|d| std::mem::take(kyaml::content_mut(d)))
        .collect();
    let mut content = vec![
        bare("apiVersion"),
        bare(header.0),
        bare("kind"),
        bare(header.1),
        bare("items"),
        seq,
    ];
    for (k, v) in extra {
        content.push(bare(k));
        content.push(v);
    }
    let mut list = Node {
        kind: Kind::Mapping,
        content,
        ..Node::default()
    };
    let text = yaml::emit::encode_node(&list, true);
    let Some(seq) = list.content.get_mut(5) else {
        return text;
    };
    for (d, n) in items.iter_mut().zip(seq.content.drain(..)) {
        *kyaml::content_mut(d) = n;
    }
    text
}

/// The ResourceList sent to the function.
pub(super) fn assemble(items: &mut [Node], fn_config: Option<Node>) -> Bytes {
    let extra = fn_config
        .map(|fc| match fc.kind {
            Kind::Document => fc.content.into_iter().next().unwrap_or_default(),
            _ => fc,
        })
        .map(|fc| ("functionConfig", fc));
    Bytes::from(wrap_and_encode(
        RESOURCE_LIST_HEADER,
        items,
        extra.into_iter().collect(),
    ))
}

/// kpt's `IsKRM` on a resource read from (or bound for) `path`:
/// `apiVersion`, `kind` and `metadata.name` are required, but of a
/// Kustomization (a file named `kustomization.yaml`, `kustomization.yml`
/// or `Kustomization`, whatever it holds; an apiVersion of kustomize's
/// group; no apiVersion and kind `Kustomization`), which passes as it is
/// (`api/kptfile/v1/validation.go@v1.0.0-beta.67:181-273`, the same in
/// beta.56).
pub(crate) fn krm_problem(meta: &Meta, path: &str) -> Option<&'static str> {
    let file = path.rsplit('/').next().unwrap_or_default();
    let kustomization = ["kustomization.yaml", "kustomization.yml", "Kustomization"]
        .contains(&file)
        || meta.api_version.starts_with("kustomize.config.k8s.io")
        || (meta.api_version.is_empty() && meta.kind == "Kustomization");
    if kustomization {
        None
    } else if !meta.has_metadata && meta.api_version.is_empty() && meta.kind.is_empty() {
        Some("resource must have `apiVersion`, `kind`, and `name`")
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

pub(super) fn check_krm(input: &Input) -> Result<(), Error> {
    for (item, path) in input.items.iter().zip(&input.paths) {
        if let Some(problem) = krm_problem(&kyaml::meta(item), path) {
            return Err(Error::InputNotKrm(format!("{path}: {problem}")));
        }
    }
    Ok(())
}
