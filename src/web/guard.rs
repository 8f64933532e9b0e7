//! Who may talk to the console: the checks every request passes before a route sees it.
//!
//! - `Host` must name one of the allowed host names (any port, so an SSH tunnel to
//!   another local port works): a DNS-rebinding page reaches the server under its own
//!   name and is refused.
//! - `Origin`, when a browser sends one, must be this very origin (`http(s)://` + the
//!   request's own `Host`); a mutating request or the live stream from another site,
//!   including another port on localhost, is refused. `Sec-Fetch-Site`, when present,
//!   must say same-origin (or none, for a typed address).
//! - Mutating requests must carry `Content-Type: application/json` and the custom
//!   header [`CUSTOM_HEADER`]: neither can be sent cross-site without a CORS preflight,
//!   which this server never answers, so no simple form post gets through.
//! - Off loopback, a token is required (`Authorization: Bearer …` or the `spice_token`
//!   cookie set by `/login?token=…`), compared in constant time.

use std::fmt;

/// The header every mutating request must carry (any non-empty value).
pub const CUSTOM_HEADER: &str = "x-spice";
/// The cookie `/login` sets.
pub const COOKIE: &str = "spice_token";

/// Why a request was refused: the status code and a one-line reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    pub status: u16,
    pub reason: String,
}

impl Denied {
    fn new(status: u16, reason: impl Into<String>) -> Denied {
        Denied {
            status,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

/// The request headers the guard looks at, as sent (`None` when absent).
#[derive(Debug, Default, Clone, Copy)]
pub struct Seen<'a> {
    pub host: Option<&'a str>,
    pub origin: Option<&'a str>,
    pub sec_fetch_site: Option<&'a str>,
    pub authorization: Option<&'a str>,
    pub cookie: Option<&'a str>,
    pub content_type: Option<&'a str>,
    pub custom: Option<&'a str>,
}

/// What kind of request it is, which decides the checks beyond `Host`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A plain read (pages, assets, JSON documents).
    Read,
    /// The live event streams: `Origin` checked like a write.
    Stream,
    /// A write: `Origin`, JSON and the custom header.
    Mutate,
    /// `/login`: `Host` only; the token is checked by the route itself.
    Login,
}

#[derive(Debug, Clone)]
pub struct Guard {
    /// Lower-case host names without port; IPv6 in brackets.
    hosts: Vec<String>,
    token: Option<String>,
}

impl Guard {
    /// `hosts` are the names the server answers to; `token`, when set, is required.
    pub fn new(hosts: impl IntoIterator<Item = String>, token: Option<String>) -> Guard {
        Guard {
            hosts: hosts.into_iter().map(|h| h.to_ascii_lowercase()).collect(),
            token,
        }
    }

    pub fn needs_token(&self) -> bool {
        self.token.is_some()
    }

    /// Runs every check that applies to a request of `kind`.
    pub fn check(&self, kind: Kind, seen: &Seen<'_>) -> Result<(), Denied> {
        let host = self.check_host(seen.host)?;
        if kind == Kind::Login {
            return Ok(());
        }
        if matches!(kind, Kind::Stream | Kind::Mutate) {
            check_origin(seen.origin, seen.sec_fetch_site, host)?;
        }
        self.check_token(seen)?;
        if kind == Kind::Mutate {
            check_json(seen)?;
        }
        Ok(())
    }

    fn check_host<'a>(&self, host: Option<&'a str>) -> Result<&'a str, Denied> {
        let host = host.ok_or_else(|| Denied::new(400, "missing Host header"))?;
        let Some((name, _port)) = parse_host(host) else {
            return Err(Denied::new(
                400,
                format!(
                    "malformed Host header {:?}: expected NAME[:PORT] or [IPv6][:PORT]",
                    printable(host)
                ),
            ));
        };
        let name = name.to_ascii_lowercase();
        if self.hosts.contains(&name) {
            Ok(host)
        } else {
            Err(Denied::new(
                421,
                format!(
                    "host {:?} is not allowed (allowed: {}; add one with --allow-host)",
                    printable(host),
                    self.hosts.join(", ")
                ),
            ))
        }
    }

    fn check_token(&self, seen: &Seen<'_>) -> Result<(), Denied> {
        if self.token.is_none() {
            return Ok(());
        }
        let bearer = seen
            .authorization
            .and_then(|a| a.strip_prefix("Bearer ").map(str::trim));
        let cookie = seen.cookie.and_then(cookie_value);
        match bearer.or(cookie) {
            None => Err(Denied::new(
                401,
                "a token is required: open the /login?token=… address `spice serve` printed, \
                 or send Authorization: Bearer TOKEN",
            )),
            Some(given) if self.token_matches(given) => Ok(()),
            Some(_) => Err(Denied::new(401, "wrong token")),
        }
    }

    /// True if `given` is the token (constant time in the token's contents).
    pub fn token_matches(&self, given: &str) -> bool {
        self.token
            .as_deref()
            .is_some_and(|t| constant_time_eq(t.as_bytes(), given.as_bytes()))
    }
}

fn check_origin(origin: Option<&str>, fetch_site: Option<&str>, host: &str) -> Result<(), Denied> {
    if let Some(site) = fetch_site {
        if !matches!(site, "same-origin" | "none") {
            return Err(Denied::new(
                403,
                format!(
                    "cross-site request refused (Sec-Fetch-Site: {})",
                    printable(site)
                ),
            ));
        }
    }
    // A browser sends Origin on every POST and every cross-origin stream; its absence
    // means a same-origin stream or a client that is not a browser (curl, scripts).
    let Some(origin) = origin else {
        return Ok(());
    };
    let same = ["http://", "https://"].iter().any(|scheme| {
        origin
            .strip_prefix(scheme)
            .is_some_and(|rest| rest.eq_ignore_ascii_case(host))
    });
    if same {
        Ok(())
    } else {
        Err(Denied::new(
            403,
            format!("origin {:?} is not this console", printable(origin)),
        ))
    }
}

fn check_json(seen: &Seen<'_>) -> Result<(), Denied> {
    let json = seen.content_type.is_some_and(|ct| {
        ct.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
    });
    if !json {
        return Err(Denied::new(
            415,
            "writes take a JSON body (Content-Type: application/json)",
        ));
    }
    if seen.custom.is_none_or(|v| v.trim().is_empty()) {
        return Err(Denied::new(
            403,
            format!("writes need the {CUSTOM_HEADER} header"),
        ));
    }
    Ok(())
}

/// A `Host` value read as `host [":" port]` (RFC 9110 7.2, RFC 3986 3.2.2): the name
/// (IPv6 kept in its brackets) and the port if one is given. `None` for anything else,
/// so a name is never matched by a prefix: `[::1].evil.example`, `localhost:80:80`,
/// `localhost:`, an unbracketed IPv6 address or a name with a path or user part.
pub fn parse_host(host: &str) -> Option<(&str, Option<u16>)> {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let close = rest.find(']')?;
        rest[..close].parse::<std::net::Ipv6Addr>().ok()?;
        let (name, after) = host.split_at(close + 2);
        match after {
            "" => (name, None),
            p => (name, Some(p.strip_prefix(':')?)),
        }
    } else {
        let (name, port) = match host.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (host, None),
        };
        let reg_name = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~');
        if name.is_empty() || !name.chars().all(reg_name) {
            return None;
        }
        (name, port)
    };
    let port = match port {
        None => None,
        Some(p) if !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) => {
            Some(p.parse::<u16>().ok()?)
        }
        Some(_) => return None,
    };
    Some((name, port))
}

fn cookie_value(header: &str) -> Option<&str> {
    header.split(';').find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == COOKIE).then_some(v.trim())
    })
}

/// Compares without an early exit, so the time taken says nothing about how much of a
/// guess was right. (The length is not secret: every token has the same length.)
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // Keep the compiler from turning the fold back into an early-exit comparison.
    std::hint::black_box(diff) == 0
}

/// Header text for an error message: control characters shown escaped, bounded length.
fn printable(s: &str) -> String {
    s.chars().take(100).flat_map(char::escape_debug).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(token: Option<&str>) -> Guard {
        Guard::new(
            ["127.0.0.1", "localhost", "[::1]"].map(String::from),
            token.map(String::from),
        )
    }

    fn read(host: &str) -> Seen<'_> {
        Seen {
            host: Some(host),
            ..Seen::default()
        }
    }

    #[test]
    fn host_names_are_checked_without_their_port() {
        let g = guard(None);
        for ok in ["127.0.0.1:8080", "localhost:9000", "LOCALHOST", "[::1]:1"] {
            assert_eq!(g.check(Kind::Read, &read(ok)), Ok(()), "{ok}");
        }
        for bad in [
            "evil.example:8080",
            "127.0.0.2:80",
            "localhost.evil.example",
            "[::2]:1",
        ] {
            assert_eq!(
                g.check(Kind::Read, &read(bad)).unwrap_err().status,
                421,
                "{bad}"
            );
        }
        assert_eq!(
            g.check(Kind::Read, &Seen::default()).unwrap_err().status,
            400
        );
    }

    /// Issue #14: `[::1].evil.example` passed as `[::1]`, the Host read by its prefix.
    #[test]
    fn a_host_is_parsed_as_name_and_port_never_matched_by_prefix() {
        let g = guard(None);
        for bad in [
            "[::1].evil.example",
            "[::1]evil.example:80",
            "[::1]:80.evil.example",
            "[::1]:",
            "[::1",
            "[evil.example]",
            "localhost:80:80",
            "localhost:",
            "localhost:http",
            "localhost:99999",
            "::1",
            "user@localhost",
            "localhost/x",
            "localhost ",
            "",
        ] {
            let e = g.check(Kind::Read, &read(bad)).unwrap_err();
            assert_eq!(e.status, 400, "{bad}: {e}");
            assert!(e.reason.contains("malformed Host header"), "{bad}: {e}");
        }
        assert_eq!(parse_host("[::1]:80"), Some(("[::1]", Some(80))));
        assert_eq!(parse_host("[::1]"), Some(("[::1]", None)));
        assert_eq!(parse_host("a:80"), Some(("a", Some(80))));
        assert_eq!(parse_host("a"), Some(("a", None)));
        assert_eq!(
            parse_host("127.0.0.1:65535"),
            Some(("127.0.0.1", Some(65535)))
        );
        assert_eq!(
            parse_host("box.tailnet:7777"),
            Some(("box.tailnet", Some(7777)))
        );
        assert_eq!(
            g.check(Kind::Read, &read("[0:0::1]:7")).unwrap_err().status,
            421
        );
    }

    #[test]
    fn origin_must_be_this_origin_for_streams_and_writes() {
        let g = guard(None);
        let mut s = read("127.0.0.1:8080");
        s.origin = Some("http://127.0.0.1:8080");
        assert_eq!(g.check(Kind::Stream, &s), Ok(()));
        for bad in [
            "http://127.0.0.1:3000",
            "http://evil.example",
            "null",
            "file://",
        ] {
            s.origin = Some(bad);
            assert_eq!(g.check(Kind::Stream, &s).unwrap_err().status, 403, "{bad}");
            // Plain reads are not cross-origin readable anyway (no CORS headers).
            assert_eq!(g.check(Kind::Read, &s), Ok(()));
        }
        s.origin = None;
        s.sec_fetch_site = Some("cross-site");
        assert_eq!(g.check(Kind::Stream, &s).unwrap_err().status, 403);
        s.sec_fetch_site = Some("same-origin");
        assert_eq!(g.check(Kind::Stream, &s), Ok(()));
    }

    #[test]
    fn writes_need_json_and_the_custom_header() {
        let g = guard(None);
        let mut s = read("localhost:1");
        s.origin = Some("http://localhost:1");
        s.content_type = Some("application/x-www-form-urlencoded");
        s.custom = Some("1");
        assert_eq!(g.check(Kind::Mutate, &s).unwrap_err().status, 415);
        s.content_type = Some("text/plain");
        assert_eq!(g.check(Kind::Mutate, &s).unwrap_err().status, 415);
        s.content_type = Some("application/json; charset=utf-8");
        assert_eq!(g.check(Kind::Mutate, &s), Ok(()));
        s.custom = None;
        assert_eq!(g.check(Kind::Mutate, &s).unwrap_err().status, 403);
    }

    #[test]
    fn a_token_is_required_when_set() {
        let g = guard(Some("s3cret"));
        let mut s = read("localhost:1");
        assert_eq!(g.check(Kind::Read, &s).unwrap_err().status, 401);
        s.authorization = Some("Bearer s3cret");
        assert_eq!(g.check(Kind::Read, &s), Ok(()));
        s.authorization = Some("Bearer s3cre");
        assert_eq!(g.check(Kind::Read, &s).unwrap_err().reason, "wrong token");
        s.authorization = None;
        s.cookie = Some("a=b; spice_token=s3cret");
        assert_eq!(g.check(Kind::Read, &s), Ok(()));
        s.cookie = Some("spice_token=nope");
        assert_eq!(g.check(Kind::Read, &s).unwrap_err().status, 401);
        // Login checks the token itself.
        assert_eq!(g.check(Kind::Login, &read("localhost")), Ok(()));
    }

    #[test]
    fn constant_time_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
