//! A reader of the Prometheus / OpenMetrics text exposition format, as
//! prometheus-client writes it (and as the Prometheus 0.0.4 text format
//! allows: looser whitespace, no `# EOF`, counters without `_total`).
//!
//! It reads what it can and skips what it cannot: a malformed line is
//! dropped, never a reason to fail the rest (the text is our own, but a
//! metric push must not be the thing that panics on a surprise).

use std::collections::HashMap;

/// A `# TYPE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
    GaugeHistogram,
    Summary,
    Info,
    StateSet,
    /// `unknown`, `untyped`, another word, or no `# TYPE` line at all.
    Unknown,
}

impl Kind {
    fn parse(word: &str) -> Kind {
        match word {
            "counter" => Kind::Counter,
            "gauge" => Kind::Gauge,
            "histogram" => Kind::Histogram,
            "gaugehistogram" => Kind::GaugeHistogram,
            "summary" => Kind::Summary,
            "info" => Kind::Info,
            "stateset" => Kind::StateSet,
            _ => Kind::Unknown,
        }
    }
}

/// A metric family: its metadata and its samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: String,
    pub kind: Kind,
    pub help: String,
    pub unit: String,
    pub samples: Vec<Sample>,
}

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The sample's own name (`x_total`, `x_bucket`, …).
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

/// A whole exposition, by family name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    pub families: Vec<Family>,
    index: HashMap<String, usize>,
}

/// The suffixes a sample may add to its family's name.
const SUFFIXES: &[&str] = &[
    "_total", "_created", "_bucket", "_sum", "_count", "_gsum", "_gcount", "_info",
];

impl Exposition {
    pub fn family(&self, name: &str) -> Option<&Family> {
        self.index.get(name).and_then(|&i| self.families.get(i))
    }

    fn family_mut(&mut self, name: &str) -> &mut Family {
        let i = match self.index.get(name) {
            Some(&i) => i,
            None => {
                self.families.push(Family {
                    name: name.to_string(),
                    kind: Kind::Unknown,
                    help: String::new(),
                    unit: String::new(),
                    samples: Vec::new(),
                });
                let i = self.families.len() - 1;
                self.index.insert(name.to_string(), i);
                i
            }
        };
        &mut self.families[i]
    }

    /// The family a sample named `sample` belongs to: the one just
    /// described, if the name is its own or its own with a suffix; else a
    /// family of that exact name (a sample with no metadata is `unknown`).
    fn owner(&self, current: Option<&str>, sample: &str) -> String {
        if let Some(family) = current {
            if sample == family
                || sample
                    .strip_prefix(family)
                    .is_some_and(|rest| SUFFIXES.contains(&rest))
            {
                return family.to_string();
            }
        }
        sample.to_string()
    }
}

/// Reads `text`; never fails: what is not understood is skipped.
pub fn parse(text: &str) -> Exposition {
    let mut out = Exposition::default();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let comment = comment.trim_start();
            if comment.trim_end() == "EOF" {
                break;
            }
            let (keyword, rest) = split_word(comment);
            let (name, rest) = split_word(rest);
            if name.is_empty() || !valid_name(name) {
                continue;
            }
            match keyword {
                "TYPE" => {
                    out.family_mut(name).kind = Kind::parse(rest.trim());
                }
                "HELP" => out.family_mut(name).help = unescape(rest),
                "UNIT" => out.family_mut(name).unit = rest.trim().to_string(),
                // Any other comment.
                _ => continue,
            }
            current = Some(name.to_string());
            continue;
        }
        let Some(sample) = parse_sample(line) else {
            tracing::trace!(line, "metrics text: a line not understood; skipped");
            continue;
        };
        let owner = out.owner(current.as_deref(), &sample.name);
        if current.as_deref() != Some(owner.as_str()) {
            current = Some(owner.clone());
        }
        out.family_mut(&owner).samples.push(sample);
    }
    out
}

/// The first word (up to a space) and the rest after the spaces.
fn split_word(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    match s.find([' ', '\t']) {
        Some(i) => (&s[..i], s[i..].trim_start_matches([' ', '\t'])),
        None => (s, ""),
    }
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// `name{a="b",c="d"} value [timestamp] [# exemplar]`.
fn parse_sample(line: &str) -> Option<Sample> {
    let line = line.trim_start();
    let end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..end];
    if !valid_name(name) {
        return None;
    }
    let mut rest = line[end..].trim_start();
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (parsed, after) = parse_labels(after)?;
        labels = parsed;
        rest = after;
    }
    let (value, _) = split_word(rest);
    let value = parse_value(value)?;
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// The labels after `{`, up to and past the closing `}`.
fn parse_labels(mut s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim();
        if !valid_name(key) {
            return None;
        }
        let after = s[eq + 1..].trim_start().strip_prefix('"')?;
        let (value, after) = quoted(after)?;
        labels.push((key.to_string(), value));
        s = after.trim_start();
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return None;
        }
    }
}

/// A label value after its opening quote: the value unescaped and what
/// follows its closing quote.
fn quoted(s: &str) -> Option<(String, &str)> {
    let mut value = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((value, &s[i + 1..])),
            '\\' => match chars.next() {
                Some((_, 'n')) => value.push('\n'),
                Some((_, other)) => value.push(other),
                None => return None,
            },
            c => value.push(c),
        }
    }
    None
}

/// HELP text: `\\` and `\n` escaped.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" | "+inf" | "inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        "NaN" | "nan" => Some(f64::NAN),
        // Rust's parser also takes "infinity" and the like: harmless.
        s => s.parse().ok(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const WRAPPER: &str = "\
# HELP wrapper_server_evaluations EvaluateFunction calls by outcome.
# TYPE wrapper_server_evaluations counter
wrapper_server_evaluations_total{outcome=\"ok\"} 3
wrapper_server_evaluations_total{outcome=\"cancelled\"} 1
# HELP wrapper_server_evaluation_duration_seconds Wall time of EvaluateFunction calls.
# TYPE wrapper_server_evaluation_duration_seconds histogram
wrapper_server_evaluation_duration_seconds_sum 0.25
wrapper_server_evaluation_duration_seconds_count 4
wrapper_server_evaluation_duration_seconds_bucket{le=\"0.001\"} 0
wrapper_server_evaluation_duration_seconds_bucket{le=\"+Inf\"} 4
# HELP wrapper_server_evaluations_in_flight Calls running now.
# TYPE wrapper_server_evaluations_in_flight gauge
wrapper_server_evaluations_in_flight 0
# HELP wrapper_server_input_bytes ResourceList bytes received.
# TYPE wrapper_server_input_bytes counter
# EOF
";

    #[test]
    fn reads_what_prometheus_client_writes() {
        let e = parse(WRAPPER);
        let names: Vec<_> = e.families.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "wrapper_server_evaluations",
                "wrapper_server_evaluation_duration_seconds",
                "wrapper_server_evaluations_in_flight",
                "wrapper_server_input_bytes",
            ]
        );
        let calls = e.family("wrapper_server_evaluations").unwrap();
        assert_eq!(calls.kind, Kind::Counter);
        assert_eq!(calls.help, "EvaluateFunction calls by outcome.");
        assert_eq!(calls.samples.len(), 2);
        assert_eq!(calls.samples[0].name, "wrapper_server_evaluations_total");
        assert_eq!(
            calls.samples[0].labels,
            [("outcome".to_string(), "ok".to_string())]
        );
        assert_eq!(calls.samples[0].value, 3.0);
        let hist = e
            .family("wrapper_server_evaluation_duration_seconds")
            .unwrap();
        assert_eq!(hist.kind, Kind::Histogram);
        assert_eq!(hist.samples.len(), 4);
        assert_eq!(hist.samples[3].labels[0].1, "+Inf");
        assert_eq!(hist.samples[3].value, 4.0);
        // A family with no samples yet (a labelled family before its first
        // series) is still a family.
        let input = e.family("wrapper_server_input_bytes").unwrap();
        assert_eq!(input.kind, Kind::Counter);
        assert!(input.samples.is_empty());
    }

    #[test]
    fn escapes_special_values_and_what_follows_eof() {
        let e = parse(
            "# TYPE a gauge\n\
             a{path=\"C:\\\\dir\",msg=\"say \\\"hi\\\"\\nbye\",x=\"}{,=\"} NaN\n\
             a{x=\"1\",} +Inf 1700000000\n\
             a{x=\"2\"} -Inf # {trace_id=\"1\"} 1\n\
             a 1e3\n\
             # EOF\n\
             b 7\n",
        );
        assert_eq!(e.families.len(), 1);
        let a = &e.family("a").unwrap().samples;
        assert_eq!(a.len(), 4);
        assert_eq!(
            a[0].labels,
            [
                ("path".to_string(), "C:\\dir".to_string()),
                ("msg".to_string(), "say \"hi\"\nbye".to_string()),
                ("x".to_string(), "}{,=".to_string()),
            ]
        );
        assert!(a[0].value.is_nan());
        assert_eq!(a[1].value, f64::INFINITY);
        assert_eq!(a[2].value, f64::NEG_INFINITY);
        assert_eq!(a[3].value, 1000.0);
    }

    #[test]
    fn samples_without_metadata_and_the_old_text_format() {
        let e = parse(
            "# HELP c_total Old style.\n# TYPE c_total counter\nc_total 5\n\
             loose   {  a = \"b\" }   2  \r\n\
             # just a comment\n\
             stray_total 1\n",
        );
        let c = e.family("c_total").unwrap();
        assert_eq!(c.kind, Kind::Counter);
        assert_eq!(c.samples[0].value, 5.0);
        let loose = e.family("loose").unwrap();
        assert_eq!(loose.kind, Kind::Unknown);
        assert_eq!(loose.samples[0].labels[0], ("a".into(), "b".into()));
        assert_eq!(e.family("stray_total").unwrap().samples[0].value, 1.0);
    }

    #[test]
    fn odd_input_is_skipped_not_fatal() {
        for text in [
            "",
            "#",
            "# TYPE",
            "# TYPE  ",
            "# HELP x",
            "# TYPE 9bad counter\n9bad 1",
            "x",
            "x{",
            "x{a",
            "x{a=",
            "x{a=\"",
            "x{a=\"\\",
            "x{a=\"b\"",
            "x{a=\"b\" c=\"d\"} 1",
            "x{=\"b\"} 1",
            "x{a=b} 1",
            "x 1 2 3 4",
            "x one",
            "x{a=\"é\\\"ü\"} 1",
            "\u{0}\u{feff}x 1",
            "{} 1",
            "x}} 1",
            "# TYPE x counter\n# TYPE x gauge\nx 1",
        ] {
            let e = parse(text);
            for f in &e.families {
                assert!(valid_name(&f.name), "{text:?}: {f:?}");
            }
        }
        // What is well formed around a bad line is kept.
        let e = parse("good 1\nbad{ 2\nalso_good 3\n");
        assert_eq!(e.families.len(), 2);
        let e = parse("x{a=\"é\\\"ü\"} 1");
        assert_eq!(e.family("x").unwrap().samples[0].labels[0].1, "é\"ü");
        // A TYPE given twice: the last wins.
        let e = parse("# TYPE x counter\n# TYPE x gauge\nx 1");
        assert_eq!(e.family("x").unwrap().kind, Kind::Gauge);
    }
}
