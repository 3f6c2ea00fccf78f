//! How gopkg.in/yaml.v3's encoder writes Go values that kpt and the
//! catalog's functions marshal from their Go types: a Go `string`
//! ([`go_string`], `encoder.stringv` in `encode.go`) and the order of a
//! map's string keys ([`go_key_less`], [`go_key_order`]: `keyList.Less`
//! in `sorter.go`).
//!
//! Read from the yaml.v3 each user follows: kpt's (`eval --save`
//! marshalling a Kptfile, krm-kpt's `kptfile::save`); 496545a6307b
//! beneath set-namespace v0.4.0/v0.4.1 (kyaml v0.13.6; the SDK's
//! `SetOrDie` through JSON); kyaml v0.11.0's forked encoder behind
//! `yaml.Marshal` (set-project-id's Kptfile and annotations). The same
//! `keyList.Less` is in every yaml.v3 the catalog's releases used, and in
//! sigs.k8s.io/yaml's `goyaml.v3` of kyaml v0.19.0 (starlark's new
//! mappings, whose other key kinds krm-builtins orders itself).

use std::cmp::Ordering;

use crate::resolve::{is_base60_float, is_old_bool, resolve_plain};
use crate::{Kind, Node, Style};

/// A Go string as yaml.v3's `stringv` writes it: plain where a plain
/// scalar would read back as the same string (and not as a YAML 1.1 bool
/// or sexagesimal number), literal when it has a line break, else
/// double-quoted. The emitter may still quote a plain one it cannot write
/// plain, as it does for kpt.
///
/// The node is an untagged scalar, as the encoder's input; a caller that
/// stands for what yaml.v3 parses back from it tags it `!!str` itself.
pub fn go_string(s: &str) -> Node {
    let plain = resolve_plain(s) == "!!str" && !is_base60_float(s) && !is_old_bool(s);
    let style = if s.contains('\n') {
        Style::LITERAL
    } else if plain {
        Style::default()
    } else {
        Style::DOUBLE_QUOTED
    };
    Node {
        kind: Kind::Scalar,
        value: s.into(),
        style,
        ..Node::default()
    }
}

/// [`go_key_less`] as an [`Ordering`], for `sort_by`: `Equal` where
/// neither key is less than the other.
pub fn go_key_order(a: &str, b: &str) -> Ordering {
    if go_key_less(a, b) {
        Ordering::Less
    } else if go_key_less(b, a) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

/// yaml.v3's order of string map keys (the string half of
/// `keyList.Less`): compared rune by rune, a run of digits as its number,
/// a letter before a non-letter unless after a digit. (Go's
/// `unicode.IsLetter` and `IsDigit` are approximated by
/// `char::is_alphabetic` and ASCII digits.)
pub fn go_key_less(a: &str, b: &str) -> bool {
    let (ar, br): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let digit = |c: char| c.is_ascii_digit();
    // The number a run of digits from `from` makes, counting from
    // `start`, and where the run ends.
    let number = |r: &[char], from: usize, start: i64| {
        let (mut n, mut end) = (start, from);
        while let Some(c) = r.get(end).copied().filter(|c| digit(*c)) {
            n = n
                .wrapping_mul(10)
                .wrapping_add(i64::from(u32::from(c) - u32::from('0')));
            end += 1;
        }
        (n, end)
    };
    let mut digits = false;
    for (i, (&ac, &bc)) in ar.iter().zip(br.iter()).enumerate() {
        if ac == bc {
            digits = digit(ac);
            continue;
        }
        let (al, bl) = (ac.is_alphabetic(), bc.is_alphabetic());
        if al && bl {
            return ac < bc;
        }
        if al || bl {
            return if digits { al } else { bl };
        }
        // Zeros after other digits are not leading zeros: both numbers
        // count from 1.
        let mut start = 0;
        if ac == '0' || bc == '0' {
            let before = ar.get(..i).unwrap_or_default();
            if before
                .iter()
                .rev()
                .take_while(|c| digit(**c))
                .any(|c| *c != '0')
            {
                start = 1;
            }
        }
        let (an, ai) = number(&ar, i, start);
        let (bn, bi) = number(&br, i, start);
        if an != bn {
            return an < bn;
        }
        if ai != bi {
            return ai < bi;
        }
        return ac < bc;
    }
    ar.len() < br.len()
}
