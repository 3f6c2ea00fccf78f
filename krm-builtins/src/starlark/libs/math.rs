//! `math.star` (Go Starlark's `lib/math`): `ceil`, `copysign`, `fabs`,
//! `floor`, `mod`, `pow`, `remainder`, `round`, `exp`, `sqrt`, the
//! trigonometric and hyperbolic functions, `degrees`, `radians`, `log`
//! (with an optional base), `gamma`, and the constants `e` and `pi`.
//!
//! Every function takes ints or floats; `ceil` and `floor` give an int
//! (an int argument comes back as it is), the rest a float, with Go's
//! special cases (NaN, infinities). `gamma` is a Lanczos approximation
//! (exact factorials for small positive integers), which may differ from
//! Go's in the last digits.

use std::f64::consts::{E, PI};

use num_bigint::BigInt;
use starlark::environment::GlobalsBuilder;
use starlark::starlark_module;
use starlark::values::float::{StarlarkFloat, UnpackFloat};
use starlark::values::{Heap, Value, ValueLike};

pub(super) fn module(builder: &mut GlobalsBuilder) {
    builder.namespace("math", |b| {
        functions(b);
        b.set("e", E);
        b.set("pi", PI);
    });
}

/// An integral float as a Starlark int (Go's `starlark.NumberToInt`).
fn float_to_int<'v>(function: &str, f: f64, heap: Heap<'v>) -> anyhow::Result<Value<'v>> {
    if !f.is_finite() {
        return Err(anyhow::anyhow!(
            "math.{function}: cannot convert float {} to integer",
            if f.is_nan() {
                "nan"
            } else if f > 0.0 {
                "+inf"
            } else {
                "-inf"
            }
        ));
    }
    // Exact: every float of this size is an integer.
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if (-TWO_63..TWO_63).contains(&f) {
        return Ok(heap.alloc(f as i64));
    }
    let bits = f.to_bits();
    let exponent = i64::try_from((bits >> 52) & 0x7ff).unwrap_or(0) - 1075;
    let mantissa = (bits & ((1u64 << 52) - 1)) | (1u64 << 52);
    let shift = usize::try_from(exponent).unwrap_or(0);
    let magnitude = BigInt::from(mantissa) << shift;
    Ok(heap.alloc(if f < 0.0 { -magnitude } else { magnitude }))
}

/// IEEE 754 remainder (Go's `math.Remainder`): `x - n*y` with `n` the
/// integer nearest `x/y`, ties to even.
fn ieee_remainder(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() || x.is_infinite() || y == 0.0 {
        return f64::NAN;
    }
    if y.is_infinite() {
        return x;
    }
    let negative = x < 0.0;
    let y = y.abs();
    let mut x = x.abs();
    if x == y {
        return if negative { -0.0 } else { 0.0 };
    }
    if y <= f64::MAX / 2.0 {
        // Now x < 2y: at most two subtractions of y remain.
        x %= y + y;
    }
    if y < 2.0 * f64::MIN_POSITIVE {
        if x + x > y {
            x -= y;
            if x + x >= y {
                x -= y;
            }
        }
    } else {
        let half = 0.5 * y;
        if x > half {
            x -= y;
            if x >= half {
                x -= y;
            }
        }
    }
    if negative {
        -x
    } else {
        x
    }
}

/// The Gamma function, with Go's special cases.
fn gamma_of(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return f64::INFINITY;
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
    }
    if x < 0.0 && x == x.floor() {
        return f64::NAN;
    }
    if x > 171.7 {
        return f64::INFINITY;
    }
    if x > 0.0 && x == x.floor() && x <= 30.0 {
        // (x-1)!, exact in a float up to 22!.
        let mut product = 1.0;
        let mut k = 2.0;
        while k < x {
            product *= k;
            k += 1.0;
        }
        return product;
    }
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1-x) = π / sin(πx).
        return PI / ((PI * x).sin() * lanczos(1.0 - x));
    }
    lanczos(x)
}

/// Γ(x) for x ≥ 0.5 (Lanczos, g = 7, n = 9).
fn lanczos(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C0: f64 = 0.999_999_999_999_809_9;
    const C: [f64; 8] = [
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let x = x - 1.0;
    let mut sum = C0;
    let mut k = 1.0;
    for c in C {
        sum += c / (x + k);
        k += 1.0;
    }
    let t = x + G + 0.5;
    // t^(x+0.5) split in two, so that it does not overflow before e^-t
    // brings it back.
    let half = t.powf((x + 0.5) / 2.0);
    (2.0 * PI).sqrt() * half * (half * (-t).exp()) * sum
}

#[starlark_module]
fn functions(builder: &mut GlobalsBuilder) {
    fn ceil<'v>(
        #[starlark(require = pos)] x: Value<'v>,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        match x.downcast_ref::<StarlarkFloat>() {
            Some(f) => float_to_int("ceil", f.0.ceil(), heap),
            None if x.get_type() == "int" => Ok(x),
            None => Err(anyhow::anyhow!(
                "math.ceil: got {}, want float or int",
                x.get_type()
            )),
        }
    }

    fn floor<'v>(
        #[starlark(require = pos)] x: Value<'v>,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        match x.downcast_ref::<StarlarkFloat>() {
            Some(f) => float_to_int("floor", f.0.floor(), heap),
            None if x.get_type() == "int" => Ok(x),
            None => Err(anyhow::anyhow!(
                "math.floor: got {}, want float or int",
                x.get_type()
            )),
        }
    }

    fn copysign(
        #[starlark(require = pos)] x: UnpackFloat,
        #[starlark(require = pos)] y: UnpackFloat,
    ) -> anyhow::Result<f64> {
        Ok(x.0.copysign(y.0))
    }

    fn fabs(#[starlark(require = pos)] x: UnpackFloat) -> anyhow::Result<f64> {
        Ok(x.0.abs())
    }

    fn r#mod(
        #[starlark(require = pos)] x: UnpackFloat,
        #[starlark(require = pos)] y: UnpackFloat,
    ) -> anyhow::Result<f64> {
        // Rust's `%` on floats is C's fmod, which Go's `math.Mod` is.
        Ok(x.0 % y.0)
    }

    fn pow(
        #[starlark(require = pos)] x: UnpackFloat,
        #[starlark(require = pos)] y: UnpackFloat,
    ) -> anyhow::Result<f64> {
        Ok(x.0.powf(y.0))
    }

    fn remainder(
        #[starlark(require = pos)] x: UnpackFloat,
        #[starlark(require = pos)] y: UnpackFloat,
    ) -> anyhow::Result<f64> {
        Ok(ieee_remainder(x.0, y.0))
    }

    fn round(#[starlark(require = pos)] x: UnpackFloat) -> anyhow::Result<f64> {
        // Half away from zero, as Go's `math.Round`.
        Ok(x.0.round())
    }

    fn exp(#[starlark(require = pos)] x: UnpackFloat) -> anyhow::Result<f64> {
        Ok(x.0.exp())
    }

    fn sqrt(#[starlark(require = pos)] x: UnpackFloat) -> anyhow::Result<f64> {
        Ok(x.0.sqrt())
    }

    fn acos(#[starlark(require = pos)] x: UnpackFloat) -> anyhow::Result<f64> {
        Ok(x.0.acos())
    }

    fn asin(#[starlark(require = pos)] x: UnpackFloat) -> anyhow::Result<f64> {
        Ok(x.0.asin())
    }

    fn atan(#[starlark(require = pos)] x: UnpackFloat) -> anyhow::Result<f64> {
        Ok(x.0.atan())
    }

    fn atan2(
        #[starlark(require = pos)] y: UnpackFloat,
        #[starlark(require = pos)] x: UnpackFloat,
    ) -> anyhow::Result<f64> {
        Ok(y.0.atan2(x.0))
    }

    fn cos(#[starlark(require = pos)] x: UnpackFloat) -> anyhow::Result<f64> {
        Ok(x.0.cos())
    }

    fn hypot(
        #[starlark(require = pos)] x: UnpackFloat,
        #[starlark(require = pos)] y: UnpackFloat,
    ) -> anyhow::Result<f64> {
        Ok(x.0.hypot(y.0))
    }

    fn sin(#[starlark(require = pos)] x: UnpackFloat) -> anyhow::Result<f64> {
        Ok(x.0.sin())
    }

    fn tan(#[starlark(require = pos)] x: UnpackFloat) -> anyhow::Result<f64> {
        Ok(x.0.tan())
    }

    fn degrees(#[starlark(require = pos)] x: UnpackFloat) -> anyhow::Result<f64> {
        Ok(360.0 * x.0 / (2.0 * PI))
    }

    fn radians(#[starlark(require = pos)] x: UnpackFloat) -> anyhow::Result<f64> {
        Ok(2.0 * PI * x.0 / 360.0)
    }

    fn acosh(#[starlark(require = pos)] x: UnpackFloat) -> anyhow::Result<f64> {
        Ok(x.0.acosh())
    }

    fn asinh(#[starlark(require = pos)] x: UnpackFloat) -> anyhow::Result<f64> {
        Ok(x.0.asinh())
    }

    fn atanh(#[starlark(require = pos)] x: UnpackFloat) -> anyhow::Result<f64> {
        Ok(x.0.atanh())
    }

    fn cosh(#[starlark(require = pos)] x: UnpackFloat) -> anyhow::Result<f64> {
        Ok(x.0.cosh())
    }

    fn sinh(#[starlark(require = pos)] x: UnpackFloat) -> anyhow::Result<f64> {
        Ok(x.0.sinh())
    }

    fn tanh(#[starlark(require = pos)] x: UnpackFloat) -> anyhow::Result<f64> {
        Ok(x.0.tanh())
    }

    fn log(
        #[starlark(require = pos)] x: UnpackFloat,
        #[starlark(require = pos)] base: Option<UnpackFloat>,
    ) -> anyhow::Result<f64> {
        match base {
            None => Ok(x.0.ln()),
            Some(b) if b.0 == 1.0 => Err(anyhow::anyhow!("math.log: division by zero")),
            Some(b) => Ok(x.0.ln() / b.0.ln()),
        }
    }

    fn gamma(#[starlark(require = pos)] x: UnpackFloat) -> anyhow::Result<f64> {
        Ok(gamma_of(x.0))
    }
}
