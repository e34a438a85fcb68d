//! Units shared by every layer that shows a figure: the byte formatter sits
//! here, below both analysis and report, so that neither imports the other
//! for it (the analysis emits data; the report words it).

/// Human-readable byte counts (binary units).
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Signed byte counts.
pub fn signed_bytes(b: i64) -> String {
    if b < 0 {
        format!("-{}", bytes(b.unsigned_abs()))
    } else {
        bytes(b as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_use_binary_units_with_one_decimal() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1024), "1.0 KiB");
        assert_eq!(bytes(388 << 20), "388.0 MiB");
        assert_eq!(bytes(3 << 40), "3.0 TiB");
        assert_eq!(signed_bytes(-(70 << 20)), "-70.0 MiB");
        assert_eq!(signed_bytes(5), "5 B");
    }
}
