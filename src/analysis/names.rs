//! Names as people read them and as they match across sources: PCI bus ids
//! (NVML and CUDA spell them differently) and kernel names (demangled and
//! shortened). Decoding records is src/load's ([`crate::load::records`]).

/// Normalises PCI bus ids ("00000000:19:00.0" vs "0000:19:00.0").
pub fn bus_key(id: &str) -> String {
    let lower = id.to_ascii_lowercase();
    match lower.split_once(':') {
        Some((domain, rest)) => {
            format!("{:x}:{rest}", u64::from_str_radix(domain, 16).unwrap_or(0))
        }
        None => lower,
    }
}

/// Shortens a (possibly mangled) kernel name for display.
pub fn kernel_display(name: &str) -> String {
    let demangled = cpp_demangle::Symbol::new(name)
        .ok()
        .and_then(|s| {
            s.demangle(
                &cpp_demangle::DemangleOptions::default()
                    .no_params()
                    .no_return_type(),
            )
            .ok()
        })
        .unwrap_or_else(|| name.to_string());
    if demangled.chars().count() > 100 {
        let cut: String = demangled.chars().take(97).collect();
        format!("{cut}...")
    } else {
        demangled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_match_across_nvml_and_cuda_spellings() {
        assert_eq!(bus_key("00000000:19:00.0"), bus_key("0000:19:00.0"));
        assert_ne!(bus_key("00000000:1A:00.0"), bus_key("0000:19:00.0"));
    }

    #[test]
    fn kernel_names_are_demangled_and_shortened() {
        assert_eq!(kernel_display("_Z3fooi"), "foo");
        assert_eq!(kernel_display("rowwise_mix"), "rowwise_mix");
        assert!(kernel_display(&"x".repeat(500)).ends_with("..."));
    }
}
