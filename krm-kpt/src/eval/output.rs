//! The function's output: parsing its ResourceList, processing the items
//! (comments and field order restored, path and index annotations
//! reconciled) for where they go, and writing them as files.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use super::error::Error;
use super::input::{krm_problem, read_stream, set_all, wrap_and_encode, wrapped_list, Input};
use super::options::Output;
use krm_results::FnResult;
use krm_yaml::alias::{expand_misplaced, Expansions};
use krm_yaml::package::{self, annotations as ann, kyaml, PackageError, Placed, Progress};
use krm_yaml::{self as yaml, Kind, Node};

/// The output of `function` (as `[RUNNING]` names it), checked, as items
/// and results.
pub(super) fn parse_output(
    stdout: &[u8],
    function: &str,
) -> Result<(Vec<Node>, Vec<FnResult>), Error> {
    // kpt reads a mapping with a key twice and loses the second value; it
    // is refused, and named by the function, as the text is no file.
    let read_error = |e: package::DocError| match e {
        e @ package::DocError::DuplicateKey(_) => Error::OutputDuplicateKey {
            function: function.to_owned(),
            source: e,
        },
        e => Error::BadOutput(e.to_string()),
    };
    // kpt reads an empty answer as a list of no resources and deletes
    // every file of the package; a function that printed nothing more
    // likely failed without saying so.
    if stdout.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::BadOutput(
            "the function printed nothing; nothing was written (kpt would read this as no \
             resources and delete every file of the package; a function that means to \
             delete them all prints a ResourceList with `items: []`)"
                .into(),
        ));
    }
    if let Err(e) = krm_results::parse_output(stdout) {
        // Its limits on aliases name no anchor ("repetition limit
        // exceeded", "recursion limit exceeded"): yaml.v3's message, when
        // that is what failed, says more. So does a duplicate key, which
        // it may meet (a second `items`) in other words.
        let text = std::str::from_utf8(stdout).unwrap_or_default();
        let list = match read_stream(text) {
            Err(dup @ package::DocError::DuplicateKey(_)) => return Err(read_error(dup)),
            read => read.ok().and_then(|mut d| d.pop()),
        };
        return Err(match list.map(|l| results_of(&l.node)) {
            Some(Err(alias)) => alias,
            _ => Error::BadOutput(e.to_string()),
        });
    }
    let text =
        std::str::from_utf8(stdout).map_err(|_| Error::BadOutput("not UTF-8 text".into()))?;
    let mut docs = read_stream(text).map_err(read_error)?;
    if wrapped_list(text, &docs).is_none() {
        return Err(Error::BadOutput("the ResourceList has no items".into()));
    }
    let Some(mut list) = docs.pop().map(|d| d.node) else {
        return Err(Error::BadOutput("the ResourceList has no items".into()));
    };
    let results = results_of(&list)?;
    // Each item will be a document of its own (a file, or one of `-o
    // unwrap`'s documents, or read by a later function apart from the
    // others): an alias to an anchor in another item, or elsewhere in the
    // list, is replaced by what it stands for. kpt writes it as it is,
    // naming an anchor its file does not hold.
    let expansions = match kyaml::field(&list, "items") {
        Some(seq) if seq.kind == Kind::Sequence => Expansions::find(&list, &seq.content)
            .map_err(|e| Error::BadOutput(format!("items: {e}")))?,
        _ => Expansions::default(),
    };
    let root = kyaml::content_mut(&mut list);
    let Some(i) = kyaml::field_index(root, "items") else {
        return Err(Error::BadOutput("the ResourceList has no items".into()));
    };
    let items = std::mem::take(&mut root.content[i + 1]);
    let items = match items.kind {
        Kind::Sequence => {
            let mut items = items.content;
            expansions.apply(&mut items);
            items
        }
        _ if items.tag == kyaml::NULL_TAG => Vec::new(),
        k => {
            return Err(Error::BadOutput(format!(
                "items must be a sequence, found a {}",
                kyaml::kind_name(k)
            )))
        }
    };
    Ok((items, results))
}

/// The results of the ResourceList `list`. Their aliases may name
/// anchors anywhere before them (PyYAML anchors a dict two results share
/// in the first, aliases it in the second).
fn results_of(list: &Node) -> Result<Vec<FnResult>, Error> {
    Ok(match kyaml::field(list, "results") {
        Some(r) => krm_results::kpt::read(
            &yaml::value::to_value_in(list, r)
                .map_err(|e| Error::BadOutput(format!("results: {e}")))?,
        ),
        None => Vec::new(),
    })
}

pub(super) enum Processed {
    Files(Vec<Placed>),
    Text(String),
    /// An error kpt reports after `[PASS]`, when writing.
    Mismatch(Error),
}

fn index_value(path: &str, v: &Option<String>) -> Result<Option<i64>, Error> {
    match v {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => s.trim().parse::<i64>().map(Some).map_err(|_| {
            Error::Package(PackageError::BadIndex {
                path: path.to_owned(),
                value: s.clone(),
            })
        }),
    }
}

/// The path and index annotations of an item, both forms (`""` when
/// missing), and its migration id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct PathAnns {
    pub(super) internal: [String; 2],
    pub(super) legacy: [String; 2],
    pub(super) migration_id: String,
}

pub(super) const INTERNAL_KEYS: [&str; 2] = [ann::PATH, ann::INDEX];
pub(super) const LEGACY_KEYS: [&str; 2] = [ann::LEGACY_PATH, ann::LEGACY_INDEX];
const FORMS: [&str; 2] = ["path", "index"];

impl PathAnns {
    /// The path (`0`) or index (`1`): the internal form, else the legacy.
    pub(super) fn pick(&self, k: usize) -> &str {
        if self.internal[k].is_empty() {
            &self.legacy[k]
        } else {
            &self.internal[k]
        }
    }

    pub(super) fn read(anns: &[(&str, &str)]) -> Self {
        let get = |k: &str| {
            anns.iter()
                .rev()
                .find(|a| a.0 == k)
                .map(|a| a.1.to_owned())
                .unwrap_or_default()
        };
        PathAnns {
            internal: INTERNAL_KEYS.map(get),
            legacy: LEGACY_KEYS.map(get),
            migration_id: get(ann::MIGRATION_ID),
        }
    }

    /// kyaml's `ReconcileInternalAnnotations`: a missing form is copied
    /// from the other; if one form still has the value that was sent, it
    /// takes the other's; if both changed differently, it is an error.
    pub(super) fn reconcile(
        &self,
        originals: &HashMap<String, [String; 2]>,
    ) -> Result<PathAnns, &'static str> {
        let mut cur = self.clone();
        for k in 0..2 {
            if cur.internal[k].is_empty() && !cur.legacy[k].is_empty() {
                cur.internal[k] = cur.legacy[k].clone();
            } else if cur.legacy[k].is_empty() && !cur.internal[k].is_empty() {
                cur.legacy[k] = cur.internal[k].clone();
            }
        }
        if let Some(original) = originals.get(&cur.migration_id) {
            for k in 0..2 {
                let o = &original[k];
                if o.is_empty() {
                    continue;
                }
                if *o != cur.internal[k] && *o != cur.legacy[k] && cur.internal[k] != cur.legacy[k]
                {
                    return Err(FORMS[k]);
                } else if *o != cur.internal[k] {
                    cur.legacy[k] = cur.internal[k].clone();
                } else if *o != cur.legacy[k] {
                    cur.internal[k] = cur.legacy[k].clone();
                }
            }
        }
        for (k, form) in FORMS.iter().enumerate() {
            let (i, l) = (&cur.internal[k], &cur.legacy[k]);
            if !i.is_empty() && !l.is_empty() && i != l {
                return Err(form);
            }
        }
        Ok(cur)
    }
}

/// kpt's `AreKRM` on an output resource.
pub(super) fn output_krm_check(item: &Node) -> Result<(), Error> {
    let meta = kyaml::meta(item);
    let found = PathAnns::read(&kyaml::annotations(item));
    let Some(problem) = krm_problem(&meta, found.pick(0)) else {
        return Ok(());
    };
    let shown = match found.pick(0) {
        "" => package::default_path(&meta),
        path => path.to_owned(),
    };
    Err(Error::OutputNotKrm(format!("{shown}: {problem}")))
}

/// Reconciles, places and cleans the items for `output`. Each item that
/// answers to an input's id first gets that input's comments where it has
/// none, and its field order (kyaml's `copyCommentsAndSyncOrder`).
pub(super) fn process_items(
    items: Vec<Node>,
    input: &Input,
    output: &Output,
    progress: &mut Progress<'_>,
) -> Result<Processed, Error> {
    let total = items.len();
    let mut placed = Vec::with_capacity(items.len());
    // kpt's checks on what the function returned (before reconciling).
    let mut read = Vec::with_capacity(items.len());
    let mut explicit: Vec<(String, String)> = Vec::new();
    for (n, mut item) in items.into_iter().enumerate() {
        progress.tick(|| format!("processing the function's output: {n} of {total} resources"));
        let id = kyaml::annotation(&item, ann::ID)
            .or_else(|| kyaml::annotation(&item, ann::LEGACY_ID))
            .and_then(|id| id.parse::<usize>().ok());
        if let Some(from) = id
            .and_then(|id| id.checked_sub(1))
            .and_then(|i| input.items.get(i))
        {
            kyaml::copy_comments_in_place(from, &mut item);
            kyaml::sync_order(from, &mut item);
            // The sync may put an alias before its anchor (PyYAML writes
            // fields sorted): the file would not parse.
            expand_misplaced(&mut item).map_err(|e| Error::BadOutput(e.to_string()))?;
            kyaml::clear_annotation(&mut item, ann::ID);
            kyaml::clear_annotation(&mut item, ann::LEGACY_ID);
        }
        let meta = kyaml::meta(&item);
        let found = PathAnns::read(&kyaml::annotations(&item));
        let (path, index) = (found.pick(0), found.pick(1));
        if !input.krm_checked {
            output_krm_check(&item)?;
        }
        // kpt's `enforcePathInvariants`, after kyaml gave new resources
        // their default path.
        if path.is_empty() {
            explicit.push((package::default_path(&meta), String::new()));
        } else {
            explicit.push((package::clean_path(path), index.to_owned()));
        }
        let wide = kyaml::annotation(&item, ann::SEQ_INDENT) == Some("wide");
        read.push((item, meta, found, wide));
    }
    package::check_paths(&explicit)?;
    let mut listed = Vec::new();
    let mut unwrapped: Vec<(Node, bool)> = Vec::new();
    for (mut item, meta, found, wide) in read {
        let cur = match found.reconcile(&input.originals) {
            Ok(c) => c,
            Err(what) => {
                return Ok(Processed::Mismatch(Error::Package(
                    PackageError::Mismatched(what),
                )))
            }
        };
        let path = cur.internal[0].clone();
        // kyaml's `LocalPackageWriter` refuses these when writing, after
        // kpt printed `[PASS]`.
        if matches!(output, Output::InPlace | Output::Dir(_)) && path.starts_with('/') {
            return Ok(Processed::Mismatch(PackageError::Absolute(path).into()));
        }
        match output {
            Output::InPlace | Output::Dir(_) => {
                clear_annotations(&mut item, ann::is_kpt);
                let rel = if path.is_empty() {
                    package::default_path(&meta)
                } else {
                    path
                };
                let rel = package::clean_path(rel.trim_start_matches('/'));
                if rel == ".." || rel.starts_with("../") {
                    return Err(PackageError::OutsidePackage(rel).into());
                }
                placed.push(Placed {
                    index: index_value(&rel, &Some(cur.internal[1].clone()))?,
                    path: rel,
                    node: item,
                    wide,
                });
            }
            Output::Stdout => {
                let mut set: Vec<(&str, String)> = Vec::new();
                for k in 0..2 {
                    if cur.internal[k] != found.internal[k] {
                        set.push((INTERNAL_KEYS[k], cur.internal[k].clone()));
                    }
                    if cur.legacy[k] != found.legacy[k] {
                        set.push((LEGACY_KEYS[k], cur.legacy[k].clone()));
                    }
                }
                if path.is_empty() {
                    let default = package::default_path(&meta);
                    if input.use_internal {
                        set.push((ann::PATH, default.clone()));
                    }
                    if input.use_legacy {
                        set.push((ann::LEGACY_PATH, default));
                    }
                }
                let set: Vec<(&str, &str)> = set.iter().map(|(k, v)| (*k, v.as_str())).collect();
                set_all(&mut item, &set).map_err(|e| Error::BadOutput(e.to_string()))?;
                let (ui, ul) = (input.use_internal, input.use_legacy);
                clear_annotations(&mut item, |k: &str| {
                    ann::is_id(k)
                        || (!ui && matches!(k, ann::PATH | ann::INDEX | ann::SEQ_INDENT))
                        || (!ul && matches!(k, ann::LEGACY_PATH | ann::LEGACY_INDEX))
                });
                listed.push(item);
            }
            Output::Unwrap => {
                clear_annotations(&mut item, ann::is_kpt);
                unwrapped.push((item, wide));
            }
        }
    }
    Ok(match output {
        Output::InPlace | Output::Dir(_) => Processed::Files(placed),
        Output::Stdout => Processed::Text(wrap_and_encode(
            (&input.wrapper.0, &input.wrapper.1),
            &mut listed,
            Vec::new(),
        )),
        Output::Unwrap => {
            let docs: Vec<(&Node, bool)> = unwrapped.iter().map(|(n, w)| (n, *w)).collect();
            Processed::Text(package::documents_text(&docs))
        }
    })
}

/// The items of a ResourceList text as kyaml's `ByteReader` reads them back.
fn reread_items(text: &str) -> Result<Vec<Node>, Error> {
    let mut docs = read_stream(text).map_err(|e| Error::BadOutput(e.to_string()))?;
    if wrapped_list(text, &docs).is_none() {
        return Ok(docs.into_iter().map(|d| d.node).collect());
    }
    let Some(mut list) = docs.pop().map(|d| d.node) else {
        return Ok(Vec::new());
    };
    let root = kyaml::content_mut(&mut list);
    Ok(match kyaml::field_index(root, "items") {
        Some(i) if root.content[i + 1].kind == Kind::Sequence => {
            std::mem::take(&mut root.content[i + 1].content)
        }
        _ => Vec::new(),
    })
}

/// `-o unwrap` from the text of `-o stdout`: kyaml's `ByteWriter` without
/// a wrapper, clearing the path, index and seqindent annotations; one
/// resource from a `.json` file is written as JSON.
pub(super) fn unwrap_text(text: &str) -> Result<String, Error> {
    let mut items = reread_items(text)?;
    if let [item] = items.as_slice() {
        let path = kyaml::annotation(item, ann::PATH)
            .or_else(|| kyaml::annotation(item, ann::LEGACY_PATH))
            .unwrap_or_default();
        if path.ends_with(".json") {
            let mut item = item.clone();
            clear_annotations(&mut item, ann::is_kpt);
            return Ok(package::file_content("x.json", &[(&item, false)])?);
        }
    }
    let mut docs = Vec::with_capacity(items.len());
    for mut item in items.drain(..) {
        let wide = kyaml::annotation(&item, ann::SEQ_INDENT) == Some("wide");
        clear_annotations(&mut item, |k| {
            matches!(
                k,
                ann::PATH | ann::INDEX | ann::LEGACY_PATH | ann::LEGACY_INDEX | ann::SEQ_INDENT
            )
        });
        docs.push((item, wide));
    }
    let refs: Vec<(&Node, bool)> = docs.iter().map(|(n, w)| (n, *w)).collect();
    Ok(package::documents_text(&refs))
}

/// `-o DIR` from the text of `-o stdout`: kyaml's `LocalPackageWriter`.
pub(super) fn placed_from_text(text: &str) -> Result<Vec<Placed>, Error> {
    let mut placed = Vec::new();
    for mut item in reread_items(text)? {
        let found = PathAnns::read(&kyaml::annotations(&item));
        let pick = |k: usize| found.pick(k).to_owned();
        let (path, index) = (pick(0), pick(1));
        if path.starts_with('/') {
            return Err(PackageError::Absolute(path).into());
        }
        let wide = kyaml::annotation(&item, ann::SEQ_INDENT) == Some("wide");
        let rel = if path.is_empty() {
            package::default_path(&kyaml::meta(&item))
        } else {
            path
        };
        let rel = package::clean_path(rel.trim_start_matches('/'));
        if rel == ".." || rel.starts_with("../") {
            return Err(PackageError::OutsidePackage(rel).into());
        }
        clear_annotations(&mut item, ann::is_kpt);
        placed.push(Placed {
            index: index_value(&rel, &Some(index))?,
            path: rel,
            node: item,
            wide,
        });
    }
    Ok(placed)
}

/// kyaml's `ClearAnnotation` for each annotation `remove` names, then
/// `ClearEmptyAnnotations`.
pub(crate) fn clear_annotations(item: &mut Node, remove: impl Fn(&str) -> bool) {
    let keys: Vec<String> = kyaml::annotations(item)
        .into_iter()
        .filter(|(k, _)| remove(k))
        .map(|(k, _)| k.to_owned())
        .collect();
    for k in keys {
        kyaml::clear_annotation(item, &k);
    }
    kyaml::clear_empty_annotations(item);
}
pub(super) fn write_files(
    input: &Input,
    placed: Vec<Placed>,
    output: &Output,
    stderr: &mut (dyn Write + Send),
) -> Result<(), Error> {
    let (root, delete) = match (output, &input.dir) {
        (Output::Dir(d), _) => {
            std::fs::create_dir_all(d).map_err(|source| PackageError::Io {
                path: d.clone(),
                source,
            })?;
            (d.clone(), false)
        }
        (_, Some(d)) => (d.clone(), true),
        (_, None) => (PathBuf::from("."), false),
    };
    let mut progress = Progress::new(Some(stderr));
    let (_, kept) = package::write_package(&root, placed, &mut progress)?;
    if delete {
        package::delete_gone(&root, &input.files_read, &kept)?;
    }
    Ok(())
}
