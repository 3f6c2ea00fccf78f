//! Byte-level mutations of seed inputs, and arbitrary splits of a byte
//! stream into chunks (DATA frames, reads).

use crate::arbitrary::Result;
use crate::Unstructured;

/// `input` after one to eight random edits: bytes flipped, set, inserted
/// or deleted, a range duplicated, moved or dropped, a piece of
/// `dictionary` or of `other` (another seed) inserted, the end cut off.
/// Never longer than `max`.
pub fn mutate(
    u: &mut Unstructured<'_>,
    input: &[u8],
    dictionary: &[&str],
    other: &[u8],
    max: usize,
) -> Result<Vec<u8>> {
    let mut out = input.to_vec();
    for _ in 0..u.int_in_range(1..=8u8)? {
        let len = out.len();
        let at = u.int_in_range(0..=len)?;
        match u.int_in_range(0..=8u8)? {
            0 if at < len => out[at] ^= 1 << u.int_in_range(0..=7u8)?,
            1 if at < len => out[at] = u.arbitrary()?,
            2 => out.insert(at, interesting_byte(u)?),
            3 if at < len => {
                let end = u.int_in_range(at..=len.min(at + 64))?;
                out.drain(at..end);
            }
            4 if at < len => {
                // A range repeated: deeper nesting, longer runs.
                let end = u.int_in_range(at..=len.min(at + 64))?;
                let piece = out[at..end].to_vec();
                for _ in 0..u.int_in_range(1..=16u8)? {
                    out.splice(at..at, piece.iter().copied());
                }
            }
            5 if at < len => {
                let end = u.int_in_range(at..=len)?;
                let piece: Vec<u8> = out.drain(at..end).collect();
                let to = u.int_in_range(0..=out.len())?;
                out.splice(to..to, piece);
            }
            6 if !dictionary.is_empty() => {
                let word = u.choose(dictionary)?;
                out.splice(at..at, word.bytes());
            }
            7 if !other.is_empty() => {
                let from = u.int_in_range(0..=other.len() - 1)?;
                let end = u.int_in_range(from..=other.len().min(from + 256))?;
                out.splice(at..at, other[from..end].iter().copied());
            }
            8 => out.truncate(at),
            _ => {}
        }
    }
    out.truncate(max);
    Ok(out)
}

/// A byte parsers treat specially more often than any byte at random.
fn interesting_byte(u: &mut Unstructured<'_>) -> Result<u8> {
    const BYTES: &[u8] = b"\0\t\n\r \"#&'*,-.:>?[]{|}!%@`\\\x7f\x80\xbf\xc3\xe2\xef\xf0\xff";
    if u.ratio(3, 4)? {
        Ok(*u.choose(BYTES)?)
    } else {
        u.arbitrary()
    }
}

/// `len` bytes cut into chunks: one byte each, all the same size, or sizes
/// at random (a few empty ones among them); the sizes add up to `len`.
pub fn chunk_sizes(u: &mut Unstructured<'_>, len: usize) -> Result<Vec<usize>> {
    let mut sizes = Vec::new();
    let mut left = len;
    let fixed = match u.int_in_range(0..=3u8)? {
        0 => Some(1),
        1 => Some(u.int_in_range(1..=len.max(1))?),
        _ => None,
    };
    while left > 0 {
        let n = match fixed {
            Some(n) => n.min(left),
            // Out of entropy every draw is its lowest: finish at once.
            None if u.is_empty() => left,
            None if u.ratio(1, 16)? => 0,
            None => u.int_in_range(1..=left)?,
        };
        sizes.push(n);
        left -= n;
    }
    Ok(sizes)
}

/// `data` cut at `sizes` (from [`chunk_sizes`]; what they leave is the last chunk).
pub fn split<'a>(data: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::with_capacity(sizes.len() + 1);
    let mut rest = data;
    for &n in sizes {
        let (head, tail) = rest.split_at(n.min(rest.len()));
        out.push(head);
        rest = tail;
    }
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}
