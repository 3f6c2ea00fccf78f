//! `apply-setters`: sets the fields a `# kpt-set: <pattern>` line comment
//! marks to the pattern with the config's setter values put in
//! (`image: nginx:1.7.1 # kpt-set: ${image}:${tag}`), and replaces the
//! elements of a sequence marked `# kpt-set: ${name}` with the setter's
//! value read as a YAML sequence.
//!
//! Follows kptdev/krm-functions-catalog at
//! 76fe3817f9496724ca04414d136917a9926e5e40,
//! `functions/go/apply-setters/main.go` and
//! `applysetters/{apply_setters,walk}.go`, on kyaml v0.10.21 (its
//! `framework`, `RNode.GetDataMap`, `kioutil.GetFileAnnotations`).
//!
//! - Config: any config's `data` (`GetDataMap`): a `v1 ConfigMap`, the
//!   `function-input` ConfigMap of `eval -- k=v`, an `ApplySetters` with
//!   `data`; no config or no `data` is no setters (result "no matches for
//!   input setter(s)"). Nothing is refused.
//! - Results: `set field value to "<value>"` with the field's path and the
//!   resource's `config.kubernetes.io/path`, no severity; on failure only
//!   `failed to apply setters: <error>` (severity error), the items as far
//!   as they were changed, and the error twice on stderr (exit 1).
//!
//! Releases: answers as v0.2.0, v0.2.1 and master (the same code; v0.2.1
//! only rebuilt it), and as v0.1.1 (`apply-setters/v0.1.1`, a20d1356,
//! kyaml v0.10.20) when [`Context::release`] names it. v0.1.1 fails in two
//! places where later releases go on (`git diff apply-setters/v0.1.1
//! apply-setters/v0.2.0`): no setters (`data` missing or empty) is
//! `input setters list cannot be empty`, before any item is read; nothing
//! matched is `no matches for the input list of setters` (not the
//! result `no matches for input setter(s)`). Both are the one result
//! `failed to apply setters: <error>` (error), the items unchanged, the
//! error twice on stderr, exit 1. v0.1.0 (kyaml's older framework, no
//! results, other walk rules) is not reproduced.
//!
//! Departure: Go reads the setters from a map, so their order (which
//! matters only when a setter's value itself holds `${other}`) is random
//! there; here it is `data`'s order.

use krm_yaml::{Kind, Node, Style, Tag};

use crate::catalog;
use crate::function::{Context, ResourceList, Stop};
use crate::result::FnResult;
use crate::setters::{clean, current_setter_values, extract_setter_pattern, unresolved_setters};

#[cfg(test)]
mod tests;

struct Setter {
    name: String,
    value: String,
}

/// One field set: `Result`.
struct Set {
    file_path: String,
    field_path: String,
    value: String,
}

struct Apply<'a> {
    setters: &'a [Setter],
    results: Vec<Set>,
    file_path: String,
    /// The text the setters put in, bounded for a run.
    produced: catalog::Produced,
}

pub(crate) fn run(rl: &mut ResourceList, ctx: &Context) -> Result<(), Stop> {
    let setters: Vec<Setter> = catalog::data_map(rl.function_config.as_ref())
        .into_iter()
        .map(|(name, value)| Setter { name, value })
        .collect();
    let mut apply = Apply {
        setters: &setters,
        results: Vec::new(),
        file_path: String::new(),
        produced: catalog::Produced::new("setter values"),
    };
    // v0.1.1 fails where later releases go on: without setters (its
    // `Filter`, before any item) and when nothing matched
    // (`resultsToItems`).
    let v0_1_1 = ctx.release() == Some("v0.1.1");
    let failure = if v0_1_1 && setters.is_empty() {
        Some("input setters list cannot be empty".to_owned())
    } else {
        apply.filter(&mut rl.items, ctx)?.or_else(|| {
            (v0_1_1 && apply.results.is_empty())
                .then(|| "no matches for the input list of setters".to_owned())
        })
    };
    if let Some(err) = failure {
        let result = FnResult::error(format!("failed to apply setters: {err}"));
        return Err(catalog::fail(rl, result, &err));
    }
    if apply.results.is_empty() {
        rl.results.push(catalog::item(
            "no matches for input setter(s)".into(),
            "",
            "",
        ));
        return Ok(());
    }
    for r in apply.results {
        rl.results.push(catalog::item(
            format!("set field value to {}", catalog::quote(&r.value)),
            &r.field_path,
            &r.file_path,
        ));
    }
    Ok(())
}

impl Apply<'_> {
    /// `ApplySetters.Filter` over the items (from the first setter
    /// check on): the error that stopped it, if any.
    fn filter(&mut self, items: &mut [Node], ctx: &Context) -> Result<Option<String>, Stop> {
        for item in items {
            ctx.check()?;
            match catalog::file_path(item, false) {
                Ok(p) => self.file_path = p,
                Err(e) => return Ok(Some(e.to_owned())),
            }
            match catalog::accept(self, item, ctx) {
                Ok(()) => {}
                Err(catalog::WalkStop::Cancelled) => return Err(Stop::Cancelled),
                Err(catalog::WalkStop::Error(e)) => return Ok(Some(e)),
            }
        }
        Ok(None)
    }

    fn should_set(&self, pattern: &str) -> bool {
        self.setters
            .iter()
            .any(|s| pattern.contains(&format!("${{{}}}", s.name)))
    }
}

impl catalog::Visitor for Apply<'_> {
    type Error = String;

    /// `visitMapping`: the array setters among the mapping's fields.
    fn visit_mapping(&mut self, map: &mut Node, path: &str) -> Result<(), String> {
        for i in catalog::visit_fields(map) {
            let Some([key, value]) = map.content.get_mut(i..i + 2) else {
                continue;
            };
            if value.kind != Kind::Sequence {
                continue;
            }
            let line_comment = if value.style == Style::FLOW {
                value.line_comment.to_string()
            } else {
                key.line_comment.to_string()
            };
            let pattern = extract_setter_pattern(&line_comment);
            if pattern.is_empty() || !self.should_set(pattern) {
                continue;
            }
            if !(unresolved_setters(pattern).len() == 1
                && pattern.starts_with("${")
                && pattern.ends_with('}'))
            {
                return Err(format!(
                    "invalid setter pattern for array node: {}",
                    catalog::quote(pattern)
                ));
            }
            let name = clean(pattern);
            let sv = self
                .setters
                .iter()
                .find(|s| s.name == name)
                .map_or("", |s| s.value.as_str());
            let field_path = format!("{path}.{}", key.value);
            let field_path = field_path.strip_prefix('.').unwrap_or(&field_path);
            if sv.is_empty() {
                value.content.clear();
                value.style = Style::FLOW;
                value.line_comment = line_comment.as_str().into();
                key.line_comment.clear();
            } else {
                let not_an_array = || {
                    format!(
                        "input to array setter must be an array of values, but found {}",
                        catalog::quote(sv)
                    )
                };
                self.produced.take(sv.len())?;
                let parsed = krm_yaml::parse::parse(sv).map_err(|_| not_an_array())?;
                let seq = parsed
                    .into_iter()
                    .next()
                    .map(|doc| krm_yaml::package::kyaml::content(&doc).clone())
                    .filter(|n| n.kind == Kind::Sequence)
                    .ok_or_else(not_an_array)?;
                value.content = seq.content;
                key.line_comment = line_comment.as_str().into();
                value.style = Style::FOLDED;
            }
            self.results.push(Set {
                file_path: self.file_path.clone(),
                field_path: field_path.to_owned(),
                value: sv.to_owned(),
            });
        }
        Ok(())
    }

    /// `visitScalar`: a scalar setter.
    fn visit_scalar(&mut self, node: &mut Node, path: &str) -> Result<(), String> {
        let cur_pattern = extract_setter_pattern(&node.line_comment).to_owned();
        if cur_pattern.is_empty() || !self.should_set(&cur_pattern) {
            return Ok(());
        }
        let mut pattern = cur_pattern.clone();
        for s in self.setters {
            pattern = self
                .produced
                .replace(&pattern, &format!("${{{}}}", s.name), &s.value)?;
        }
        for (name, value) in current_setter_values(&cur_pattern, &node.value) {
            pattern = self
                .produced
                .replace(&pattern, &format!("${{{name}}}"), &value)?;
        }
        let urs = unresolved_setters(&pattern);
        if !urs.is_empty() {
            return Err(format!(
                "values for setters [{}] must be provided",
                urs.join(" ")
            ));
        }
        if pattern.is_empty() {
            node.style = Style::DOUBLE_QUOTED;
        }
        node.value = pattern.as_str().into();
        node.tag = Tag::default();
        self.results.push(Set {
            file_path: self.file_path.clone(),
            field_path: path.strip_prefix('.').unwrap_or(path).to_owned(),
            value: pattern,
        });
        Ok(())
    }
}
