//! Random packages from a seed: KRM resources written in the shapes YAML
//! allows and real packages hold, the hard ones included.
//!
//! The text is written directly (not through an emitter), so that every
//! choice an author makes shows up: indentation of sequences under keys,
//! every scalar style with its indicators, flow collections across lines,
//! comments at every place a comment can go, anchors and aliases, document
//! markers, tabs, CRLF, a byte order mark. Most of what comes out is valid
//! YAML and a valid package; the rare invalid one is compared too (both
//! sides must refuse it alike).

use fastrand::Rng;

/// One generated package: files by relative path, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Package {
    pub files: Vec<(String, Vec<u8>)>,
}

impl Package {
    /// The files as one text, for a report: each under a `==> path <==`
    /// line, control characters made visible.
    pub fn show(&self) -> String {
        let mut out = String::new();
        for (path, bytes) in &self.files {
            out.push_str(&format!("==> {path} <==\n"));
            for line in String::from_utf8_lossy(bytes).split_inclusive('\n') {
                let line = line
                    .replace('\r', "\\r")
                    .replace('\t', "\\t")
                    .replace('\u{feff}', "<BOM>");
                out.push_str(&line);
            }
            if !bytes.ends_with(b"\n") {
                out.push_str("<no newline at end>\n");
            }
        }
        out
    }
}

/// The package for `seed`: 1 to 3 files of 1 to 3 documents each.
pub fn package(seed: u64) -> Package {
    let mut g = Gen {
        rng: Rng::with_seed(seed),
        names: 0,
        anchors: Vec::new(),
        map_anchors: Vec::new(),
        wide_seq: false,
    };
    let files = g.range(1, 3);
    let mut out = Vec::new();
    for f in 0..files {
        let name = if g.chance(0.2) {
            format!("sub/f{f}.yaml")
        } else {
            format!("f{f}.yaml")
        };
        let text = g.file();
        out.push((name, text));
    }
    Package { files: out }
}

struct Gen {
    rng: Rng,
    /// Resources named so far (names are unique in a package).
    names: usize,
    /// Anchors defined so far in the current document, and those of them
    /// that name a mapping (for merge keys).
    anchors: Vec<String>,
    map_anchors: Vec<String>,
    /// Sequences under a key indented (`key:\n  - a`) rather than at the
    /// key's column (`key:\n- a`): one choice per file, as people write.
    wide_seq: bool,
}

const WORDS: &[&str] = &[
    "app",
    "web",
    "db",
    "cache",
    "front",
    "back",
    "alpha",
    "beta",
    "x",
    "y",
    "value",
    "name",
    "port",
    "image",
    "env",
    "team-a",
    "prod",
    "e-j",
    "k8s.io/thing",
    "a_b",
    "über",
    "日本",
];

impl Gen {
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        self.rng.usize(lo..=hi)
    }
    fn chance(&mut self, p: f64) -> bool {
        self.rng.f64() < p
    }
    fn pick(&mut self, of: &[&'static str]) -> &'static str {
        of[self.rng.usize(..of.len())]
    }

    fn file(&mut self) -> Vec<u8> {
        self.wide_seq = self.chance(0.5);
        let mut text = String::new();
        if self.chance(0.15) {
            text.push_str(&self.comment_lines(0));
        }
        if self.chance(0.04) {
            text.push_str("%YAML 1.2\n---\n");
        } else if self.chance(0.02) {
            text.push_str("%TAG !e! tag:example.com,2000:\n---\n");
        }
        let docs = self.range(1, 3);
        for d in 0..docs {
            self.anchors.clear();
            self.map_anchors.clear();
            if d > 0 || self.chance(0.2) {
                text.push_str("---");
                if self.chance(0.15) {
                    text.push_str(&format!(" # doc {d}"));
                }
                text.push('\n');
            }
            if d > 0 && self.chance(0.05) {
                // An empty document: markers and a comment only.
                text.push_str("# nothing here\n---\n");
            }
            if self.chance(0.25) {
                text.push_str(&self.comment_lines(0));
            }
            text.push_str(&self.resource());
            if self.chance(0.2) {
                text.push_str(&self.comment_lines(0));
            }
            if self.chance(0.07) {
                text.push_str("...");
                if self.chance(0.3) {
                    text.push_str(" # end");
                }
                text.push('\n');
            }
        }
        if self.chance(0.1) {
            // No newline at the end of the file.
            while text.ends_with('\n') {
                text.pop();
            }
        }
        let mut bytes = Vec::new();
        if self.chance(0.05) {
            bytes.extend_from_slice("\u{feff}".as_bytes());
        }
        if self.chance(0.1) {
            bytes.extend_from_slice(text.replace('\n', "\r\n").as_bytes());
        } else {
            bytes.extend_from_slice(text.as_bytes());
        }
        bytes
    }

    /// One to three comment lines at `indent`, sometimes after a blank line.
    fn comment_lines(&mut self, indent: usize) -> String {
        let mut s = String::new();
        if self.chance(0.3) {
            s.push('\n');
        }
        for _ in 0..self.range(1, 2) {
            s.push_str(&" ".repeat(indent));
            s.push_str(&self.comment());
            s.push('\n');
        }
        s
    }

    fn comment(&mut self) -> String {
        match self.rng.usize(..6) {
            0 => "#".to_owned(),
            1 => "#no space".to_owned(),
            2 => format!("# {}: {}", self.pick(WORDS), self.pick(WORDS)),
            3 => "# - looks like: [yaml]".to_owned(),
            _ => format!("# {} {}", self.pick(WORDS), self.pick(WORDS)),
        }
    }

    /// ` # comment` after a value, sometimes with a tab before it.
    fn line_comment(&mut self, p: f64) -> String {
        if !self.chance(p) {
            return String::new();
        }
        let sep = if self.chance(0.1) { "\t" } else { " " };
        format!("{sep}{}", self.comment())
    }

    fn resource(&mut self) -> String {
        self.names += 1;
        let n = self.names;
        let name = format!("r{n}-{}", self.pick(&["a", "b", "web", "x1"]));
        let kind = self.pick(&["ConfigMap", "ConfigMap", "Deployment", "Service", "Thing"]);
        let api = match kind {
            "Deployment" => "apps/v1",
            "Thing" => "example.com/v1",
            _ => "v1",
        };
        let mut s = String::new();
        let api_v = if self.chance(0.2) {
            format!("\"{api}\"")
        } else {
            api.to_owned()
        };
        s.push_str(&format!("apiVersion: {api_v}{}\n", self.line_comment(0.05)));
        s.push_str(&format!("kind: {kind}{}\n", self.line_comment(0.05)));
        if self.chance(0.1) {
            s.push_str(&self.comment_lines(0));
        }
        s.push_str(&format!("metadata:{}\n", self.line_comment(0.05)));
        s.push_str(&format!("  name: {name}{}\n", self.line_comment(0.15)));
        if self.chance(0.2) {
            s.push_str(&format!(
                "  namespace: {}\n",
                self.pick(&["ns", "team-a", "\"q\""])
            ));
        }
        for key in ["labels", "annotations"] {
            if self.chance(0.3) {
                s.push_str(&format!("  {key}:{}\n", self.line_comment(0.1)));
                for i in 0..self.range(1, 3) {
                    if self.chance(0.1) {
                        s.push_str(&self.comment_lines(4));
                    }
                    let k = format!("example.com/{}{i}", self.pick(WORDS));
                    let v = self.string_scalar(4);
                    s.push_str(&format!("    {k}: {v}{}\n", self.line_comment(0.1)));
                }
            }
        }
        let body = self.pick(&["data", "spec", "stuff"]);
        s.push_str(&format!("{body}:"));
        s.push_str(&self.value_after_key(0, 3));
        s
    }

    /// What follows `key:` for a value whose key is at `indent`: a scalar
    /// or flow collection on the same line, or a block collection on the
    /// next lines. Ends with a newline.
    fn value_after_key(&mut self, indent: usize, depth: usize) -> String {
        let mut props = String::new();
        let mut anchor = None;
        if self.chance(0.08) {
            // Defined once its value is written: an alias inside its own
            // value would be a cycle.
            let a = format!("a{}", self.anchors.len() + self.map_anchors.len() + 1);
            props.push_str(&format!(" &{a}"));
            anchor = Some(a);
        } else if !self.anchors.is_empty() && self.chance(0.08) {
            let a = self.anchors[self.rng.usize(..self.anchors.len())].clone();
            return format!(" *{a}{}\n", self.line_comment(0.2));
        }
        if self.chance(0.03) {
            // No value: null, with or without a comment.
            return format!("{props}{}\n", self.line_comment(0.3));
        }
        let choice = if depth == 0 { 0 } else { self.rng.usize(..10) };
        let (text, mapping) = match choice {
            0..=3 => {
                let v = self.scalar(indent + 2);
                (format!("{props} {v}"), false)
            }
            4 => {
                let v = self.flow(indent + 2, 2);
                let mapping = v.starts_with('{');
                (format!("{props} {v}{}\n", self.line_comment(0.3)), mapping)
            }
            5..=7 => {
                let lc = self.line_comment(0.15);
                (
                    format!("{props}{lc}\n{}", self.block_mapping(indent + 2, depth - 1)),
                    true,
                )
            }
            _ => {
                let lc = self.line_comment(0.15);
                let at = if self.wide_seq { indent + 2 } else { indent };
                (
                    format!("{props}{lc}\n{}", self.block_sequence(at, depth - 1)),
                    false,
                )
            }
        };
        if let Some(a) = anchor {
            if mapping {
                self.map_anchors.push(a.clone());
            }
            self.anchors.push(a);
        }
        text
    }

    fn key(&mut self, used: &mut Vec<String>) -> String {
        loop {
            let base = self.pick(WORDS);
            // An empty key is rare: kpt refuses every package holding one.
            let k = match self.rng.usize(..120) {
                0..=9 => format!("\"{base} q\""),
                10..=19 => format!("'{base}'"),
                20..=29 => format!("{base}.{}", self.rng.usize(..9)),
                30 => "\"\"".to_owned(),
                31 => format!("\"{base}\\t\\u00e9\""),
                32..=40 => format!("{}", self.rng.usize(..100)),
                _ => base.to_owned(),
            };
            // Keys are compared by value (`'x'` is `x`): a key twice is
            // refused by kpt beta.67 and by us, but not by the installed
            // beta.56, which is not what this compares.
            let value = k.trim_matches(|c| c == '"' || c == '\'').to_owned();
            if !used.contains(&value) {
                used.push(value);
                return k;
            }
            if used.len() > 12 {
                let k = format!("k{}", used.len());
                used.push(k.clone());
                return k;
            }
        }
    }

    fn block_mapping(&mut self, indent: usize, depth: usize) -> String {
        let pad = " ".repeat(indent);
        let mut s = String::new();
        let mut used = Vec::new();
        for _ in 0..self.range(1, 4) {
            if self.chance(0.15) {
                s.push_str(&self.comment_lines(indent));
            }
            // A complex key; rare, as kpt refuses every package holding
            // one (a documented departure).
            if self.chance(0.004) {
                let k = self.flow(indent + 2, 1);
                s.push_str(&format!("{pad}? {k}\n{pad}:"));
                s.push_str(&self.value_after_key(indent, depth));
                continue;
            }
            if !self.map_anchors.is_empty() && !used.contains(&"<<".to_owned()) && self.chance(0.1)
            {
                let a = self.map_anchors[self.rng.usize(..self.map_anchors.len())].clone();
                used.push("<<".to_owned());
                s.push_str(&format!("{pad}<<: *{a}{}\n", self.line_comment(0.2)));
                continue;
            }
            let k = self.key(&mut used);
            s.push_str(&format!("{pad}{k}:"));
            s.push_str(&self.value_after_key(indent, depth));
        }
        if self.chance(0.1) {
            s.push_str(&self.comment_lines(indent));
        }
        s
    }

    fn block_sequence(&mut self, indent: usize, depth: usize) -> String {
        let pad = " ".repeat(indent);
        let mut s = String::new();
        for _ in 0..self.range(1, 3) {
            if self.chance(0.12) {
                s.push_str(&self.comment_lines(indent));
            }
            s.push_str(&format!("{pad}-"));
            if !self.anchors.is_empty() && self.chance(0.05) {
                let a = self.anchors[self.rng.usize(..self.anchors.len())].clone();
                s.push_str(&format!(" *{a}{}\n", self.line_comment(0.2)));
                continue;
            }
            let choice = if depth == 0 { 0 } else { self.rng.usize(..8) };
            match choice {
                0..=3 => {
                    let v = self.scalar(indent + 2);
                    s.push_str(&format!(" {v}"));
                }
                4 => {
                    let v = self.flow(indent + 2, 2);
                    s.push_str(&format!(" {v}{}\n", self.line_comment(0.3)));
                }
                5 | 6 => {
                    // A mapping starting on the dash's line.
                    let m = self.block_mapping(indent + 2, depth - 1);
                    let m = m.trim_start_matches(' ');
                    if m.starts_with('#') || m.starts_with('\n') {
                        s.push_str(&format!("\n{}{m}", " ".repeat(indent + 2)));
                    } else {
                        s.push_str(&format!(" {m}"));
                    }
                }
                _ => {
                    let lc = self.line_comment(0.2);
                    s.push_str(&format!(
                        "{lc}\n{}",
                        self.block_sequence(indent + 2, depth - 1)
                    ));
                }
            }
        }
        s
    }

    /// A flow collection, sometimes across lines (continuation lines
    /// indented to `indent`).
    fn flow(&mut self, indent: usize, depth: usize) -> String {
        let multi = self.chance(0.2);
        let sep = |g: &mut Gen| {
            if multi && g.chance(0.5) {
                // A comment may end a line inside a flow collection.
                let c = if g.chance(0.2) {
                    " # inside".to_owned()
                } else {
                    String::new()
                };
                format!(",{c}\n{}", " ".repeat(indent))
            } else {
                ", ".to_owned()
            }
        };
        let n = self.range(0, 3);
        if self.chance(0.5) {
            let mut s = "{".to_owned();
            let mut used = Vec::new();
            for i in 0..n {
                if i > 0 {
                    s.push_str(&sep(self));
                }
                let k = self.key(&mut used);
                let v = self.flow_value(indent, depth);
                s.push_str(&format!("{k}: {v}"));
            }
            s.push('}');
            s
        } else {
            let mut s = "[".to_owned();
            for i in 0..n {
                if i > 0 {
                    s.push_str(&sep(self));
                }
                let v = self.flow_value(indent, depth);
                s.push_str(&v);
            }
            s.push(']');
            s
        }
    }

    fn flow_value(&mut self, indent: usize, depth: usize) -> String {
        if depth > 0 && self.chance(0.2) {
            return self.flow(indent, depth - 1);
        }
        match self.rng.usize(..6) {
            0 => self.double_quoted(false),
            1 => self.single_quoted(false),
            2 => self
                .pick(&["1", "true", "null", "~", "0x1F", "1.5e3", "-2"])
                .to_owned(),
            _ => self.pick(WORDS).to_owned(),
        }
    }

    /// A scalar that fits a string field on one line.
    fn string_scalar(&mut self, _indent: usize) -> String {
        match self.rng.usize(..4) {
            0 => self.double_quoted(false),
            1 => self.single_quoted(false),
            _ => self.plain(),
        }
    }

    /// A scalar after `key:` or `- ` whose content is indented at least
    /// `indent`. Ends with a newline (block scalars end with their body).
    fn scalar(&mut self, indent: usize) -> String {
        let tag = match self.rng.usize(..40) {
            0 => "!!str ",
            1 => "!custom ",
            2 => "!!int ",
            _ => "",
        };
        match self.rng.usize(..10) {
            0 | 1 => {
                let multi = self.chance(0.3);
                let v = self.double_quoted(multi);
                let v = if v.contains('\n') {
                    self.indent_cont(&v, indent)
                } else {
                    v
                };
                format!("{tag}{v}{}\n", self.line_comment(0.2))
            }
            2 => {
                let multi = self.chance(0.3);
                let v = self.single_quoted(multi);
                let v = if v.contains('\n') {
                    self.indent_cont(&v, indent)
                } else {
                    v
                };
                format!("{tag}{v}{}\n", self.line_comment(0.2))
            }
            3 | 4 => format!("{tag}{}", self.block_scalar(indent)),
            5 => {
                // A long line, or a multi-line plain scalar.
                if self.chance(0.5) {
                    let words: Vec<&str> =
                        (0..self.range(12, 30)).map(|_| self.pick(WORDS)).collect();
                    format!("{tag}{}{}\n", words.join(" "), self.line_comment(0.2))
                } else {
                    let pad = " ".repeat(indent);
                    format!(
                        "{tag}{} {}\n{pad}{} {}\n",
                        self.plain(),
                        self.pick(WORDS),
                        self.pick(WORDS),
                        self.plain()
                    )
                }
            }
            _ => format!("{tag}{}{}\n", self.plain(), self.line_comment(0.25)),
        }
    }

    /// Continuation lines of a multi-line quoted scalar, indented.
    fn indent_cont(&mut self, v: &str, indent: usize) -> String {
        let pad = " ".repeat(indent);
        v.replace('\n', &format!("\n{pad}"))
    }

    fn plain(&mut self) -> String {
        match self.rng.usize(..14) {
            0 => "true".into(),
            1 => "no".into(),
            2 => "null".into(),
            3 => "~".into(),
            4 => format!("{}", self.rng.i64(-1000..100000)),
            5 => "1.50".into(),
            6 => "2001-12-14".into(),
            7 => "0o17".into(),
            8 => "a:b".into(),
            9 => "x -y #z".replace(" #", "#"),
            10 => "-dash".into(),
            _ => self.pick(WORDS).to_owned(),
        }
    }

    fn double_quoted(&mut self, multi: bool) -> String {
        let mut s = "\"".to_owned();
        for i in 0..self.range(0, 4) {
            if i > 0 {
                s.push(' ');
            }
            match self.rng.usize(..14) {
                0 => s.push_str("\\n"),
                1 => s.push_str("\\t"),
                2 => s.push_str("\\\"q\\\""),
                3 => s.push_str("\\\\"),
                4 => s.push_str("\\u00e9"),
                5 => s.push_str("\\U0001F600"),
                6 => s.push_str("\\x41"),
                7 => s.push('\t'),
                8 => s.push_str("# not a comment"),
                9 if multi => s.push_str("line\\\n  continued"),
                10 if multi => s.push_str("folded\n\n  para"),
                _ => s.push_str(self.pick(WORDS)),
            }
        }
        s.push('"');
        s
    }

    fn single_quoted(&mut self, multi: bool) -> String {
        let mut s = "'".to_owned();
        for i in 0..self.range(0, 4) {
            if i > 0 {
                s.push(' ');
            }
            match self.rng.usize(..8) {
                0 => s.push_str("it''s"),
                1 => s.push_str("\\n stays"),
                2 => s.push_str(": colon"),
                3 if multi => s.push_str("two\n  lines"),
                4 if multi => s.push_str("para\n\n  graph"),
                _ => s.push_str(self.pick(WORDS)),
            }
        }
        s.push('\'');
        s
    }

    /// `|` or `>` with an optional indentation indicator and chomping, and
    /// its body. `indent` is the parent's column + 2 (after `key:` or `- `).
    fn block_scalar(&mut self, indent: usize) -> String {
        let style = if self.chance(0.5) { '|' } else { '>' };
        let chomp = self.pick(&["", "", "-", "+"]);
        let mut s = String::new();
        s.push(style);
        // An indentation indicator counts from the parent's column; with
        // one, the body may start more indented or with a blank line, which
        // only the indicator tells apart.
        let indicator = self.chance(0.25).then(|| self.range(1, 3));
        let body_indent = match indicator {
            Some(m) => {
                if self.chance(0.5) {
                    s.push_str(&format!("{m}{chomp}"));
                } else {
                    s.push_str(&format!("{chomp}{m}"));
                }
                indent - 2 + m
            }
            None => {
                s.push_str(chomp);
                indent
            }
        };
        s.push_str(&self.line_comment(0.2));
        s.push('\n');
        let body = " ".repeat(body_indent);
        let lines = self.range(1, 4);
        for i in 0..lines {
            let free = i > 0 || indicator.is_some();
            match self.rng.usize(..8) {
                0 if free => s.push('\n'),
                1 if free => s.push_str(&format!("{body}  more indented {}\n", self.pick(WORDS))),
                2 => s.push_str(&format!("{body}# not a comment\n")),
                3 => s.push_str(&format!("{body}tab\there\n")),
                _ => {
                    let words: Vec<&str> =
                        (0..self.range(1, 18)).map(|_| self.pick(WORDS)).collect();
                    s.push_str(&format!("{body}{}\n", words.join(" ")));
                }
            }
        }
        if chomp == "+" || self.chance(0.2) {
            for _ in 0..self.range(0, 2) {
                s.push('\n');
            }
        }
        s
    }
}
