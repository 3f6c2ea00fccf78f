#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use super::super::interp::{execute, Printed, Request};

/// What the program printed, or its error result's message.
fn run(source: &str) -> Result<String, String> {
    let printed = Printed::default();
    let request = Request {
        name: "test.star".into(),
        source: source.into(),
        items: vec![],
        function_config: None,
        max_depth: 0,
    };
    execute(&request, &|line| printed.line(line))?;
    Ok(printed.0.into_inner())
}

/// The printed lines of a program that must succeed.
fn lines(source: &str) -> Vec<String> {
    match run(source) {
        Ok(out) => out.lines().map(str::to_owned).collect(),
        Err(e) => panic!("the program failed: {e}\n{source}"),
    }
}

/// The error of a program that must fail, checked to contain `want`.
fn fails(source: &str, want: &str) {
    match run(source) {
        Ok(out) => panic!("the program printed {out:?}, expected an error with {want:?}"),
        Err(e) => assert!(e.contains(want), "error {e:?} does not contain {want:?}"),
    }
}

/// The catalog's `tests/starlark/load-library` program: every module the
/// catalog lists loads under its name and symbol.
#[test]
fn every_catalog_module_loads() {
    let source = r#"
load('bsoup.star', 'bsoup')
load('encoding/base64.star', 'base64')
load('encoding/csv.star', 'csv')
load('encoding/json.star', 'json')
load('encoding/yaml.star', 'yaml')
load('geo.star', 'geo')
load('hash.star', 'hash')
load('html.star', 'html')
load('http.star', 'http')
load('math.star', 'math')
load('re.star', 're')
load('time.star', 'time')
load('xlsx.star', 'xlsx')
load('zipfile.star', 'ZipFile')
load('krmfn.star', 'krmfn')
print(type(bsoup.parseHtml), type(html), type(ZipFile), type(geo.Point), type(xlsx.get_url))
"#;
    assert_eq!(
        lines(source),
        ["function function function function function"]
    );
}

#[test]
fn an_unknown_module_is_empty() {
    fails("load('nope.star', 'x')\n", "x");
}

#[test]
fn yaml_loads_and_dumps() {
    let out = lines(
        r#"
load('encoding/yaml.star', 'yaml')
d = yaml.loads("foo: bar\nbaz: [1, 2.5, true, null]\n")
print(d)
print(yaml.loads(""))
print(yaml.dumps({"b": 1, "a10": True, "a9": None, "a": [1, "x", {"z": "1", "y": 2}]}))
print(yaml.dumps(1, "two"))
print(yaml.dumps([1000000.0, 1.5, 1.0, float("inf")]))
"#,
    );
    assert_eq!(
        out,
        [
            r#"{"foo": "bar", "baz": [1, 2.5, True, None]}"#,
            "None",
            "a:",
            "- 1",
            "- x",
            "- y: 2",
            "  z: \"1\"",
            "a9: null",
            "a10: true",
            "b: 1",
            "",
            "1",
            "---",
            "two",
            "",
            "- 1e+06",
            "- 1.5",
            "- 1",
            "- .inf",
            "",
        ]
    );
    fails(
        "load('encoding/yaml.star', 'yaml')\nyaml.loads('a: [')\n",
        "yaml.loads: yaml: line",
    );
}

#[test]
fn base64_encodings() {
    let out = lines(
        r#"
load('encoding/base64.star', 'base64')
print(base64.encode("hello world!"))
print(base64.decode("aGVsbG8gd29ybGQh"))
print(base64.encode("??>a"), base64.encode("??>a", encoding="url"))
print(base64.encode("??>a", "standard_raw"), base64.encode("??>a", "url_raw"))
print(base64.decode("Pz8-YQ", "url_raw"), base64.decode("Pz8+\nYQ==", "standard"))
"#,
    );
    assert_eq!(
        out,
        [
            "aGVsbG8gd29ybGQh",
            "hello world!",
            "Pz8+YQ== Pz8-YQ==",
            "Pz8+YQ Pz8-YQ",
            "??>a ??>a",
        ]
    );
    fails(
        "load('encoding/base64.star', 'base64')\nbase64.decode('a!b=')\n",
        "base64.decode: illegal base64 data at input byte 1",
    );
    fails(
        "load('encoding/base64.star', 'base64')\nbase64.decode('YQ')\n",
        "base64.decode: illegal base64 data",
    );
    fails(
        "load('encoding/base64.star', 'base64')\nbase64.encode('a', 'hex')\n",
        "base64.encode: unsupported encoding format",
    );
    fails(
        "load('encoding/base64.star', 'base64')\nbase64.decode('/w==')\n",
        "base64.decode: the decoded bytes are not UTF-8",
    );
}

#[test]
fn csv_reads_and_writes_as_go() {
    let out = lines(
        r##"
load('encoding/csv.star', 'csv')
print(csv.read_all('a,"b ""q""",c\r\n\n1,"x\r\ny",3\n'))
print(csv.read_all("# note\nh1;h2\n v1; v2\n", comma=";", comment="#", trim_leading_space=True, skip=1))
print(csv.read_all('a,b"c\n', lazy_quotes=True))
print(csv.read_all("a,b\n1\n", fields_per_record=-1))
print(repr(csv.write_all([["a", "b,c", 'q"', ""], [1, 2.5, True, " x"]])))
print(repr(csv.write_all([["a", "b"]], comma="\t")), csv.write_all(((1000000.0, 123456.5, 0.0001, 0.00001, None),)))
"##,
    );
    assert_eq!(
        out,
        [
            r#"[["a", "b \"q\"", "c"], ["1", "x\ny", "3"]]"#,
            r#"[["v1", "v2"]]"#,
            r#"[["a", "b\"c"]]"#,
            r#"[["a", "b"], ["1"]]"#,
            r#""a,\"b,c\",\"q\"\"\",\n1,2.5,true,\" x\"\n""#,
            r#""a\tb\n" 1e+06,123456.5,0.0001,1e-05,<nil>"#,
            "",
        ]
    );
    fails(
        "load('encoding/csv.star', 'csv')\ncsv.read_all('a,b\"c\\n')\n",
        "csv.read_all: parse error on line 1, column 4: bare \" in non-quoted-field",
    );
    fails(
        "load('encoding/csv.star', 'csv')\ncsv.read_all('a,\"b\\nc')\n",
        "csv.read_all: record on line 1; parse error on line 2, column 2: extraneous or missing \" in quoted-field",
    );
    fails(
        "load('encoding/csv.star', 'csv')\ncsv.read_all('a,b\\n1\\n')\n",
        "csv.read_all: record on line 2: wrong number of fields",
    );
    fails(
        "load('encoding/csv.star', 'csv')\ncsv.write_all([[[1]]])\n",
        "csv.write_all: row 0, field 0",
    );
}

#[test]
fn hash_digests() {
    let out = lines(
        r#"
load('hash.star', 'hash')
print(hash.md5("hello world!"))
print(hash.sha1("hello world!"))
print(hash.sha256("hello world!"))
"#,
    );
    assert_eq!(
        out,
        [
            "fc3ff98e8c6a0d3087d515c0473f8677",
            "430ce34d020724ed75a196dfc2ad67c77772d169",
            "7509e5bda0c762d2bac7f90d758b5b2263fa01ccbc542ab5e3df163be08e6ca9",
        ]
    );
}

#[test]
fn re_as_starlib() {
    let out = lines(
        r#"
load('re.star', 're')
p = r"(\w*)\s*(ADD|REM)\s*(.*)"
print(re.match(p, "EDM ADD FROM INJURED"))
print(re.match("x", "abc"))
print(re.findall("foo", "foo bar baz foo"))
print(re.findall("a*", "baaac"))
print(re.split(" ", "foo bar baz bat"), re.split(" ", "foo bar baz bat", maxsplit=1))
print(re.sub("(a)(b)", "$2$1", "abab"), re.sub("a", "x", "aaa", count=2), re.sub("a*", "-", "baaac"))
print(re.search("bar", "foo bar"), re.search("x", "foo"))
print(re.findall(r"\d+", "a1\u0663\u0664b22"))
print(re.findall(r"[\w.]+", "a.b c_d"), re.findall(r"\Qa.b\E", "a.b axb"))
r = re.compile("o+")
print(r.pattern, r.findall("foo boo"), r.sub("0", "foo"), r.split("xoyooz"), r.match("oo"), r.search("xo"))
"#,
    );
    assert_eq!(
        out,
        [
            r#"[("EDM ADD FROM INJURED", "EDM", "ADD", "FROM INJURED")]"#,
            "None",
            r#"("foo", "foo")"#,
            r#"("", "aaa", "")"#,
            r#"("foo", "bar", "baz", "bat") ("foo", "bar baz bat")"#,
            "baba xxa -b-c-",
            "[4, 7] None",
            r#"("1", "22")"#,
            r#"("a.b", "c_d") ("a.b",)"#,
            r#"o+ ("oo", "oo") f0 ("x", "y", "z") [("oo",)] [1, 2]"#,
        ]
    );
    fails(
        "load('re.star', 're')\nre.compile('(')\n",
        "re.compile: error parsing regexp: missing closing ): `(`",
    );
    fails(
        "load('re.star', 're')\nre.sub('[a', '', 'x')\n",
        "re.sub: error parsing regexp: missing closing ]: `[a`",
    );
}

#[test]
fn math_functions() {
    let out = lines(
        r#"
load('math.star', 'math')
print(math.ceil(1.2), math.floor(-1.5), math.ceil(3), math.floor(1e20), type(math.floor(2.0)))
print(math.round(2.5), math.round(-2.5), math.fabs(-3), math.copysign(2, -0.0))
print(math.pow(2, 10), math.log(8, 2), math.log(math.e), math.mod(7, 3), math.remainder(7, 4))
print(math.gamma(5), abs(math.gamma(0.5) - math.sqrt(math.pi)) < 1e-12, abs(math.gamma(-1.5) - 2.3632718012073544) < 1e-12)
print(math.degrees(math.pi), math.radians(180) == math.pi, math.hypot(3, 4), math.atan2(1, 1) == math.pi / 4)
print(math.exp(0), math.sqrt(16), math.sin(0), math.cos(0), math.tan(0), math.asin(0), math.acos(1), math.atan(0))
print(math.sinh(0), math.cosh(0), math.tanh(0), math.asinh(0), math.acosh(1), math.atanh(0))
"#,
    );
    assert_eq!(
        out,
        [
            "2 -2 3 100000000000000000000 int",
            "3.0 -3.0 3.0 -2.0",
            "1024.0 3.0 1.0 1.0 -1.0",
            "24.0 True True",
            "180.0 True 5.0 True",
            "1.0 4.0 0.0 1.0 0.0 0.0 0.0 0.0",
            "0.0 1.0 0.0 0.0 0.0 0.0",
        ]
    );
    fails(
        "load('math.star', 'math')\nmath.log(1, 1)\n",
        "math.log: division by zero",
    );
    fails(
        "load('math.star', 'math')\nmath.floor(float('nan'))\n",
        "math.floor: cannot convert float nan to integer",
    );
}

#[test]
fn time_values() {
    let out = lines(
        r#"
load('time.star', 'time')
t = time.parse_time("2000-01-02T03:04:05Z")
print(t.year, t.month, t.day, t.hour, t.minute, t.second, t.nanosecond, t.unix, t.unix_nano, t.rfc3339)
print(t.format("Mon Jan 2 15:04:05 -0700 MST 2006"), t.format("3 04 PM"), t.format("2006-01-02 15:04:05.000"))
e = time.parse_time("2000-01-01T22:04:05-05:00")
print(e.unix == t.unix, e.hour, e.offset, repr(e.zone), e.rfc3339, e.in_location("UTC").rfc3339)
z = time.parse_time("0001-01-01T00:00:00Z")
print(z.format("Mon Jan 2 15:04:05 -0700 MST 2006"), z.unix)
print(time.from_timestamp(1593193116).rfc3339, time.from_timestamp(0, 1500000000).rfc3339)
f = time.parse_time("2011-04-22T13:33:48.1234Z")
print(f.nanosecond, f.format("15:04:05.999999999"), f.format("15:04:05,000000"))
print(time.parse_time("9:15PM", format="3:04PM").rfc3339, time.parse_time("Feb 29 2020 MST", format="Jan _2 2006 MST").format("2006-01-02 MST"))
print(time.parse_time("2010-04-22T13:33:48Z") < time.parse_time("2011-04-22T13:33:48Z"), time.parse_time("2012-04-22T13:33:48Z") > t)
print(time.time(year=2020, month=13, day=1).rfc3339, time.time(year=2020, month=2, day=30, hour=25).rfc3339)
print(time.parse_duration("1h2m3.5s"), time.parse_duration("-1.5h"), time.parse_duration("0"), time.parse_duration("1\u00b5s"), time.parse_duration(42))
print(time.hour == 3600 * time.second, time.minute // time.second, time.millisecond * 1000 == time.second, time.microsecond, time.nanosecond)
print(time.is_valid_timezone("UTC"), time.is_valid_timezone(""), time.is_valid_timezone("America/New_York"))
print(time.now().year >= 2024, type(time.now().unix_nano))
"#,
    );
    assert_eq!(
        out,
        [
            "2000 1 2 3 4 5 0 946782245 946782245000000000 2000-01-02T03:04:05Z",
            "Sun Jan 2 03:04:05 +0000 UTC 2000 3 04 AM 2000-01-02 03:04:05.000",
            r#"True 22 -18000 "" 2000-01-01T22:04:05-05:00 2000-01-02T03:04:05Z"#,
            "Mon Jan 1 00:00:00 +0000 UTC 0001 -62135596800",
            "2020-06-26T17:38:36Z 1970-01-01T00:00:01Z",
            "123400000 13:33:48.1234 13:33:48,123400",
            "0000-01-01T21:15:00Z 2020-02-29 MST",
            "True True",
            "2021-01-01T00:00:00Z 2020-03-02T01:00:00Z",
            "3723500000000 -5400000000000 0 1000 42",
            "True 60 True 1000 1",
            "True True False",
            "True int",
        ]
    );
    for (source, want) in [
        (
            "time.parse_time('2011-13-01T00:00:00Z')",
            r#"time.parse_time: parsing time "2011-13-01T00:00:00Z": month out of range"#,
        ),
        (
            "time.parse_time('bad')",
            r#"time.parse_time: parsing time "bad" as "2006-01-02T15:04:05Z07:00": cannot parse "bad" as "2006""#,
        ),
        (
            "time.parse_time('2011-02-30T00:00:00Z')",
            r#"parsing time "2011-02-30T00:00:00Z": day out of range"#,
        ),
        (
            "time.parse_time('2011-01-01T00:00:00Zjunk')",
            r#"parsing time "2011-01-01T00:00:00Zjunk": extra text: "junk""#,
        ),
        (
            "time.parse_time('2011-01-01T00:00:00Z', location='Europe/Paris')",
            "time.parse_time: unknown time zone Europe/Paris",
        ),
        (
            "time.now().in_location('Asia/Tokyo')",
            "time.in_location: unknown time zone Asia/Tokyo",
        ),
        (
            "time.parse_duration('1x')",
            r#"time.parse_duration: time: unknown unit "x" in duration "1x""#,
        ),
        (
            "time.parse_duration('1')",
            r#"time.parse_duration: time: missing unit in duration "1""#,
        ),
        (
            "time.parse_duration('')",
            r#"time.parse_duration: time: invalid duration """#,
        ),
        (
            "time.parse_duration('3000000h')",
            r#"time: invalid duration "3000000h""#,
        ),
    ] {
        fails(&format!("load('time.star', 'time')\n{source}\n"), want);
    }
}

#[test]
fn http_has_no_network() {
    for function in ["get", "put", "post", "delete", "patch", "options"] {
        fails(
            &format!("load('http.star', 'http')\nhttp.{function}('https://example.com', headers={{}})\n"),
            &format!("http.{function}: functions have no network (the starlark function runs in a sandbox)"),
        );
    }
}

#[test]
fn modules_not_built_in_say_so() {
    for (module, symbol, call, name) in [
        (
            "bsoup.star",
            "bsoup",
            "bsoup.parseHtml('<p>')",
            "bsoup.parseHtml",
        ),
        ("geo.star", "geo", "geo.Point(1, 2)", "geo.Point"),
        (
            "geo.star",
            "geo",
            "geo.parseGeoJSON('{}')",
            "geo.parseGeoJSON",
        ),
        ("html.star", "html", "html('<p>')", "html"),
        (
            "xlsx.star",
            "xlsx",
            "xlsx.get_url('https://x')",
            "xlsx.get_url",
        ),
        ("zipfile.star", "ZipFile", "ZipFile('PK')", "ZipFile"),
    ] {
        fails(
            &format!("load('{module}', '{symbol}')\n{call}\n"),
            &format!("{name} "),
        );
        fails(
            &format!("load('{module}', '{symbol}')\n{call}\n"),
            "not available in the built-in starlark function",
        );
    }
}
