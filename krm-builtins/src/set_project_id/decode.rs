//! yaml.v3's decoder (gopkg.in/yaml.v3 496545a6307b, `decode.go`) with
//! `KnownFields`, over the Kptfile's types: `util.DecodeKptfile`.

use std::collections::{BTreeMap, HashMap};

use krm_yaml::package::kyaml;
use krm_yaml::{Kind, Node};

use super::kptfile::{KptFile, StrMap};
use crate::catalog;

/// An error that ends the decode at once (yaml.v3's `failf`).
pub(super) type Fatal = String;

/// A Go struct yaml.v3 decodes a mapping into.
pub(super) trait Decode: Default {
    /// The type's name in yaml.v3's messages.
    const NAME: &'static str;
    /// Decodes `value` into the field `name`; false when there is none.
    fn field<'a>(
        &mut self,
        d: &mut Decoder<'a>,
        name: &str,
        value: &'a Node,
    ) -> Result<bool, Fatal>;
}

pub(super) const STRING: &str = "string";

/// `util.DecodeKptfile(node.String())`: the item written out as kyaml
/// writes it, read again, and decoded strictly. `Err`: yaml.v3's error.
pub(super) fn decode_kptfile(item: &Node) -> Result<KptFile, String> {
    let text = krm_yaml::emit::encode_node(item, true);
    let docs = krm_yaml::parse::parse(&text).map_err(|e| e.to_string())?;
    let Some(doc) = docs.first() else {
        return Err("EOF".into());
    };
    let root = kyaml::content(doc);
    if has_alias(root) {
        // yaml.v3's refusal of alias cycles and bombs, before any alias
        // is followed here.
        krm_yaml::value::to_value(root).map_err(|e| e.to_string())?;
    }
    let mut d = Decoder::new(root);
    let mut kf = KptFile::default();
    d.structure(root, &mut kf)?;
    if d.errors.is_empty() {
        Ok(kf)
    } else {
        Err(format!(
            "yaml: unmarshal errors:\n  {}",
            d.errors.join("\n  ")
        ))
    }
}

fn has_alias(root: &Node) -> bool {
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if n.kind == Kind::Alias {
            return true;
        }
        stack.extend(n.content.iter());
    }
    false
}

/// The most errors listed.
const MAX_ERRORS: usize = 10_000;

/// yaml.v3's decoder (`decode.go`), over the Kptfile's types.
pub(super) struct Decoder<'a> {
    /// Each alias's node: the last anchor of its name before it.
    targets: HashMap<*const Node, &'a Node>,
    /// `d.terrors`.
    errors: Vec<String>,
}

impl<'a> Decoder<'a> {
    fn new(root: &'a Node) -> Decoder<'a> {
        let mut defined: HashMap<&'a str, &'a Node> = HashMap::new();
        let mut targets = HashMap::new();
        let mut stack = vec![root];
        while let Some(n) = stack.pop() {
            if !n.anchor.is_empty() {
                defined.insert(n.anchor.as_str(), n);
            }
            if n.kind == Kind::Alias {
                if let Some(t) = defined.get(alias_name(n)) {
                    targets.insert(std::ptr::from_ref(n), *t);
                }
            }
            stack.extend(n.content.iter().rev());
        }
        Decoder {
            targets,
            errors: Vec::new(),
        }
    }

    fn push(&mut self, e: String) {
        if self.errors.len() < MAX_ERRORS {
            self.errors.push(e);
        }
    }

    /// The node an alias stands for (`d.alias`).
    fn follow(&self, mut n: &'a Node) -> &'a Node {
        // Cycles were refused before; the bound only guards the loop.
        for _ in 0..=self.targets.len() {
            if n.kind != Kind::Alias {
                break;
            }
            match self.targets.get(&std::ptr::from_ref(n)) {
                Some(t) => n = t,
                None => break,
            }
        }
        n
    }

    /// `terror`: `line N: cannot unmarshal !!str `x` into T`.
    fn terror(&mut self, n: &Node, into: &str) {
        let tag = if n.tag.as_str().is_empty() {
            match n.kind {
                Kind::Mapping => "!!map",
                Kind::Sequence => "!!seq",
                _ => "!!str",
            }
        } else {
            n.tag.as_str()
        };
        let value = if tag == "!!seq" || tag == "!!map" {
            String::new()
        } else if n.value.len() > 10 {
            let mut cut = 7;
            while !n.value.is_char_boundary(cut) {
                cut -= 1;
            }
            format!(" `{}...`", n.value.get(..cut).unwrap_or(""))
        } else {
            format!(" `{}`", n.value)
        };
        self.push(format!(
            "line {}: cannot unmarshal {tag}{value} into {into}",
            n.line
        ));
    }

    /// `mapping`'s check for keys of the same kind and value, each
    /// repetition against each earlier one; false when there are any.
    fn unique_keys(&mut self, n: &Node) -> bool {
        let keys: Vec<&Node> = n.content.iter().step_by(2).collect();
        let mut groups: HashMap<(u8, &str), Vec<usize>> = HashMap::new();
        for (i, k) in keys.iter().enumerate() {
            groups
                .entry((k.kind as u8, key_text(k)))
                .or_default()
                .push(i);
        }
        // Go's order (each key against the later ones), for the first
        // MAX_ERRORS pairs: each group's first pairs are its smallest.
        let mut pairs: Vec<(usize, usize)> = Vec::new();
        for g in groups.values().filter(|g| g.len() > 1) {
            let mut taken = 0;
            'group: for (a, i) in g.iter().enumerate() {
                for j in g.iter().skip(a + 1) {
                    if taken >= MAX_ERRORS {
                        break 'group;
                    }
                    pairs.push((*i, *j));
                    taken += 1;
                }
            }
        }
        if pairs.is_empty() {
            return true;
        }
        pairs.sort_unstable();
        for (i, j) in pairs.into_iter().take(MAX_ERRORS) {
            if let (Some(a), Some(b)) = (keys.get(i), keys.get(j)) {
                self.push(format!(
                    "line {}: mapping key {} already defined at line {}",
                    b.line,
                    catalog::quote(key_text(b)),
                    a.line
                ));
            }
        }
        false
    }

    /// A value into a Go string (`ty` its type's name): null leaves it.
    pub(super) fn string(&mut self, n: &'a Node, ty: &str, out: &mut String) {
        let n = self.follow(n);
        match n.kind {
            Kind::Scalar if catalog::is_null(n) => {}
            Kind::Scalar => *out = n.value.to_string(),
            Kind::Mapping => {
                if self.unique_keys(n) {
                    self.terror(n, ty);
                }
            }
            _ => self.terror(n, ty),
        }
    }

    /// A value into `[]string`: null is nil, null elements are left out.
    pub(super) fn strings(&mut self, n: &'a Node, out: &mut Option<Vec<String>>) {
        let n = self.follow(n);
        match n.kind {
            Kind::Scalar if catalog::is_null(n) => *out = None,
            Kind::Sequence => {
                let mut v = Vec::with_capacity(n.content.len());
                for e in &n.content {
                    if catalog::is_null(self.follow(e)) {
                        continue;
                    }
                    let mut s = String::new();
                    self.string(e, STRING, &mut s);
                    v.push(s);
                }
                *out = Some(v);
            }
            Kind::Mapping => {
                if self.unique_keys(n) {
                    self.terror(n, "[]string");
                }
            }
            _ => self.terror(n, "[]string"),
        }
    }

    /// A value into `map[string]string`: null is nil; a null value is "".
    pub(super) fn string_map(
        &mut self,
        n: &'a Node,
        out: &mut Option<StrMap>,
    ) -> Result<(), Fatal> {
        let n = self.follow(n);
        match n.kind {
            Kind::Scalar if catalog::is_null(n) => {
                *out = None;
                Ok(())
            }
            Kind::Mapping => {
                if !self.unique_keys(n) {
                    return Ok(());
                }
                let is_new = out.is_none();
                let map = out.get_or_insert_with(BTreeMap::new);
                self.map_entries(n, map, is_new)
            }
            _ => {
                self.terror(n, "map[string]string");
                Ok(())
            }
        }
    }

    fn map_entries(&mut self, n: &'a Node, map: &mut StrMap, is_new: bool) -> Result<(), Fatal> {
        for kv in n.content.chunks_exact(2) {
            let [k, v] = kv else { continue };
            if is_merge(k) {
                for m in self.merged(v)? {
                    if self.unique_keys(m) {
                        self.map_entries(m, map, false)?;
                    }
                }
                continue;
            }
            let Some(key) = self.key(k) else { continue };
            let value = self.follow(v);
            if catalog::is_null(value) {
                if is_new || !map.contains_key(&key) {
                    map.insert(key, String::new());
                }
                continue;
            }
            let mut s = String::new();
            let before = self.errors.len();
            self.string(value, STRING, &mut s);
            if self.errors.len() == before {
                map.insert(key, s);
            }
        }
        Ok(())
    }

    /// A key decoded into a string: `None` for null (skipped) and for
    /// collections (an error).
    fn key(&mut self, k: &'a Node) -> Option<String> {
        let k = self.follow(k);
        match k.kind {
            Kind::Scalar if catalog::is_null(k) => None,
            Kind::Scalar => Some(k.value.to_string()),
            Kind::Mapping => {
                if self.unique_keys(k) {
                    self.terror(k, STRING);
                }
                None
            }
            _ => {
                self.terror(k, STRING);
                None
            }
        }
    }

    /// The mappings a `<<` value merges (`d.merge`), in the order they
    /// are decoded (a list's from its end).
    fn merged(&self, v: &'a Node) -> Result<Vec<&'a Node>, Fatal> {
        const WANT_MAP: &str = "yaml: map merge requires map or sequence of maps as the value";
        let target = self.follow(v);
        match v.kind {
            Kind::Mapping => Ok(vec![v]),
            Kind::Alias if target.kind == Kind::Mapping => Ok(vec![target]),
            Kind::Sequence => v
                .content
                .iter()
                .rev()
                .map(|e| {
                    let t = self.follow(e);
                    if t.kind == Kind::Mapping {
                        Ok(t)
                    } else {
                        Err(WANT_MAP.to_owned())
                    }
                })
                .collect(),
            _ => Err(WANT_MAP.to_owned()),
        }
    }

    /// A value into a struct (`mappingStruct`): null leaves it.
    pub(super) fn structure<T: Decode>(&mut self, n: &'a Node, out: &mut T) -> Result<(), Fatal> {
        let n = self.follow(n);
        match n.kind {
            Kind::Scalar if catalog::is_null(n) => Ok(()),
            Kind::Mapping => {
                if self.unique_keys(n) {
                    self.fields(n, out)?;
                }
                Ok(())
            }
            _ => {
                self.terror(n, T::NAME);
                Ok(())
            }
        }
    }

    fn fields<T: Decode>(&mut self, n: &'a Node, out: &mut T) -> Result<(), Fatal> {
        for kv in n.content.chunks_exact(2) {
            let [k, v] = kv else { continue };
            if is_merge(k) {
                for m in self.merged(v)? {
                    if self.unique_keys(m) {
                        self.fields(m, out)?;
                    }
                }
                continue;
            }
            let Some(name) = self.key(k) else { continue };
            if !out.field(self, &name, v)? {
                self.push(format!(
                    "line {}: field {name} not found in type {}",
                    k.line,
                    T::NAME
                ));
            }
        }
        Ok(())
    }

    /// A value into a pointer to a struct: null is nil; otherwise the
    /// struct (made when nil) takes it.
    pub(super) fn pointer<T: Decode>(
        &mut self,
        n: &'a Node,
        out: &mut Option<T>,
    ) -> Result<(), Fatal> {
        if catalog::is_null(self.follow(n)) {
            *out = None;
            return Ok(());
        }
        let t = out.get_or_insert_with(T::default);
        self.structure(n, t)
    }

    /// A value into a slice of structs: null is nil, null elements are
    /// left out.
    pub(super) fn list<T: Decode>(&mut self, n: &'a Node, out: &mut Vec<T>) -> Result<(), Fatal> {
        let n = self.follow(n);
        match n.kind {
            Kind::Scalar if catalog::is_null(n) => out.clear(),
            Kind::Sequence => {
                let mut v = Vec::with_capacity(n.content.len());
                for e in &n.content {
                    if catalog::is_null(self.follow(e)) {
                        continue;
                    }
                    let mut t = T::default();
                    self.structure(e, &mut t)?;
                    v.push(t);
                }
                *out = v;
            }
            Kind::Mapping => {
                if self.unique_keys(n) {
                    self.terror(n, &format!("[]{}", T::NAME));
                }
            }
            _ => self.terror(n, &format!("[]{}", T::NAME)),
        }
        Ok(())
    }
}

/// The name an alias node gives its anchor.
fn alias_name(n: &Node) -> &str {
    if n.alias.is_empty() {
        &n.value
    } else {
        n.alias.as_str()
    }
}

/// What yaml.v3 compares keys by: an alias's name, anything else's value.
fn key_text(n: &Node) -> &str {
    if n.kind == Kind::Alias {
        alias_name(n)
    } else {
        &n.value
    }
}

/// `isMerge`: a plain `<<` key.
fn is_merge(k: &Node) -> bool {
    let tag = k.tag.as_str();
    k.kind == Kind::Scalar && k.value == "<<" && (tag.is_empty() || tag == "!" || tag == "!!merge")
}
