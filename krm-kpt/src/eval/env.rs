//! `eval -e/--env KEY[=VALUE]`: the function's environment, as kpt hands
//! it to `docker run` and docker's CLI reads it.
//!
//! kpt gathers the flags into a map (`KEY=VALUE`, the last value of a key
//! winning) and a list of bare keys, and passes `docker run` the pairs
//! sorted by key, then the bare keys. docker's CLI refuses an empty key,
//! and gives a bare key this process's value, or leaves it bare when it has
//! none, which unsets it in the container (the image's own value too). So
//! a bare key wins over a pair of the same key whatever their order, and
//! `-e K=1 -e K` with `K` unset here leaves `K` unset.

use krm_yaml::package::go_quote;

use super::error::Error;

/// The function's environment from `-e` flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FunctionEnv {
    /// In `docker run`'s order; `None`: unset.
    vars: Vec<(String, Option<String>)>,
}

impl FunctionEnv {
    /// The flags' values in order; bare keys take this process's values.
    pub fn parse(flags: &[String]) -> Result<Self, Error> {
        Self::parse_with(flags, |key| std::env::var(key).ok())
    }

    /// [`FunctionEnv::parse`] with `lookup` for this process's environment.
    pub fn parse_with(
        flags: &[String],
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, Error> {
        let mut pairs = std::collections::BTreeMap::new();
        let mut bare: Vec<&str> = Vec::new();
        for flag in flags {
            match flag.split_once('=') {
                Some((key, value)) => {
                    pairs.insert(key, value);
                }
                None if !bare.contains(&flag.as_str()) => bare.push(flag),
                None => {}
            }
        }
        // docker checks its `-e` flags in the order kpt gives them: the
        // pairs (an empty key sorts first), then the bare keys.
        let refused = match pairs.get("") {
            Some(value) => Some(format!("={value}")),
            None => bare.contains(&"").then(String::new),
        };
        if let Some(flag) = refused {
            return Err(Error::Input(format!(
                "invalid argument {} for \"-e, --env\" flag: invalid environment variable: {flag}",
                go_quote(&flag)
            )));
        }
        let mut vars: Vec<(String, Option<String>)> = pairs
            .into_iter()
            .filter(|(key, _)| !bare.contains(key))
            .map(|(key, value)| (key.to_owned(), Some(value.to_owned())))
            .collect();
        vars.extend(bare.into_iter().map(|key| (key.to_owned(), lookup(key))));
        Ok(FunctionEnv { vars })
    }

    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// Entries of a container's environment, as docker's CLI sends them to
    /// the engine: `KEY=VALUE`, or a bare `KEY` that unsets it.
    pub fn container_env(&self) -> Vec<String> {
        self.vars
            .iter()
            .map(|(key, value)| match value {
                Some(value) => format!("{key}={value}"),
                None => key.clone(),
            })
            .collect()
    }

    /// What a local process (an `--exec` function, a process pod) gets on
    /// top of this process's environment, which it inherits: the keys set.
    /// A key left unset is not in this process's environment, so it is not
    /// inherited either.
    pub fn process_env(&self) -> Vec<(String, String)> {
        self.vars
            .iter()
            .filter_map(|(key, value)| Some((key.clone(), value.clone()?)))
            .collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn parse(flags: &[&str]) -> Result<FunctionEnv, Error> {
        let flags: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
        FunctionEnv::parse_with(&flags, |key| (key == "HOST").then(|| "here".to_string()))
    }

    #[test]
    fn pairs_sorted_last_value_wins_then_bare_keys() {
        let env = parse(&["B=2", "A=1", "B=3", "HOST", "E=x=y", "F=", "HOST"]).unwrap();
        assert_eq!(
            env.container_env(),
            ["A=1", "B=3", "E=x=y", "F=", "HOST=here"]
        );
    }

    #[test]
    fn a_bare_key_wins_over_a_pair_and_unsets_when_not_here() {
        let env = parse(&["HOST=1", "HOST", "GONE", "GONE=2"]).unwrap();
        assert_eq!(env.container_env(), ["HOST=here", "GONE"]);
        assert_eq!(env.process_env(), [("HOST".into(), "here".into())]);
    }

    #[test]
    fn an_empty_key_is_refused_in_docker_words() {
        let err = parse(&["A=1", "=x", "=y"]).unwrap_err().to_string();
        assert_eq!(
            err,
            r#"invalid argument "=y" for "-e, --env" flag: invalid environment variable: =y"#
        );
        let err = parse(&["A=1", ""]).unwrap_err().to_string();
        assert_eq!(
            err,
            r#"invalid argument "" for "-e, --env" flag: invalid environment variable: "#
        );
    }
}
