//! Semantic versions and version constraints as Masterminds/semver v3
//! reads them (the library kpt resolves a Kptfile function's `tag:` with):
//! its loose version syntax (`v1`, `1.2`, `01.2.3`), its constraint
//! language (`~1.2`, `^0.4`, `1.2 - 1.4`, `>=1, <2 || 3.x`), its ordering
//! and its rule that a constraint without a prerelease admits no
//! prerelease.
//!
//! The grammar is Masterminds' own regular expressions, run by `regex`,
//! whose leftmost-first matching and capture groups are Go's `regexp`'s:
//! which text a group captures decides what a constraint means (`=>1` is
//! `=>` and `1`, not `=` and `>1`), so the patterns are theirs, untouched
//! but for Go's `\s`, which is ASCII without `\v` there.

use std::cmp::Ordering;
use std::fmt;
use std::sync::LazyLock;

use regex::Regex;

use super::go_quote;

/// Go's `\s` (RE2: `[\t\n\f\r ]`); `regex`'s ASCII `\s` has `\v` too.
const SPACE: &str = r"[\t\n\f\r ]";

/// `looseSemVerRegex`: what `NewVersion` accepts (its `CoerceNewVersion`
/// mode, the default, which kpt keeps).
static LOOSE_VERSION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^v?([0-9]+)(\.[0-9]+)?(\.[0-9]+)?",
        r"(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?",
        r"(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?$",
    ))
    .expect("the loose version pattern compiles")
});

/// `cvRegex`: a version inside a constraint, wildcards allowed.
const CONSTRAINT_VERSION: &str = concat!(
    r"v?([0-9|x|X|\*]+)(\.[0-9|x|X|\*]+)?(\.[0-9|x|X|\*]+)?",
    r"(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?",
    r"(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?",
);

/// The operators, in Masterminds' order, the empty one second: with
/// leftmost-first matching the order decides which one a text is read as.
const OPERATORS: &str = r"=||!=|>|<|>=|=>|<=|=<|~|~>|\^";

/// `constraintRegex`: one operator and version, alone.
static ONE_CONSTRAINT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^{SPACE}*({OPERATORS}){SPACE}*({CONSTRAINT_VERSION}){SPACE}*$"
    ))
    .expect("the constraint pattern compiles")
});

/// `constraintRangeRegex`: a hyphen range, `A - B`.
static RANGE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"{SPACE}*({CONSTRAINT_VERSION}){SPACE}+-{SPACE}+({CONSTRAINT_VERSION}){SPACE}*"
    ))
    .expect("the range pattern compiles")
});

/// `findConstraintRegex`: the constraints of an AND group, one by one.
static FIND_CONSTRAINT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"({OPERATORS}){SPACE}*({CONSTRAINT_VERSION})"))
        .expect("the find-constraint pattern compiles")
});

/// `validConstraintRegex`: an AND group, constraints separated by spaces
/// or commas.
static VALID_GROUP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^({SPACE}*({OPERATORS}){SPACE}*({CONSTRAINT_VERSION}){SPACE}*)((?:{SPACE}+|,{SPACE}*)({OPERATORS}){SPACE}*({CONSTRAINT_VERSION}){SPACE}*)*$"
    ))
    .expect("the constraint group pattern compiles")
});

/// Why a text is not a version; the messages are Masterminds'.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// `ErrInvalidSemVer`.
    #[error("invalid semantic version")]
    Invalid,
    /// `ErrSegmentStartsZero`: a numeric prerelease identifier with a
    /// leading zero (`1.2.3-beta.01`).
    #[error("version segment starts with 0")]
    SegmentStartsZero,
    /// `ErrInvalidPrerelease`.
    #[error("invalid prerelease string")]
    InvalidPrerelease,
    /// `ErrInvalidMetadata`.
    #[error("invalid metadata string")]
    InvalidMetadata,
    /// A major, minor or patch number beyond 64 bits: Go's
    /// `strconv.ParseUint` range error, wrapped as Masterminds wraps it.
    #[error(
        "error parsing version segment: strconv.ParseUint: parsing {}: value out of range",
        go_quote(.0)
    )]
    OutOfRange(String),
}

/// Why a text is not a constraint; the messages are Masterminds'.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConstraintError {
    /// An OR group (after hyphen ranges are rewritten) that is not a list
    /// of constraints; it is quoted as Go's `%q` quotes it.
    #[error("improper constraint: {}", go_quote(.0))]
    Improper(String),
    /// A constraint the grammar takes whose version is none (`1|2`,
    /// `99999999999999999999`).
    #[error("constraint parser error")]
    Parser,
}

/// A semantic version, read loosely, with the text it was read from.
#[derive(Debug, Clone)]
pub struct Version {
    major: u64,
    minor: u64,
    patch: u64,
    pre: String,
    metadata: String,
    original: String,
}

impl Version {
    /// `semver.NewVersion`: an optional `v`, the minor and patch optional
    /// (0), leading zeros in them accepted; a prerelease and metadata of
    /// `[0-9A-Za-z-]` identifiers separated by dots.
    pub fn parse(text: &str) -> Result<Version, VersionError> {
        let m = LOOSE_VERSION.captures(text).ok_or(VersionError::Invalid)?;
        let group = |i: usize| m.get(i).map_or("", |g| g.as_str());
        let number = |i: usize| match group(i).trim_start_matches('.') {
            "" => Ok(0),
            digits => parse_uint(digits).ok_or_else(|| VersionError::OutOfRange(digits.into())),
        };
        let version = Version {
            major: number(1)?,
            minor: number(2)?,
            patch: number(3)?,
            pre: group(5).to_string(),
            metadata: group(8).to_string(),
            original: text.to_string(),
        };
        if !version.pre.is_empty() {
            validate_prerelease(&version.pre)?;
        }
        if !version.metadata.is_empty() {
            validate_metadata(&version.metadata)?;
        }
        Ok(version)
    }

    /// The text the version was read from, as written (`v0.4`, not
    /// `0.4.0`): what a registry's tag is called.
    pub fn original(&self) -> &str {
        &self.original
    }

    pub fn major(&self) -> u64 {
        self.major
    }

    pub fn minor(&self) -> u64 {
        self.minor
    }

    pub fn patch(&self) -> u64 {
        self.patch
    }

    pub fn prerelease(&self) -> &str {
        &self.pre
    }

    pub fn metadata(&self) -> &str {
        &self.metadata
    }

    /// `Compare`: major, minor and patch numerically, then a release above
    /// its prereleases, and prereleases identifier by identifier. Metadata
    /// and a `v` count for nothing: `v0.2` and `0.2.0+b` are equal.
    pub fn compare(&self, other: &Version) -> Ordering {
        self.major
            .cmp(&other.major)
            .then(self.minor.cmp(&other.minor))
            .then(self.patch.cmp(&other.patch))
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => compare_prerelease(&self.pre, &other.pre),
            })
    }

    fn less_than(&self, other: &Version) -> bool {
        self.compare(other) == Ordering::Less
    }

    fn equal(&self, other: &Version) -> bool {
        self.compare(other) == Ordering::Equal
    }
}

impl fmt::Display for Version {
    /// `String()`: `MAJOR.MINOR.PATCH[-PRE][+META]`, no `v`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre)?;
        }
        if !self.metadata.is_empty() {
            write!(f, "+{}", self.metadata)?;
        }
        Ok(())
    }
}

/// Go's `strconv.ParseUint(s, 10, 64)` on a text the patterns made all
/// digits: `None` when it overflows. (Rust's own parse also takes a `+`.)
fn parse_uint(digits: &str) -> Option<u64> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn is_identifier(part: &str) -> bool {
    part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// `validatePrerelease`: non-empty identifiers, numeric ones without a
/// leading zero.
pub(super) fn validate_prerelease(pre: &str) -> Result<(), VersionError> {
    for part in pre.split('.') {
        if part.is_empty() {
            return Err(VersionError::InvalidPrerelease);
        } else if part.bytes().all(|b| b.is_ascii_digit()) {
            if part.len() > 1 && part.starts_with('0') {
                return Err(VersionError::SegmentStartsZero);
            }
        } else if !is_identifier(part) {
            return Err(VersionError::InvalidPrerelease);
        }
    }
    Ok(())
}

/// `validateMetadata`: non-empty identifiers.
pub(super) fn validate_metadata(metadata: &str) -> Result<(), VersionError> {
    if metadata
        .split('.')
        .any(|part| part.is_empty() || !is_identifier(part))
    {
        return Err(VersionError::InvalidMetadata);
    }
    Ok(())
}

/// `comparePrerelease`: identifier by identifier, a missing one lowest.
fn compare_prerelease(a: &str, b: &str) -> Ordering {
    let (a, b): (Vec<&str>, Vec<&str>) = (a.split('.').collect(), b.split('.').collect());
    (0..a.len().max(b.len()))
        .map(|i| {
            compare_pre_part(
                a.get(i).copied().unwrap_or(""),
                b.get(i).copied().unwrap_or(""),
            )
        })
        .find(|o| o.is_ne())
        .unwrap_or(Ordering::Equal)
}

/// `comparePrePart`: numbers (those `ParseUint` takes) numerically and
/// below words, words by bytes, an absent identifier below any.
fn compare_pre_part(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    if a.is_empty() {
        return Ordering::Less;
    }
    if b.is_empty() {
        return Ordering::Greater;
    }
    match (parse_uint(a), parse_uint(b)) {
        (None, None) => a.as_bytes().cmp(b.as_bytes()),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        // Unequal texts, equal numbers: Masterminds answers "less" (only
        // leading zeros could do it, which versions refuse).
        (Some(x), Some(y)) if x > y => Ordering::Greater,
        (Some(_), Some(_)) => Ordering::Less,
    }
}

/// Which comparison a constraint makes (Masterminds' `constraintOps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// `""`, `=`: equality, or tilde when the version has a wildcard.
    TildeOrEqual,
    NotEqual,
    GreaterThan,
    LessThan,
    GreaterThanEqual,
    LessThanEqual,
    /// `~`, `~>`.
    Tilde,
    Caret,
}

impl Op {
    fn of(text: &str) -> Option<Op> {
        Some(match text {
            "" | "=" => Op::TildeOrEqual,
            "!=" => Op::NotEqual,
            ">" => Op::GreaterThan,
            "<" => Op::LessThan,
            ">=" | "=>" => Op::GreaterThanEqual,
            "<=" | "=<" => Op::LessThanEqual,
            "~" | "~>" => Op::Tilde,
            "^" => Op::Caret,
            _ => return None,
        })
    }
}

/// One operator and version (`>= 1.2`, `~0.4`, `1.x`).
#[derive(Debug, Clone)]
pub(super) struct Constraint {
    /// The version compared with; wildcards are zeros, the flags below say
    /// which parts they were.
    pub(super) con: Version,
    /// The version as written (`4.x`).
    orig: String,
    /// The operator as written (`=>`).
    pub(super) origfunc: String,
    op: Op,
    dirty: bool,
    minor_dirty: bool,
    patch_dirty: bool,
}

impl Constraint {
    /// `parseConstraint`. The empty text is `*`.
    pub(super) fn parse(text: &str) -> Result<Constraint, ConstraintError> {
        if text.is_empty() {
            return Ok(Constraint {
                con: Version::parse("0.0.0").map_err(|_| ConstraintError::Parser)?,
                orig: String::new(),
                origfunc: String::new(),
                op: Op::TildeOrEqual,
                dirty: true,
                minor_dirty: false,
                patch_dirty: false,
            });
        }
        let m = ONE_CONSTRAINT
            .captures(text)
            .ok_or_else(|| ConstraintError::Improper(text.to_string()))?;
        let group = |i: usize| m.get(i).map_or("", |g| g.as_str());
        let origfunc = group(1);
        let op = Op::of(origfunc).ok_or_else(|| ConstraintError::Improper(text.to_string()))?;
        let (major, minor, patch, pre) = (group(3), group(4), group(5), group(6));
        let is_x = |part: &str| matches!(part.trim_start_matches('.'), "x" | "X" | "*");
        let (mut dirty, mut minor_dirty, mut patch_dirty) = (false, false, false);
        // A wildcard or a missing part: the parts from there on are zeros
        // (and the prerelease kept, the metadata dropped).
        let version = if is_x(major) {
            dirty = true;
            format!("0.0.0{pre}")
        } else if is_x(minor) || minor.is_empty() {
            (dirty, minor_dirty) = (true, true);
            format!("{major}.0.0{pre}")
        } else if is_x(patch) || patch.is_empty() {
            (dirty, patch_dirty) = (true, true);
            format!("{major}{minor}.0{pre}")
        } else {
            group(2).to_string()
        };
        Ok(Constraint {
            con: Version::parse(&version).map_err(|_| ConstraintError::Parser)?,
            orig: group(2).to_string(),
            origfunc: origfunc.to_string(),
            op,
            dirty,
            minor_dirty,
            patch_dirty,
        })
    }

    /// Whether `v` meets this constraint; `include_pre`: whether its AND
    /// group admits prereleases.
    pub(super) fn check(&self, v: &Version, include_pre: bool) -> bool {
        // Every operator first turns away a prerelease its group does not
        // admit.
        if !v.pre.is_empty() && !include_pre {
            return false;
        }
        let c = &self.con;
        match self.op {
            Op::TildeOrEqual if self.dirty => self.tilde(v),
            Op::TildeOrEqual => v.equal(c),
            Op::Tilde => self.tilde(v),
            Op::NotEqual => {
                if self.dirty {
                    if c.major != v.major {
                        return true;
                    }
                    if c.minor != v.minor && !self.minor_dirty {
                        return true;
                    } else if self.minor_dirty {
                        return false;
                    } else if c.patch != v.patch && !self.patch_dirty {
                        return true;
                    } else if self.patch_dirty {
                        if !v.pre.is_empty() || !c.pre.is_empty() {
                            return compare_prerelease(&v.pre, &c.pre).is_ne();
                        }
                        return false;
                    }
                }
                !v.equal(c)
            }
            Op::GreaterThan => {
                if !self.dirty {
                    return v.compare(c).is_gt();
                }
                if v.major > c.major {
                    true
                } else if v.major < c.major || self.minor_dirty {
                    // `>11` wants 12 or more: 11.1 is not above it.
                    false
                } else if self.patch_dirty {
                    // `>11.1` wants 11.2 or more.
                    v.minor > c.minor
                } else {
                    v.compare(c).is_gt()
                }
            }
            Op::LessThan => v.less_than(c),
            Op::GreaterThanEqual => v.compare(c).is_ge(),
            Op::LessThanEqual => {
                if !self.dirty {
                    return v.compare(c).is_le();
                }
                !(v.major > c.major
                    || (v.major == c.major && v.minor > c.minor && !self.minor_dirty))
            }
            Op::Caret => {
                if v.less_than(c) {
                    return false;
                }
                if c.major > 0 || self.minor_dirty {
                    return v.major == c.major;
                }
                if v.major > 0 {
                    return false;
                }
                if c.minor > 0 || self.patch_dirty {
                    return v.minor == c.minor;
                }
                if v.minor > 0 {
                    return false;
                }
                c.patch == v.patch
            }
        }
    }

    /// `constraintTilde`: at least the version, within its minor (its
    /// major, when the minor is a wildcard); `~0.0.0` and `~*` admit all.
    fn tilde(&self, v: &Version) -> bool {
        let c = &self.con;
        if v.less_than(c) {
            return false;
        }
        if c.major == 0 && c.minor == 0 && c.patch == 0 && !self.minor_dirty && !self.patch_dirty {
            return true;
        }
        v.major == c.major && (v.minor == c.minor || self.minor_dirty)
    }
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.origfunc, self.orig)
    }
}

/// Constraints: OR groups (`||`) of AND groups (spaces or commas).
#[derive(Debug, Clone)]
pub struct Constraints {
    pub(super) groups: Vec<Vec<Constraint>>,
    /// Per group: whether one of its constraints names a prerelease, which
    /// lets the group admit prereleases.
    contains_pre: Vec<bool>,
}

impl Constraints {
    /// `semver.NewConstraint`: hyphen ranges rewritten to `>= A, <= B`,
    /// then `||` groups, each a list of constraints.
    pub fn parse(text: &str) -> Result<Constraints, ConstraintError> {
        let rewritten = rewrite_range(text);
        let mut groups = Vec::new();
        let mut contains_pre = Vec::new();
        for group in rewritten.split("||") {
            if !VALID_GROUP.is_match(group) {
                return Err(ConstraintError::Improper(group.to_string()));
            }
            let mut found: Vec<&str> = FIND_CONSTRAINT
                .find_iter(group)
                .map(|m| m.as_str())
                .collect();
            if found.is_empty() {
                found.push(group);
            }
            let parsed = found
                .into_iter()
                .map(Constraint::parse)
                .collect::<Result<Vec<_>, _>>()?;
            contains_pre.push(parsed.iter().any(|c| !c.con.pre.is_empty()));
            groups.push(parsed);
        }
        Ok(Constraints {
            groups,
            contains_pre,
        })
    }

    /// `Check`: whether `v` meets every constraint of some group. A
    /// prerelease meets only a group that names a prerelease itself.
    pub fn check(&self, v: &Version) -> bool {
        self.groups
            .iter()
            .zip(&self.contains_pre)
            .any(|(group, &pre)| group.iter().all(|c| c.check(v, pre)))
    }
}

impl fmt::Display for Constraints {
    /// `String()`: `2.x >=1.2.3 || >4.5.6 <5.7`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, group) in self.groups.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            for (j, c) in group.iter().enumerate() {
                if j > 0 {
                    f.write_str(" ")?;
                }
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

/// `rewriteRange`: each `A - B` becomes `>= A, <= B ` (the first
/// occurrence of the matched text, trailing space and all, as Masterminds
/// replaces it).
pub(super) fn rewrite_range(text: &str) -> String {
    let mut out = text.to_string();
    for m in RANGE.captures_iter(text) {
        let whole = m.get(0).map_or("", |g| g.as_str());
        let from = m.get(1).map_or("", |g| g.as_str());
        let to = m.get(11).map_or("", |g| g.as_str());
        out = out.replacen(whole, &format!(">= {from}, <= {to} "), 1);
    }
    out
}
