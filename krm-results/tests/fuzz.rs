//! Fuzzing the readers of a function's stdout: [`parse_output`] (the fast
//! path) against [`parse_output_strict`] (the full parse), and `results`
//! as kpt reads them ([`kpt::read`]) and prints them ([`format_results`]).
//! Knobs: see the `fuzzing` crate (`FUZZ_SECONDS`, `FUZZ_INPUT_SECONDS`,
//! `ARBTEST_SEED`).

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use fuzzing::{bytes, yaml, Unstructured};
use krm_results::{format_results, kpt, parse_output, parse_output_strict};

const MAX_INPUT: usize = 32 * 1024;

/// Properties: no panic, no input past its deadline; where the full parse
/// reads a ResourceList, the fast path reads the same; messages and
/// printed results in proportion to the input.
#[test]
fn fuzz_resource_list_output() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../krm-yaml/tests/fixtures/yaml/parse");
    let seeds = yaml::seeds(&dir, "yaml");
    let stats = fuzzing::run(
        "krm-results stdout",
        Duration::from_secs(10),
        move |u: &mut Unstructured<'_>| {
            let text = yaml::resource_list(u, &seeds, MAX_INPUT)?;
            if u.ratio(1, 5)? {
                // Bytes, not text: invalid UTF-8 and lone surrogates too.
                let other = u.choose(&seeds)?;
                return bytes::mutate(u, text.as_bytes(), yaml::FRAGMENTS, other, MAX_INPUT);
            }
            Ok(text.into_bytes())
        },
        |out: &Vec<u8>| {
            let fast = parse_output(out);
            let strict = parse_output_strict(out);
            if strict.is_ok() {
                assert_eq!(fast, strict, "the fast path and the full parse disagree");
            }
            let bound = 2 * out.len() + 1024;
            for e in [&fast, &strict]
                .into_iter()
                .filter_map(|r| r.as_ref().err())
            {
                let message = e.to_string();
                assert!(
                    message.len() <= bound,
                    "a message of {} bytes",
                    message.len()
                );
            }
            if let Ok(rl) = &fast {
                let printed = format_results(&rl.results);
                assert!(
                    printed.len() <= 4 * bound,
                    "{} bytes printed",
                    printed.len()
                );
            }
            // kpt's reading of the same `results`.
            if let Ok(serde_yaml_ng::Value::Mapping(m)) =
                serde_yaml_ng::from_slice::<serde_yaml_ng::Value>(out)
            {
                if let Some(results) = m.get("results") {
                    let read = kpt::read(results);
                    let printed = format_results(&read);
                    assert!(
                        printed.len() <= 4 * bound,
                        "{} bytes printed",
                        printed.len()
                    );
                }
            }
            fast.is_ok()
        },
    );
    stats.assert_both_paths("stdout", 0.05);
}
