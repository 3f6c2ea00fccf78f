//! Go Starlark's `range`, `len` and `enumerate`, which take Go's 64-bit
//! ints where the Rust interpreter's take 32-bit ones (`range(10000000000)`
//! failed here with "Error unpacking value for parameter `a1`" where Go
//! Starlark loops). They replace the interpreter's builtins of those names.
//!
//! Go Starlark at the catalog's pin (go.starlark.net f57e51f710eb,
//! `starlark/library.go`): `range_` unpacks `start, stop, step int` with
//! `UnpackPositionalArgs` (Go's `int` is 64-bit on the catalog's images)
//! and keeps them in a `rangeValue{start, stop, step, len int}`; `len_`
//! returns `MakeInt(Len(x))`; `enumerate` unpacks `start int` and makes
//! `start + i`. Its refusals, word for word: `range: got 0 arguments, want
//! at least 1`, `range: got 4 arguments, want at most 3`, `range:
//! unexpected keyword arguments`, `range: for parameter 1: got float, want
//! int`, `range: for parameter 1: 9223372036854775808 out of range (want
//! value in signed 64-bit range)`, `range: step argument must not be zero`.
//!
//! What a range is here (the interpreter's `range` value is 32-bit, and a
//! value type of our own needs `unsafe`, which this crate forbids):
//!
//! - one whose start, stop, step and length fit in 32 bits (nearly all) is
//!   the interpreter's range: the same values, `len`, indexing, slicing,
//!   `in`, `==` and `repr` as Go's;
//! - a wider one of at most [`LIST_MAX`] integers is the list of them
//!   (what the program iterates, indexes and tests with `in` is Go's;
//!   `type()` says `list` and it prints as a list);
//! - a longer one whose first integers are 32-bit and which has at least
//!   [`PREFIX_MIN`] of them before it leaves 32 bits (`range(10000000000)`,
//!   the endless loop Go Starlark has no `while` for) is the interpreter's
//!   range of those first integers: a loop over it sees Go's integers and
//!   `break`s where Go's does, and ends after them (2^31-2 rounds for
//!   `range(N)`; Go's would go on); `len()` answers Go's length; indexing,
//!   slicing and `in` are Go's within the prefix; it prints as the prefix;
//! - any other (longer, and past 32 bits early) is refused, naming it.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::num::NonZeroI32;

use starlark::environment::GlobalsBuilder;
use starlark::starlark_module;
use starlark::values::dict::DictRef;
use starlark::values::list::AllocList;
use starlark::values::range::Range;
use starlark::values::tuple::UnpackTuple;
use starlark::values::{Heap, UnpackValue, Value};

/// The most integers a range past 32 bits is listed as.
pub const LIST_MAX: i64 = 1 << 20;

/// The fewest 32-bit first integers a longer range past 32 bits needs to
/// be iterated (a loop of that many rounds runs for seconds at least).
pub const PREFIX_MIN: i64 = 1 << 28;

/// A range as Go Starlark keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct GoRange {
    start: i64,
    stop: i64,
    step: i64,
    len: i64,
}

impl GoRange {
    /// `rangeLen`, in Go's wrapping int arithmetic.
    fn new(start: i64, stop: i64, step: i64) -> GoRange {
        let len = if step > 0 && stop > start {
            stop.wrapping_sub(1)
                .wrapping_sub(start)
                .wrapping_div(step)
                .wrapping_add(1)
        } else if step < 0 && start > stop {
            start
                .wrapping_sub(1)
                .wrapping_sub(stop)
                .wrapping_div(step.wrapping_neg())
                .wrapping_add(1)
        } else {
            0
        };
        GoRange {
            start,
            stop,
            step,
            len,
        }
    }

    /// `rangeValue.Index`: `start + i*step`, wrapping.
    fn at(&self, i: i64) -> i64 {
        self.start.wrapping_add(i.wrapping_mul(self.step))
    }

    /// `rangeValue.String`.
    fn repr(&self) -> String {
        if self.step != 1 {
            format!("range({}, {}, {})", self.start, self.stop, self.step)
        } else if self.start != 0 {
            format!("range({}, {})", self.start, self.stop)
        } else {
            format!("range({})", self.stop)
        }
    }
}

/// The interpreter's ranges that stand for longer Go ranges (their
/// start, stop, step), and the interpreter's ranges the program made as
/// such that could be taken for one of them.
#[derive(Default)]
struct Prefixes {
    wide: HashMap<(i32, i32, i32), GoRange>,
    genuine: HashSet<(i32, i32, i32)>,
}

thread_local! {
    static PREFIXES: RefCell<Prefixes> = RefCell::new(Prefixes::default());
}

/// Forgets the ranges of an earlier run (a run is one thread in the
/// sandbox, but tests run several on one).
pub(super) fn reset() {
    PREFIXES.with(|p| *p.borrow_mut() = Prefixes::default());
}

/// Go's `AsInt(x, *int)`: its value, or its error.
fn go_int(v: Value<'_>) -> Result<i64, String> {
    if v.get_type() != "int" {
        return Err(format!("got {}, want int", v.get_type()));
    }
    match i64::unpack_value(v) {
        Ok(Some(i)) => Ok(i),
        _ => Err(format!(
            "{} out of range (want value in signed 64-bit range)",
            v.to_repr()
        )),
    }
}

/// Go's `UnpackPositionalArgs` count and keyword checks.
fn check_args(
    name: &str,
    n: usize,
    kwargs: &DictRef<'_>,
    min: usize,
    max: usize,
) -> anyhow::Result<()> {
    if !kwargs.is_empty() {
        return Err(anyhow::anyhow!("{name}: unexpected keyword arguments"));
    }
    if n < min {
        let at_least = if min < max { "at least " } else { "" };
        return Err(anyhow::anyhow!(
            "{name}: got {n} arguments, want {at_least}{min}"
        ));
    }
    if n > max {
        let at_most = if max > min { "at most " } else { "" };
        return Err(anyhow::anyhow!(
            "{name}: got {n} arguments, want {at_most}{max}"
        ));
    }
    Ok(())
}

/// The interpreter's range `(start, stop, step)` of a triple that fits.
fn native(start: i32, stop: i32, step: i32) -> Option<Range> {
    NonZeroI32::new(step).map(|step| Range::new(start, stop, step))
}

/// The value for a Go range (see the module's documentation).
fn range_value<'v>(r: GoRange, heap: Heap<'v>) -> anyhow::Result<Value<'v>> {
    let small = |x: i64| i32::try_from(x).ok();
    // Fits: the interpreter's own.
    if let (Some(start), Some(stop), Some(step)) = (small(r.start), small(r.stop), small(r.step)) {
        if r.len <= i64::from(i32::MAX) {
            if let Some(range) = native(start, stop, step) {
                if r.len >= PREFIX_MIN {
                    PREFIXES.with(|p| p.borrow_mut().genuine.insert((start, stop, step)));
                }
                return Ok(heap.alloc(range));
            }
        }
    }
    // Empty (Go's length can be negative only past int64): an empty one
    // going the same way.
    if r.len <= 0 {
        let clamp = |x: i64| x.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;
        let (start, stop) = (clamp(r.start), clamp(r.stop));
        let step = if r.step > 0 { 1 } else { -1 };
        let empty = if (step > 0 && start >= stop) || (step < 0 && start <= stop) {
            native(start, stop, step)
        } else {
            native(0, 0, 1)
        };
        return Ok(empty.map_or_else(Value::new_none, |e| heap.alloc(e)));
    }
    if r.len <= LIST_MAX {
        let values: Vec<i64> = (0..r.len).map(|i| r.at(i)).collect();
        return Ok(heap.alloc(AllocList(values)));
    }
    // The first integers that fit in 32 bits (at most i32::MAX - 1 of
    // them: the interpreter's length is 32-bit, and `range(2147483647)`,
    // the rewritten `while`'s, is then not taken for one).
    if let (Some(start), Some(step)) = (small(r.start), small(r.step)) {
        let room = if step > 0 {
            (i64::from(i32::MAX) - 1 - i64::from(start)) / i64::from(step) + 1
        } else {
            (i64::from(start) - i64::from(i32::MIN) - 1) / -i64::from(step) + 1
        };
        let count = room.min(r.len).min(i64::from(i32::MAX) - 1);
        if count >= PREFIX_MIN {
            let last = i64::from(start) + (count - 1) * i64::from(step);
            let stop = last + i64::from(step.signum());
            if let (Some(stop), Some(range)) = (
                small(stop),
                small(stop).and_then(|s| native(start, s, step)),
            ) {
                PREFIXES.with(|p| p.borrow_mut().wide.insert((start, stop, step), r));
                return Ok(heap.alloc(range));
            }
        }
    }
    Err(anyhow::anyhow!(
        "range: {} has {} integers and goes past 32 bits within its first {}: only ranges of at most {} such integers, or whose first {} are 32-bit, can be used here",
        r.repr(),
        r.len,
        PREFIX_MIN,
        LIST_MAX,
        PREFIX_MIN
    ))
}

/// The Go length of the interpreter's range `v` stands for, if it stands
/// for a longer one.
fn wide_len(v: Value<'_>) -> Option<i64> {
    if v.get_type() != "range" {
        return None;
    }
    let repr = v.to_repr();
    let inner = repr.strip_prefix("range(")?.strip_suffix(')')?;
    let parts: Vec<i32> = inner
        .split(", ")
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    let key = match parts.as_slice() {
        [stop] => (0, *stop, 1),
        [start, stop] => (*start, *stop, 1),
        [start, stop, step] => (*start, *stop, *step),
        _ => return None,
    };
    PREFIXES.with(|p| {
        let p = p.borrow();
        if p.genuine.contains(&key) {
            return None;
        }
        p.wide.get(&key).map(|r| r.len)
    })
}

#[starlark_module]
pub(super) fn go_builtins(builder: &mut GlobalsBuilder) {
    /// Go Starlark's `range(stop)`, `range(start, stop[, step])`.
    fn range<'v>(
        #[starlark(args)] args: UnpackTuple<Value<'v>>,
        #[starlark(kwargs)] kwargs: DictRef<'v>,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        let args = args.items;
        check_args("range", args.len(), &kwargs, 1, 3)?;
        let mut ints = [0i64, 0, 1];
        for (n, (arg, slot)) in args.iter().zip(ints.iter_mut()).enumerate() {
            *slot =
                go_int(*arg).map_err(|e| anyhow::anyhow!("range: for parameter {}: {e}", n + 1))?;
        }
        let [mut start, mut stop, step] = ints;
        if args.len() == 1 {
            (start, stop) = (0, start);
        }
        if step == 0 {
            return Err(anyhow::anyhow!("range: step argument must not be zero"));
        }
        range_value(GoRange::new(start, stop, step), heap)
    }

    /// Go Starlark's `len(x)`: a 64-bit length.
    fn len<'v>(
        #[starlark(args)] args: UnpackTuple<Value<'v>>,
        #[starlark(kwargs)] kwargs: DictRef<'v>,
    ) -> anyhow::Result<i64> {
        let args = args.items;
        check_args("len", args.len(), &kwargs, 1, 1)?;
        let Some(&x) = args.first() else {
            return Err(anyhow::anyhow!("len: got 0 arguments, want 1"));
        };
        if let Some(len) = wide_len(x) {
            return Ok(len);
        }
        match x.length() {
            Ok(n) => Ok(i64::from(n)),
            Err(_) => Err(anyhow::anyhow!(
                "len: value of type {} has no len",
                x.get_type()
            )),
        }
    }

    /// Go Starlark's `enumerate(iterable[, start])`: a 64-bit start.
    fn enumerate<'v>(
        #[starlark(args)] args: UnpackTuple<Value<'v>>,
        #[starlark(kwargs)] kwargs: DictRef<'v>,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        let args = args.items;
        check_args("enumerate", args.len(), &kwargs, 1, 2)?;
        let Some(&iterable) = args.first() else {
            return Err(anyhow::anyhow!(
                "enumerate: got 0 arguments, want at least 1"
            ));
        };
        let start = match args.get(1) {
            Some(v) => {
                go_int(*v).map_err(|e| anyhow::anyhow!("enumerate: for parameter 2: {e}"))?
            }
            None => 0,
        };
        let items = iterable.iterate(heap).map_err(|_| {
            anyhow::anyhow!(
                "enumerate: for parameter 1: got {}, want iterable",
                iterable.get_type()
            )
        })?;
        let mut pairs = Vec::new();
        for (i, x) in (0i64..).zip(items) {
            pairs.push(heap.alloc((start.wrapping_add(i), x)));
        }
        Ok(heap.alloc(AllocList(pairs)))
    }
}

#[cfg(test)]
mod tests {
    use super::GoRange;

    #[test]
    fn go_lengths_wrap_as_go_ints_do() {
        assert_eq!(GoRange::new(0, 10_000_000_000, 1).len, 10_000_000_000);
        assert_eq!(GoRange::new(10, 0, -3).len, 4);
        assert_eq!(GoRange::new(0, 10, -1).len, 0);
        // Past int64, Go's length wraps (negative: an empty range).
        assert_eq!(GoRange::new(i64::MIN, i64::MAX, 1).len, -1);
        // One step short of wrapping, either way (no overflow panic in a
        // debug build, Go's wrapped length in both).
        assert_eq!(GoRange::new(-1, i64::MAX, 1).len, i64::MIN);
        assert_eq!(GoRange::new(0, i64::MIN, -1).len, i64::MIN);
        assert_eq!(GoRange::new(0, 100, 7).repr(), "range(0, 100, 7)");
        assert_eq!(GoRange::new(5, 100, 1).repr(), "range(5, 100)");
        assert_eq!(GoRange::new(0, 100, 1).repr(), "range(100)");
    }
}
