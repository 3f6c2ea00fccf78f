//! Host name resolution without glibc's getaddrinfo, which a static binary should not
//! lean on (and which would add ~200 KB to it): `/etc/hosts`, then DNS to the
//! nameservers of `/etc/resolv.conf`, with its `search` list and `ndots`, A and
//! AAAA queries over UDP, TCP when a reply is truncated. `localhost` and IP literals
//! never get here (see `dial`).

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

const TYPE_A: u16 = 1;
const TYPE_AAAA: u16 = 28;
const RCODE_NXDOMAIN: u8 = 3;

/// What `/etc/resolv.conf` says (glibc's defaults where it is silent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub servers: Vec<SocketAddr>,
    pub search: Vec<String>,
    pub ndots: usize,
    pub timeout: Duration,
    pub attempts: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            servers: vec![SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 53)],
            search: Vec::new(),
            ndots: 1,
            timeout: Duration::from_secs(5),
            attempts: 2,
        }
    }
}

impl Config {
    pub fn parse(text: &str) -> Config {
        let mut c = Config::default();
        let mut servers = Vec::new();
        for line in text.lines() {
            let line = line.split(['#', ';']).next().unwrap_or("");
            let mut words = line.split_whitespace();
            match words.next() {
                Some("nameserver") => {
                    if let Some(ip) = words.next().and_then(|w| w.parse::<IpAddr>().ok()) {
                        if servers.len() < 3 {
                            servers.push(SocketAddr::new(ip, 53));
                        }
                    }
                }
                Some("search") => c.search = words.map(str::to_string).collect(),
                Some("domain") => c.search = words.take(1).map(str::to_string).collect(),
                Some("options") => {
                    for o in words {
                        let num = |p: &str| o.strip_prefix(p).and_then(|v| v.parse::<usize>().ok());
                        if let Some(n) = num("ndots:") {
                            c.ndots = n.min(15);
                        } else if let Some(n) = num("timeout:") {
                            c.timeout = Duration::from_secs(n.clamp(1, 30) as u64);
                        } else if let Some(n) = num("attempts:") {
                            c.attempts = n.clamp(1, 5);
                        }
                    }
                }
                _ => {}
            }
        }
        if !servers.is_empty() {
            c.servers = servers;
        }
        c
    }

    /// The fully qualified names to try for `name`, in glibc's order.
    pub fn candidates(&self, name: &str) -> Vec<String> {
        if let Some(abs) = name.strip_suffix('.') {
            return vec![format!("{abs}.")];
        }
        let searched = self.search.iter().map(|d| d.trim_matches('.')).map(|d| {
            if d.is_empty() {
                format!("{name}.")
            } else {
                format!("{name}.{d}.")
            }
        });
        let as_is = format!("{name}.");
        let mut out: Vec<String> = Vec::new();
        if name.matches('.').count() >= self.ndots {
            out.push(as_is.clone());
        }
        for s in searched {
            if !out.contains(&s) {
                out.push(s);
            }
        }
        if !out.contains(&as_is) {
            out.push(as_is);
        }
        out
    }
}

/// The addresses `/etc/hosts` (its text) gives `name`.
pub fn hosts_lookup(text: &str, name: &str) -> Vec<IpAddr> {
    let name = name.trim_end_matches('.');
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        let Some(ip) = words.next() else { continue };
        if !words.any(|w| w.trim_end_matches('.').eq_ignore_ascii_case(name)) {
            continue;
        }
        // "fe80::1%eth0": the zone is dropped
        if let Ok(ip) = ip.split('%').next().unwrap_or(ip).parse::<IpAddr>() {
            if !out.contains(&ip) {
                out.push(ip);
            }
        }
    }
    out
}

/// A DNS query for `name` (fully qualified, with the final dot).
pub fn build_query(id: u16, name: &str, qtype: u16) -> Result<Vec<u8>, String> {
    let mut q = Vec::with_capacity(name.len() + 18);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]); // RD; one question
    for label in name.trim_end_matches('.').split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err("invalid domain name".into());
        }
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    if q.len() - 12 > 255 {
        return Err("invalid domain name".into());
    }
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&[0, 1]); // class IN
    Ok(q)
}

/// The parts of a DNS reply the resolver needs.
#[derive(Debug, PartialEq, Eq)]
pub struct Reply {
    pub rcode: u8,
    pub truncated: bool,
    pub addrs: Vec<IpAddr>,
}

fn skip_name(msg: &[u8], mut i: usize) -> Option<usize> {
    loop {
        let len = *msg.get(i)? as usize;
        match len {
            0 => return Some(i + 1),
            l if l & 0xc0 == 0xc0 => return Some(i + 2),
            l if l & 0xc0 == 0 => i += 1 + l,
            _ => return None,
        }
    }
}

fn u16_at(msg: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*msg.get(i)?, *msg.get(i + 1)?]))
}

/// Parses the reply to query `id` of type `qtype`; `None` if it is not one.
pub fn parse_reply(msg: &[u8], id: u16, qtype: u16) -> Option<Reply> {
    if u16_at(msg, 0)? != id || msg.get(2)? & 0x80 == 0 {
        return None;
    }
    let truncated = msg[2] & 0x02 != 0;
    let rcode = msg.get(3)? & 0x0f;
    let qd = u16_at(msg, 4)?;
    let an = u16_at(msg, 6)?;
    let mut i = 12;
    for _ in 0..qd {
        i = skip_name(msg, i)? + 4;
    }
    let mut addrs = Vec::new();
    for _ in 0..an {
        i = skip_name(msg, i)?;
        let rtype = u16_at(msg, i)?;
        let rdlen = u16_at(msg, i + 8)? as usize;
        let rdata = msg.get(i + 10..i + 10 + rdlen)?;
        i += 10 + rdlen;
        match (rtype, rdata.len()) {
            (TYPE_A, 4) if qtype == TYPE_A => {
                addrs.push(IpAddr::V4(Ipv4Addr::new(
                    rdata[0], rdata[1], rdata[2], rdata[3],
                )));
            }
            (TYPE_AAAA, 16) if qtype == TYPE_AAAA => {
                let mut b = [0u8; 16];
                b.copy_from_slice(rdata);
                addrs.push(IpAddr::V6(Ipv6Addr::from(b)));
            }
            _ => {} // CNAMEs and the like: their targets' records follow
        }
    }
    Some(Reply {
        rcode,
        truncated,
        addrs,
    })
}

fn random_id() -> u16 {
    // std seeds RandomState from the OS's random source
    (RandomState::new().hash_one(0u8) & 0xffff) as u16
}

/// One query over TCP (after a truncated UDP reply).
async fn query_tcp(server: SocketAddr, query: &[u8], id: u16, qtype: u16) -> Result<Reply, String> {
    let mut s = TcpStream::connect(server)
        .await
        .map_err(|e| e.to_string())?;
    let mut msg = (query.len() as u16).to_be_bytes().to_vec();
    msg.extend_from_slice(query);
    s.write_all(&msg).await.map_err(|e| e.to_string())?;
    let mut len = [0u8; 2];
    s.read_exact(&mut len).await.map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
    s.read_exact(&mut buf).await.map_err(|e| e.to_string())?;
    parse_reply(&buf, id, qtype).ok_or_else(|| "malformed DNS reply".to_string())
}

/// Asks `server` for the A and AAAA records of `fqdn` at once.
async fn query_server(
    server: SocketAddr,
    fqdn: &str,
    timeout: Duration,
) -> Result<[Reply; 2], String> {
    let bind: SocketAddr = match server {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let sock = UdpSocket::bind(bind).await.map_err(|e| e.to_string())?;
    sock.connect(server).await.map_err(|e| e.to_string())?;
    let qtypes = [TYPE_A, TYPE_AAAA];
    let ids = [random_id(), random_id() ^ 0x5a5a];
    let queries = [
        build_query(ids[0], fqdn, qtypes[0])?,
        build_query(ids[1], fqdn, qtypes[1])?,
    ];
    for q in &queries {
        sock.send(q).await.map_err(|e| e.to_string())?;
    }
    let mut replies: [Option<Reply>; 2] = [None, None];
    let mut buf = [0u8; 1232];
    let receive = async {
        while replies.iter().any(Option::is_none) {
            let n = sock.recv(&mut buf).await.map_err(|e| e.to_string())?;
            for k in 0..2 {
                if replies[k].is_none() {
                    if let Some(r) = parse_reply(&buf[..n], ids[k], qtypes[k]) {
                        replies[k] = Some(r);
                    }
                }
            }
        }
        Ok::<(), String>(())
    };
    match tokio::time::timeout(timeout, receive).await {
        Ok(r) => r?,
        Err(_) => return Err("i/o timeout".into()),
    }
    let [a, aaaa] = replies;
    let (Some(mut a), Some(mut aaaa)) = (a, aaaa) else {
        return Err("no reply".into());
    };
    if a.truncated && a.addrs.is_empty() {
        a = query_tcp(server, &queries[0], ids[0], qtypes[0]).await?;
    }
    if aaaa.truncated && aaaa.addrs.is_empty() {
        aaaa = query_tcp(server, &queries[1], ids[1], qtypes[1]).await?;
    }
    Ok([a, aaaa])
}

/// Resolves `name` with `hosts` (the text of /etc/hosts) and `cfg`. IPv4 addresses
/// come first. The error is in Go's words: `lookup NAME: no such host`,
/// `lookup NAME on 10.96.0.10:53: server misbehaving`.
pub async fn lookup_with(name: &str, hosts: &str, cfg: &Config) -> Result<Vec<IpAddr>, String> {
    let from_hosts = hosts_lookup(hosts, name);
    if !from_hosts.is_empty() {
        return Ok(from_hosts);
    }
    let mut failure: Option<String> = None;
    for fqdn in cfg.candidates(name) {
        let mut answered = false;
        'servers: for _ in 0..cfg.attempts {
            for &server in &cfg.servers {
                match query_server(server, &fqdn, cfg.timeout).await {
                    Ok([a, aaaa]) => {
                        let ok = |r: &Reply| r.rcode == 0 || r.rcode == RCODE_NXDOMAIN;
                        if !ok(&a) || !ok(&aaaa) {
                            failure.get_or_insert(format!(
                                "lookup {name} on {server}: server misbehaving"
                            ));
                            continue;
                        }
                        let mut addrs = a.addrs;
                        addrs.extend(aaaa.addrs);
                        if !addrs.is_empty() {
                            return Ok(addrs);
                        }
                        answered = true;
                        break 'servers;
                    }
                    Err(e) => {
                        failure.get_or_insert(format!("lookup {name} on {server}: {e}"));
                    }
                }
            }
        }
        if !answered
            && failure
                .as_deref()
                .is_some_and(|f| f.contains("invalid domain name"))
        {
            break;
        }
    }
    Err(failure.unwrap_or_else(|| format!("lookup {name}: no such host")))
}

/// Resolves `name` with the system's /etc/hosts and /etc/resolv.conf.
pub async fn lookup(name: &str) -> Result<Vec<IpAddr>, String> {
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    let cfg = std::fs::read_to_string("/etc/resolv.conf")
        .map(|t| Config::parse(&t))
        .unwrap_or_default();
    lookup_with(name, &hosts, &cfg).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolv_conf() {
        let c = Config::parse(
            "# kubernetes\nnameserver 10.96.0.10\nsearch ns.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5 timeout:2\n",
        );
        assert_eq!(c.servers, vec!["10.96.0.10:53".parse().expect("addr")]);
        assert_eq!(c.ndots, 5);
        assert_eq!(c.timeout, Duration::from_secs(2));
        assert_eq!(
            c.candidates("db"),
            [
                "db.ns.svc.cluster.local.",
                "db.svc.cluster.local.",
                "db.cluster.local.",
                "db."
            ]
        );
        assert_eq!(c.candidates("a.b.c.d.e.f")[0], "a.b.c.d.e.f.");
        assert_eq!(c.candidates("db.")[..], ["db."]);
        assert_eq!(Config::parse("").servers, Config::default().servers);
        let d = Config::parse("domain example.com\nnameserver ::1\n");
        assert_eq!(d.candidates("x.y"), ["x.y.", "x.y.example.com."]);
        assert_eq!(d.servers, vec!["[::1]:53".parse().expect("addr")]);
    }

    #[test]
    fn hosts_file() {
        let hosts = "127.0.0.1 localhost\n10.1.2.3 pod-0.web web # comment\n::1 localhost ip6-localhost\nfe80::1%eth0 web\n";
        assert_eq!(
            hosts_lookup(hosts, "WEB."),
            vec![
                "10.1.2.3".parse::<IpAddr>().expect("ip"),
                "fe80::1".parse().expect("ip")
            ]
        );
        assert!(hosts_lookup(hosts, "comment").is_empty());
    }

    /// A reply to `query` with the given records (type, rdata).
    fn reply(query: &[u8], rcode: u8, tc: bool, records: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut r = query.to_vec();
        r[2] = 0x81 | if tc { 0x02 } else { 0 };
        r[3] = 0x80 | rcode;
        r[6..8].copy_from_slice(&(records.len() as u16).to_be_bytes());
        for (t, data) in records {
            r.extend_from_slice(&[0xc0, 12]); // pointer to the question's name
            r.extend_from_slice(&t.to_be_bytes());
            r.extend_from_slice(&[0, 1, 0, 0, 0, 30]);
            r.extend_from_slice(&(data.len() as u16).to_be_bytes());
            r.extend_from_slice(data);
        }
        r
    }

    #[test]
    fn wire_format() {
        let q = build_query(0x1234, "db.ns.", TYPE_A).expect("query");
        assert_eq!(
            q,
            b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x02db\x02ns\x00\x00\x01\x00\x01"
        );
        let r = reply(
            &q,
            0,
            false,
            &[(5, b"\x01x\x00".to_vec()), (TYPE_A, vec![10, 0, 0, 7])],
        );
        assert_eq!(
            parse_reply(&r, 0x1234, TYPE_A),
            Some(Reply {
                rcode: 0,
                truncated: false,
                addrs: vec!["10.0.0.7".parse().expect("ip")]
            })
        );
        assert_eq!(parse_reply(&r, 0x1235, TYPE_A), None);
        assert_eq!(parse_reply(&r[..r.len() - 1], 0x1234, TYPE_A), None);
        assert!(build_query(1, &format!("{}.", "a".repeat(64)), TYPE_A).is_err());
    }

    /// A DNS server on 127.0.0.1 that knows `db.ns.svc.cluster.local` (A and AAAA),
    /// says NXDOMAIN to anything else, and truncates the AAAA answer over UDP, so that
    /// the resolver has to ask again over TCP.
    async fn fake_dns() -> SocketAddr {
        let udp = UdpSocket::bind("127.0.0.1:0").await.expect("bind udp");
        let addr = udp.local_addr().expect("addr");
        let tcp = tokio::net::TcpListener::bind(addr).await.expect("bind tcp");
        fn answer(q: &[u8], udp: bool) -> Vec<u8> {
            let qtype = u16::from_be_bytes([q[q.len() - 4], q[q.len() - 3]]);
            let known = &q[12..q.len() - 4] == b"\x02db\x02ns\x03svc\x07cluster\x05local\x00";
            match (known, qtype) {
                (false, _) => reply(q, RCODE_NXDOMAIN, false, &[]),
                (true, TYPE_A) => reply(q, 0, false, &[(TYPE_A, vec![10, 0, 0, 9])]),
                (true, _) if udp => reply(q, 0, true, &[]),
                (true, _) => reply(q, 0, false, &[(TYPE_AAAA, [0xfd; 16].to_vec())]),
            }
        }
        tokio::spawn(async move {
            let mut buf = [0u8; 512];
            while let Ok((n, peer)) = udp.recv_from(&mut buf).await {
                let _ = udp.send_to(&answer(&buf[..n], true), peer).await;
            }
        });
        tokio::spawn(async move {
            while let Ok((mut s, _)) = tcp.accept().await {
                let mut len = [0u8; 2];
                if s.read_exact(&mut len).await.is_err() {
                    continue;
                }
                let mut q = vec![0u8; u16::from_be_bytes(len) as usize];
                if s.read_exact(&mut q).await.is_err() {
                    continue;
                }
                let a = answer(&q, false);
                let mut out = (a.len() as u16).to_be_bytes().to_vec();
                out.extend_from_slice(&a);
                let _ = s.write_all(&out).await;
            }
        });
        addr
    }

    #[tokio::test]
    async fn resolves_through_search_list_udp_and_tcp() {
        let cfg = Config {
            servers: vec![fake_dns().await],
            search: vec!["ns.svc.cluster.local".into(), "svc.cluster.local".into()],
            ndots: 5,
            timeout: Duration::from_secs(5),
            attempts: 1,
        };
        // "db.ns" is tried as db.ns.ns.svc.cluster.local (NXDOMAIN) first
        let addrs = lookup_with("db.ns", "", &cfg).await;
        assert_eq!(
            addrs,
            Ok(vec![
                "10.0.0.9".parse().expect("ip"),
                IpAddr::V6(Ipv6Addr::from([0xfd; 16]))
            ])
        );
        assert_eq!(
            lookup_with("nope", "", &cfg).await,
            Err("lookup nope: no such host".into())
        );
        // /etc/hosts comes first
        assert_eq!(
            lookup_with("db.ns", "10.9.9.9 db.ns\n", &cfg).await,
            Ok(vec!["10.9.9.9".parse().expect("ip")])
        );
    }

    #[tokio::test]
    async fn unreachable_server_is_an_error() {
        // a bound socket that never answers
        let silent = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
        let cfg = Config {
            servers: vec![silent.local_addr().expect("addr")],
            timeout: Duration::from_millis(200),
            attempts: 1,
            ..Config::default()
        };
        let err = lookup_with("db", "", &cfg).await.expect_err("no answer");
        assert!(err.starts_with("lookup db on 127.0.0.1:"), "{err}");
        assert!(err.ends_with(": i/o timeout"), "{err}");
    }
}
