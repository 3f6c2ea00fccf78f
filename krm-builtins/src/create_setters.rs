//! `create-setters`: adds a `# kpt-set: <pattern>` line comment to each
//! scalar field whose value holds a setter's value (that part of the
//! value becomes `${name}`), and `# kpt-set: ${name}` to each sequence
//! whose elements are an array setter's values (in any order).
//!
//! Follows kptdev/krm-functions-catalog at
//! 76fe3817f9496724ca04414d136917a9926e5e40,
//! `functions/go/create-setters/main.go` and
//! `createsetters/{create_setters,walk}.go`, on kyaml v0.10.21.
//!
//! - Config: any config's `data` (`GetDataMap`): a `v1 ConfigMap`, the
//!   `function-input` ConfigMap, a `CreateSetters` with `data`. A value
//!   that parses as a YAML sequence is an array setter, a scalar one a
//!   scalar setter (the raw value), others are ignored. No setters:
//!   "config map cannot be empty"; a value that does not parse (or an
//!   empty one): "parsing error".
//! - Scalar setters are tried longest value first, and at each place of a
//!   value the first that matches replaces it (Go's `strings.Replacer`).
//! - Results: `Added line comment "<comment>" for field with value
//!   "<value>"` with field and file paths, no severity; no comment added
//!   is a failure ("no matches for the input list of setters"). A failure
//!   leaves only `failed to create setters: <error>` (severity error) and
//!   the error twice on stderr.
//!
//! Departure: Go reads the setters from a map and sorts them unstably, so
//! which of two setters with the same value (or two array setters with
//! the same values) wins is random there; here it is the first in `data`.

use krm_yaml::{Kind, Node, Style};

use crate::catalog;
use crate::function::{Context, ResourceList, Stop};
use crate::result::FnResult;

#[cfg(test)]
mod tests;

struct ArraySetter {
    name: String,
    values: Vec<String>,
}

/// One comment added: `Result`.
struct Added {
    file_path: String,
    field_path: String,
    value: String,
    comment: String,
}

struct Create {
    /// (value, `${name}`), longest value first: the replacer's pairs.
    scalars: Vec<(String, String)>,
    arrays: Vec<ArraySetter>,
    results: Vec<Added>,
    file_path: String,
}

/// `Decode`.
fn decode(config: Option<&Node>) -> Result<Create, String> {
    let data = catalog::data_map(config);
    if data.is_empty() {
        return Err("config map cannot be empty".into());
    }
    let mut scalars = Vec::new();
    let mut arrays = Vec::new();
    for (name, value) in data {
        let doc = krm_yaml::parse::parse(&value)
            .ok()
            .and_then(|docs| docs.into_iter().next())
            .ok_or_else(|| "parsing error".to_owned())?;
        let node = krm_yaml::package::kyaml::content(&doc);
        match node.kind {
            Kind::Sequence => {
                let mut values: Vec<String> =
                    node.content.iter().map(|e| e.value.to_string()).collect();
                values.sort();
                arrays.push(ArraySetter { name, values });
            }
            Kind::Scalar => scalars.push((value, format!("${{{name}}}"))),
            _ => {}
        }
    }
    scalars.sort_by_key(|s| std::cmp::Reverse(s.0.len()));
    Ok(Create {
        scalars,
        arrays,
        results: Vec::new(),
        file_path: String::new(),
    })
}

pub(crate) fn run(rl: &mut ResourceList, ctx: &Context) -> Result<(), Stop> {
    let failure = match decode(rl.function_config.as_ref()) {
        Err(e) => Some(e),
        Ok(mut create) => {
            let mut failure = None;
            for item in rl.items.iter_mut() {
                ctx.check()?;
                match catalog::file_path(item, false) {
                    Ok(p) => create.file_path = p,
                    Err(e) => {
                        failure = Some(e.to_owned());
                        break;
                    }
                }
                if let Err(catalog::WalkStop::Cancelled) = catalog::accept(&mut create, item, ctx) {
                    return Err(Stop::Cancelled);
                }
            }
            if failure.is_none() && create.results.is_empty() {
                failure = Some("no matches for the input list of setters".to_owned());
            }
            if failure.is_none() {
                for r in create.results {
                    rl.results.push(catalog::item(
                        format!(
                            "Added line comment {} for field with value {}",
                            catalog::quote(&r.comment),
                            catalog::quote(&r.value)
                        ),
                        &r.field_path,
                        &r.file_path,
                    ));
                }
            }
            failure
        }
    };
    match failure {
        Some(err) => {
            let result = FnResult::error(format!("failed to create setters: {err}"));
            Err(catalog::fail(rl, result, &err))
        }
        None => Ok(()),
    }
}

impl Create {
    /// `strings.NewReplacer(value1, "${name1}", ...).Replace(s)`: at each
    /// byte, the first pair whose value starts there is replaced.
    fn replace(&self, s: &str) -> String {
        let bytes = s.as_bytes();
        let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while let Some(rest) = bytes.get(i..) {
            if rest.is_empty() {
                break;
            }
            match self
                .scalars
                .iter()
                .find(|(old, _)| !old.is_empty() && rest.starts_with(old.as_bytes()))
            {
                Some((old, new)) => {
                    out.extend_from_slice(new.as_bytes());
                    i += old.len();
                }
                None => {
                    out.extend_from_slice(rest.get(..1).unwrap_or_default());
                    i += 1;
                }
            }
        }
        String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

impl catalog::Visitor for Create {
    type Error = std::convert::Infallible;

    /// `visitMapping`: sequences that are an array setter's values.
    fn visit_mapping(&mut self, map: &mut Node, path: &str) -> Result<(), Self::Error> {
        for i in catalog::visit_fields(map) {
            let Some([key, value]) = map.content.get_mut(i..i + 2) else {
                continue;
            };
            if value.kind != Kind::Sequence {
                continue;
            }
            let field_path = format!("{path}.{}", key.value);
            let field_path = field_path
                .strip_prefix('.')
                .unwrap_or(&field_path)
                .to_owned();
            let mut values: Vec<String> =
                value.content.iter().map(|e| e.value.to_string()).collect();
            values.sort();
            // Which node takes the comment: the key, or a flow sequence
            // itself (`env: [a, b] # kpt-set: ${env}`).
            let mut on_key = true;
            if value.style == Style::FLOW {
                let matches_scalar = values
                    .iter()
                    .any(|v| self.scalars.iter().any(|(s, _)| v.contains(s.as_str())));
                if matches_scalar {
                    value.style = Style::FOLDED;
                } else {
                    on_key = false;
                }
            }
            let Some(array) = self.arrays.iter().find(|a| a.values == values) else {
                continue;
            };
            if !on_key && value.style == Style::FLOW && !values.is_empty() {
                value.style = Style::FOLDED;
                on_key = true;
            }
            let comment = format!("kpt-set: ${{{}}}", array.name);
            if on_key {
                key.line_comment = comment.as_str().into();
            } else {
                value.line_comment = comment.as_str().into();
            }
            self.results.push(Added {
                file_path: self.file_path.clone(),
                field_path,
                value: format!("[{}]", values.join(" ")),
                comment,
            });
        }
        Ok(())
    }

    /// `visitScalar`: a scalar with a setter's value in it.
    fn visit_scalar(&mut self, node: &mut Node, path: &str) -> Result<(), Self::Error> {
        if node.value.contains('\n') {
            return Ok(());
        }
        let replaced = self.replace(&node.value);
        if replaced == node.value {
            return Ok(());
        }
        let comment = format!("kpt-set: {replaced}");
        node.line_comment = comment.as_str().into();
        self.results.push(Added {
            file_path: self.file_path.clone(),
            field_path: path.strip_prefix('.').unwrap_or(path).to_owned(),
            value: node.value.to_string(),
            comment,
        });
        Ok(())
    }
}
