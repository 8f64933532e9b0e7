//! Sizes as the configuration writes them (`40GiB`, `500MB`, `1000000`), read once
//! for every section that takes one (`[testbed] disk_budget`, `[archive] max_bytes`).

/// `40GiB`, `500MB`, `1.5 TiB`, `1000000`: bytes (binary and decimal units).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a size (e.g. \"40GiB\")"))?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0f64.powi(4),
        u => {
            return Err(format!(
                "unknown unit {u:?} in {text:?} (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"
            ))
        }
    };
    let bytes = n * mult;
    if !(1.0..=1e18).contains(&bytes) {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(bytes as u64)
}
