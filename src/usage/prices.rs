//! The operator's price table (`--prices FILE`, else `<state>/prices.toml`): money
//! only from figures the operator wrote down, nothing fetched.
//!
//! ```toml
//! currency = "USD"                 # a label, optional
//! [model."claude-sonnet-4-5*"]     # a trailing * matches by prefix
//! input = 3.0                      # per million tokens
//! output = 15.0
//! cache_read = 0.30
//! cache_creation = 3.75
//! ```
//!
//! Strict: unknown keys, wrong types and negative or non-finite prices are errors
//! naming `file:line:col`. An exact model name wins over a pattern, a longer pattern
//! over a shorter one.

use crate::config::ConfigError;
use crate::error::{Error, Result};
use crate::store::Tokens;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    currency: Option<String>,
    #[serde(default)]
    model: BTreeMap<Spanned<String>, Spanned<PriceFile>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceFile {
    input: Spanned<f64>,
    output: Spanned<f64>,
    #[serde(default)]
    cache_read: Option<Spanned<f64>>,
    #[serde(default)]
    cache_creation: Option<Spanned<f64>>,
}

/// Per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_creation: f64,
}

impl Price {
    /// What `t` costs at this price.
    pub fn cost(&self, t: &Tokens) -> f64 {
        (t.input as f64 * self.input
            + t.output as f64 * self.output
            + t.cache_read as f64 * self.cache_read
            + t.cache_creation as f64 * self.cache_creation)
            / 1_000_000.0
    }
}

#[derive(Debug, Clone, Default)]
pub struct Prices {
    pub currency: Option<String>,
    exact: BTreeMap<String, Price>,
    /// Prefix patterns, longest first.
    prefixes: Vec<(String, Price)>,
}

impl Prices {
    /// Reads and checks a price table.
    pub fn load(path: &Path) -> Result<Prices> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::input(format!("{}: {e}", path.display())))?;
        Prices::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Prices> {
        let file: File = toml::from_str(text)
            .map_err(|e| Error::input(ConfigError::from_toml(path, text, &e).to_string()))?;
        let mut out = Prices {
            currency: file.currency,
            ..Prices::default()
        };
        for (name, price) in file.model {
            let p = price.get_ref();
            let check = |v: &Spanned<f64>, field: &str| -> Result<f64> {
                let x = *v.get_ref();
                if x.is_finite() && x >= 0.0 {
                    Ok(x)
                } else {
                    Err(Error::input(
                        ConfigError::at(
                            path,
                            text,
                            v.span().start,
                            format!("field '{field}': a price is a number ≥ 0 per million tokens"),
                        )
                        .to_string(),
                    ))
                }
            };
            let opt = |v: &Option<Spanned<f64>>, field: &str| match v {
                Some(v) => check(v, field),
                None => Ok(0.0),
            };
            let price = Price {
                input: check(&p.input, "input")?,
                output: check(&p.output, "output")?,
                cache_read: opt(&p.cache_read, "cache_read")?,
                cache_creation: opt(&p.cache_creation, "cache_creation")?,
            };
            let n = name.get_ref();
            match n.strip_suffix('*') {
                Some(prefix) if !prefix.contains('*') => {
                    out.prefixes.push((prefix.to_string(), price))
                }
                _ if n.contains('*') => {
                    return Err(Error::input(
                        ConfigError::at(
                            path,
                            text,
                            name.span().start,
                            format!("model {n:?}: '*' may only end a name (a prefix)"),
                        )
                        .to_string(),
                    ))
                }
                _ => {
                    out.exact.insert(n.clone(), price);
                }
            }
        }
        out.prefixes.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
        Ok(out)
    }

    /// The price of `model`, if the table has one.
    pub fn of(&self, model: &str) -> Option<&Price> {
        self.exact.get(model).or_else(|| {
            self.prefixes
                .iter()
                .find(|(p, _)| model.starts_with(p.as_str()))
                .map(|(_, price)| price)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Prices> {
        Prices::parse(Path::new("prices.toml"), text)
    }

    #[test]
    fn exact_names_win_over_patterns_and_longer_patterns_over_shorter() {
        let p = parse(
            "currency = \"USD\"\n\
             [model.\"claude-*\"]\ninput = 1.0\noutput = 2.0\n\
             [model.\"claude-opus*\"]\ninput = 10.0\noutput = 20.0\ncache_read = 1.0\n\
             [model.\"claude-opus-4\"]\ninput = 100.0\noutput = 200.0\n",
        )
        .unwrap();
        assert_eq!(p.of("claude-haiku").unwrap().input, 1.0);
        assert_eq!(p.of("claude-opus-4-6").unwrap().input, 10.0);
        assert_eq!(p.of("claude-opus-4").unwrap().input, 100.0);
        assert!(p.of("gpt-5").is_none());
        let t = Tokens {
            input: 1_000_000,
            output: 500_000,
            cache_read: 2_000_000,
            cache_creation: 0,
        };
        assert_eq!(p.of("claude-opus-4-6").unwrap().cost(&t), 10.0 + 10.0 + 2.0);
    }

    #[test]
    fn bad_tables_are_located() {
        let e = parse("[model.x]\ninput = 1.0\noutput = -2.0\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("prices.toml:3:10:"), "{e}");
        let e = parse("[model.x]\ninput = 1.0\noutput = 2.0\ncahce_read = 1.0\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("prices.toml:4:"), "{e}");
        assert!(e.contains("cahce_read"), "{e}");
        let e = parse("[model.x]\ninput = \"cheap\"\noutput = 2.0\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("prices.toml:2:"), "{e}");
        let e = parse("[model.\"a*b\"]\ninput = 1.0\noutput = 2.0\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("may only end"), "{e}");
    }
}
