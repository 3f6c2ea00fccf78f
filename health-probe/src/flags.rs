//! Command-line flags with the semantics of Go's `flag` package, as grpc-health-probe
//! parses them: `-flag value`, `-flag=value`, `--flag` forms; boolean flags take no
//! separate value (`-tls`, `-tls=false`); parsing stops at the first non-flag argument
//! or after `--`.

use krm_fn::duration::GoDuration;

/// The parsed command line.
#[derive(Debug, Clone)]
pub struct Options {
    pub addr: String,
    pub service: String,
    pub user_agent: String,
    pub connect_timeout: GoDuration,
    pub rpc_timeout: GoDuration,
    /// `(lowercased key, value)` in the order given.
    pub rpc_headers: Vec<(String, String)>,
    pub tls: bool,
    pub tls_no_verify: bool,
    pub tls_ca_cert: String,
    pub tls_client_cert: String,
    pub tls_client_key: String,
    pub tls_server_name: String,
    pub alts: bool,
    pub spiffe: bool,
    pub gzip: bool,
    pub verbose: bool,
    pub version: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            addr: String::new(),
            service: String::new(),
            user_agent: "grpc_health_probe".into(),
            connect_timeout: GoDuration::from_secs(1),
            rpc_timeout: GoDuration::from_secs(1),
            rpc_headers: Vec::new(),
            tls: false,
            tls_no_verify: false,
            tls_ca_cert: String::new(),
            tls_client_cert: String::new(),
            tls_client_key: String::new(),
            tls_server_name: String::new(),
            alts: false,
            spiffe: false,
            gzip: false,
            verbose: false,
            version: false,
        }
    }
}

/// Why parsing stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum FlagError {
    /// `-h` / `-help`: print the usage.
    Help,
    /// A syntax error, in Go's words (`flag provided but not defined: -x`); the usage follows it.
    Bad(String),
}

/// The usage text, as Go's `flag.PrintDefaults` lays it out.
pub const USAGE: &str = r#"Usage:
  -addr string
    	(required) tcp host:port to connect
  -alts
    	use ALTS (default: false, INSECURE plaintext transport) (not supported by this probe)
  -connect-timeout duration
    	timeout for establishing connection (default 1s)
  -gzip
    	use GZIPCompressor for requests and GZIPDecompressor for response (default: false)
  -rpc-header value
    	additional RPC headers in 'name: value' format. May specify more than one via multiple flags.
  -rpc-timeout duration
    	timeout for health check rpc (default 1s)
  -service string
    	service name to check (default: "")
  -spiffe
    	use SPIFFE to obtain mTLS credentials (not supported by this probe)
  -tls
    	use TLS (default: false, INSECURE plaintext transport)
  -tls-ca-cert string
    	(with -tls, optional) file containing trusted certificates for verifying server
  -tls-client-cert string
    	(with -tls, optional) client certificate for authenticating to the server (requires -tls-client-key)
  -tls-client-key string
    	(with -tls) client private key for authenticating to the server (requires -tls-client-cert)
  -tls-no-verify
    	(with -tls) don't verify the certificate (INSECURE) presented by the server (default: false)
  -tls-server-name string
    	(with -tls) override the hostname used to verify the server certificate
  -user-agent string
    	user-agent header value of health check requests (default "grpc_health_probe")
  -v	verbose logs
  -version
    	print the probe version and exit
"#;

enum Kind {
    Bool(fn(&mut Options, bool)),
    Str(fn(&mut Options, String)),
    Dur(fn(&mut Options, GoDuration)),
    Header,
}

fn lookup(name: &str) -> Option<Kind> {
    use Kind::*;
    Some(match name {
        "addr" => Str(|o, v| o.addr = v),
        "service" => Str(|o, v| o.service = v),
        "user-agent" => Str(|o, v| o.user_agent = v),
        "connect-timeout" => Dur(|o, v| o.connect_timeout = v),
        "rpc-timeout" => Dur(|o, v| o.rpc_timeout = v),
        "rpc-header" => Header,
        "tls" => Bool(|o, v| o.tls = v),
        "tls-no-verify" => Bool(|o, v| o.tls_no_verify = v),
        "tls-ca-cert" => Str(|o, v| o.tls_ca_cert = v),
        "tls-client-cert" => Str(|o, v| o.tls_client_cert = v),
        "tls-client-key" => Str(|o, v| o.tls_client_key = v),
        "tls-server-name" => Str(|o, v| o.tls_server_name = v),
        "alts" => Bool(|o, v| o.alts = v),
        "spiffe" => Bool(|o, v| o.spiffe = v),
        "gzip" => Bool(|o, v| o.gzip = v),
        "v" => Bool(|o, v| o.verbose = v),
        "version" => Bool(|o, v| o.version = v),
        _ => return None,
    })
}

/// Go's `strconv.ParseBool`.
fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Parses one `-rpc-header` value, `name: value`, like grpc-health-probe (split at the
/// first colon, leading blanks of the value dropped, name lowercased), and checks it
/// is a valid gRPC metadata entry, which grpc-go would otherwise reject at call time.
pub fn parse_header(value: &str) -> Result<(String, String), String> {
    let Some((name, val)) = value.split_once(':') else {
        return Err(format!(
            "invalid RPC header, expected 'key: value', got {value:?}"
        ));
    };
    let name = name.trim().to_ascii_lowercase();
    let val = val.trim_start().to_string();
    if name.is_empty()
        || !name
            .bytes()
            .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase() || b"-_.".contains(&c))
    {
        return Err(format!(
            "header key {name:?} contains illegal characters not in [0-9a-z-_.]"
        ));
    }
    if !name.ends_with("-bin") && !val.bytes().all(|c| (0x20..0x7f).contains(&c)) {
        return Err(format!(
            "header key {name:?} contains value with non-printable ASCII characters"
        ));
    }
    Ok((name, val))
}

/// Parses the arguments (without the program name). Arguments after the flags are ignored,
/// as grpc-health-probe ignores them.
pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<Options, FlagError> {
    let mut opts = Options::default();
    let mut i = 0;
    while i < args.len() {
        let s = args[i].as_ref();
        if s.len() < 2 || !s.starts_with('-') {
            break;
        }
        let mut name = &s[1..];
        if let Some(rest) = name.strip_prefix('-') {
            if rest.is_empty() {
                break; // "--" ends the flags
            }
            name = rest;
        }
        if name.is_empty() || name.starts_with('-') || name.starts_with('=') {
            return Err(FlagError::Bad(format!("bad flag syntax: {s}")));
        }
        i += 1;
        let (name, inline) = match name.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (name, None),
        };
        let Some(kind) = lookup(name) else {
            if name == "h" || name == "help" {
                return Err(FlagError::Help);
            }
            return Err(FlagError::Bad(format!(
                "flag provided but not defined: -{name}"
            )));
        };
        if let Kind::Bool(set) = kind {
            let v = match inline {
                None => true,
                Some(v) => parse_bool(v).ok_or_else(|| {
                    FlagError::Bad(format!(
                        "invalid boolean value {v:?} for -{name}: parse error"
                    ))
                })?,
            };
            set(&mut opts, v);
            continue;
        }
        let value = match inline {
            Some(v) => v.to_string(),
            None => match args.get(i) {
                Some(v) => {
                    i += 1;
                    v.as_ref().to_string()
                }
                None => return Err(FlagError::Bad(format!("flag needs an argument: -{name}"))),
            },
        };
        let invalid =
            |why: &str| FlagError::Bad(format!("invalid value {value:?} for flag -{name}: {why}"));
        match kind {
            Kind::Str(set) => set(&mut opts, value.clone()),
            Kind::Dur(set) => {
                let d = GoDuration::parse(&value).map_err(|_| invalid("parse error"))?;
                set(&mut opts, d);
            }
            Kind::Header => {
                let h = parse_header(&value).map_err(|e| invalid(&e))?;
                opts.rpc_headers.push(h);
            }
            Kind::Bool(_) => {}
        }
    }
    Ok(opts)
}

/// The checks grpc-health-probe makes after parsing, in its order and words (without
/// the `error: ` prefix).
pub fn validate(o: &Options) -> Result<(), String> {
    let checks: [(bool, &str); 12] = [
        (
            o.alts && o.spiffe,
            "-alts and -spiffe are mutually incompatible",
        ),
        (o.tls && o.alts, "cannot specify -tls with -alts"),
        (
            o.tls && o.spiffe,
            "-tls and -spiffe are mutually incompatible",
        ),
        (
            !o.tls && o.tls_no_verify,
            "specified -tls-no-verify without specifying -tls",
        ),
        (
            !o.tls && !o.tls_ca_cert.is_empty(),
            "specified -tls-ca-cert without specifying -tls",
        ),
        (
            !o.tls && !o.tls_client_cert.is_empty(),
            "specified -tls-client-cert without specifying -tls",
        ),
        (
            !o.tls && !o.tls_server_name.is_empty(),
            "specified -tls-server-name without specifying -tls",
        ),
        (
            !o.tls_client_cert.is_empty() && o.tls_client_key.is_empty(),
            "specified -tls-client-cert without specifying -tls-client-key",
        ),
        (
            o.tls_client_cert.is_empty() && !o.tls_client_key.is_empty(),
            "specified -tls-client-key without specifying -tls-client-cert",
        ),
        (
            o.tls_no_verify && !o.tls_ca_cert.is_empty(),
            "cannot specify -tls-ca-cert with -tls-no-verify (CA cert would not be used)",
        ),
        (
            o.tls_no_verify && !o.tls_server_name.is_empty(),
            "cannot specify -tls-server-name with -tls-no-verify (server name would not be used)",
        ),
        (
            !o.user_agent.bytes().all(|c| (0x20..0x7f).contains(&c)),
            "-user-agent must contain only printable ASCII characters",
        ),
    ];
    if o.addr.is_empty() {
        return Err("-addr not specified".into());
    }
    if o.connect_timeout.0 <= 0 {
        return Err(format!(
            "-connect-timeout must be greater than zero (specified: {})",
            o.connect_timeout
        ));
    }
    if o.rpc_timeout.0 <= 0 {
        return Err(format!(
            "-rpc-timeout must be greater than zero (specified: {})",
            o.rpc_timeout
        ));
    }
    for (failed, msg) in checks {
        if failed {
            return Err(msg.into());
        }
    }
    if o.alts {
        return Err("-alts is not supported by this health probe".into());
    }
    if o.spiffe {
        return Err("-spiffe is not supported by this health probe".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(args: &[&str]) -> Options {
        match parse(args) {
            Ok(o) => o,
            Err(e) => panic!("{args:?}: {e:?}"),
        }
    }

    fn bad(args: &[&str]) -> String {
        match parse(args) {
            Err(FlagError::Bad(m)) => m,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn go_flag_forms() {
        let o = ok(&["-addr", "a:1", "--service=svc", "-connect-timeout=300ms"]);
        assert_eq!(o.addr, "a:1");
        assert_eq!(o.service, "svc");
        assert_eq!(o.connect_timeout, GoDuration(300_000_000));
        assert_eq!(o.rpc_timeout, GoDuration::from_secs(1));
        let o = ok(&[
            "--addr",
            "-weird",
            "-tls",
            "-v=true",
            "-gzip=0",
            "--rpc-timeout",
            "2s",
        ]);
        assert_eq!(o.addr, "-weird");
        assert!(o.tls && o.verbose && !o.gzip);
        assert_eq!(o.rpc_timeout, GoDuration::from_secs(2));
        // a bool flag takes no separate value: "false" is the first non-flag argument
        let o = ok(&["-tls", "false", "-addr", "x:1"]);
        assert!(o.tls);
        assert_eq!(o.addr, "");
        // "--" and "-" end the flags
        assert_eq!(ok(&["--", "-addr", "x:1"]).addr, "");
        assert_eq!(ok(&["-", "-addr", "x:1"]).addr, "");
        // empty value with '='
        assert_eq!(ok(&["-addr=", "-service="]).addr, "");
        // last one wins
        assert_eq!(ok(&["-addr=a:1", "-addr=b:2"]).addr, "b:2");
    }

    #[test]
    fn headers_accumulate() {
        let o = ok(&[
            "-rpc-header",
            "X-Token: abc def",
            "-rpc-header=k:v:w",
            "--rpc-header=a-bin:\u{1}",
        ]);
        assert_eq!(
            o.rpc_headers,
            vec![
                ("x-token".to_string(), "abc def".to_string()),
                ("k".to_string(), "v:w".to_string()),
                ("a-bin".to_string(), "\u{1}".to_string()),
            ]
        );
    }

    #[test]
    fn syntax_errors_in_go_words() {
        assert_eq!(bad(&["-nope"]), "flag provided but not defined: -nope");
        assert_eq!(bad(&["--nope=1"]), "flag provided but not defined: -nope");
        assert_eq!(bad(&["---addr"]), "bad flag syntax: ---addr");
        assert_eq!(bad(&["-=x"]), "bad flag syntax: -=x");
        assert_eq!(bad(&["-addr"]), "flag needs an argument: -addr");
        assert_eq!(
            bad(&["-tls=yes"]),
            "invalid boolean value \"yes\" for -tls: parse error"
        );
        assert_eq!(
            bad(&["-rpc-timeout", "5"]),
            "invalid value \"5\" for flag -rpc-timeout: parse error"
        );
        assert_eq!(
            bad(&["-rpc-header", "novalue"]),
            "invalid value \"novalue\" for flag -rpc-header: invalid RPC header, expected 'key: value', got \"novalue\""
        );
        assert!(bad(&["-rpc-header", "a b: c"]).contains("illegal characters"));
        assert_eq!(parse(&["-h"]).err(), Some(FlagError::Help));
        assert_eq!(parse(&["--help"]).err(), Some(FlagError::Help));
    }

    #[test]
    fn validation_in_go_order_and_words() {
        let v = |args: &[&str]| validate(&ok(args)).err().unwrap_or_default();
        assert_eq!(v(&[]), "-addr not specified");
        assert_eq!(
            v(&["-addr=x:1", "-connect-timeout=0"]),
            "-connect-timeout must be greater than zero (specified: 0s)"
        );
        assert_eq!(
            v(&["-addr=x:1", "-rpc-timeout=-1.5s"]),
            "-rpc-timeout must be greater than zero (specified: -1.5s)"
        );
        assert_eq!(
            v(&["-addr=x:1", "-tls-ca-cert=ca.pem"]),
            "specified -tls-ca-cert without specifying -tls"
        );
        assert_eq!(
            v(&["-addr=x:1", "-tls", "-tls-client-cert=c"]),
            "specified -tls-client-cert without specifying -tls-client-key"
        );
        assert_eq!(
            v(&["-addr=x:1", "-tls", "-tls-no-verify", "-tls-server-name=n"]),
            "cannot specify -tls-server-name with -tls-no-verify (server name would not be used)"
        );
        assert_eq!(
            v(&["-addr=x:1", "-alts"]),
            "-alts is not supported by this health probe"
        );
        assert_eq!(
            v(&["-addr=x:1", "-tls", "-alts"]),
            "cannot specify -tls with -alts"
        );
        assert_eq!(v(&["-addr=x:1", "-tls", "-tls-no-verify"]), "");
    }
}
