//! Declaring the A/B matrix: `--variant`, `--variant-env`, a TOML file, and
//! presets that know real frameworks' prewarm switches.

use super::catalog::{self, CATALOG};
use crate::run_folder::meta::VariantSpec;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// A problem in how variants were declared; the message names the flag or file.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum VariantError {
    #[error("--variant '{0}': a variant name may use letters, digits, '-', '_' and '.' only")]
    BadName(String),
    #[error("--variant '{spec}': cannot split its arguments ({why})")]
    BadArgs { spec: String, why: String },
    #[error("--variant-env '{0}': expected NAME:KEY=VALUE")]
    BadEnv(String),
    #[error("--variant-env '{0}': no --variant named '{1}' was declared")]
    UnknownVariant(String, String),
    #[error("variant '{0}' is declared twice")]
    Duplicate(String),
    #[error(
        "--preset '{0}': unknown preset (known: nemo-automodel, nemo-automodel:KEY[,KEY...], env:NAME[,NAME...])"
    )]
    UnknownPreset(String),
    #[error("--preset '{preset}': '{key}' is not a NeMo AutoModel prewarm key (known: {known})")]
    UnknownNemoKey {
        preset: String,
        key: String,
        known: String,
    },
    #[error("{file}: {why}")]
    File { file: String, why: String },
    #[error("--baseline '{0}': no variant has that name")]
    UnknownBaseline(String),
    #[error("--variant '{spec}': the prescription {file} cannot be used: {why}")]
    Prescription {
        spec: String,
        file: String,
        why: String,
    },
}

/// The environment that makes the shim inject the prescription `file` (an
/// absolute path, so a command that changes directory still finds it).
pub fn prescription_env(spec: &str, file: &str) -> Result<Vec<(String, String)>, VariantError> {
    let bad = |why: String| VariantError::Prescription {
        spec: spec.to_string(),
        file: file.to_string(),
        why,
    };
    let path = std::fs::canonicalize(file).map_err(|e| bad(e.to_string()))?;
    if !path.is_file() {
        return Err(bad("not a file".into()));
    }
    Ok(vec![(
        "PREWARM_DOCTOR_PRESCRIPTION".to_string(),
        path.display().to_string(),
    )])
}

fn check_name(name: &str) -> Result<(), VariantError> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        || name.starts_with('.')
    {
        return Err(VariantError::BadName(name.to_string()));
    }
    Ok(())
}

/// Parses `NAME` or `NAME:EXTRA ARGS` (the args are split like a shell would).
pub fn parse_variant(spec: &str) -> Result<VariantSpec, VariantError> {
    let (name, args) = match spec.split_once(':') {
        Some((n, a)) => (n, a),
        None => (spec, ""),
    };
    check_name(name)?;
    if let Some(file) = args.strip_prefix('@') {
        return Ok(VariantSpec {
            name: name.to_string(),
            args: vec![],
            env: prescription_env(spec, file)?,
            prewarms: vec!["prescribed".to_string()],
        });
    }
    let args = shlex::split(args).ok_or_else(|| VariantError::BadArgs {
        spec: spec.to_string(),
        why: "unbalanced quotes".into(),
    })?;
    Ok(VariantSpec {
        name: name.to_string(),
        args,
        env: vec![],
        prewarms: vec![],
    })
}

/// Applies `NAME:KEY=VALUE` to the declared variants.
pub fn apply_env(variants: &mut [VariantSpec], spec: &str) -> Result<(), VariantError> {
    let (name, kv) = spec
        .split_once(':')
        .ok_or_else(|| VariantError::BadEnv(spec.to_string()))?;
    let (k, v) = kv
        .split_once('=')
        .ok_or_else(|| VariantError::BadEnv(spec.to_string()))?;
    if k.is_empty() {
        return Err(VariantError::BadEnv(spec.to_string()));
    }
    let variant = variants
        .iter_mut()
        .find(|x| x.name == name)
        .ok_or_else(|| VariantError::UnknownVariant(spec.to_string(), name.to_string()))?;
    variant.env.push((k.to_string(), v.to_string()));
    Ok(())
}

/// The keys of NeMo AutoModel's `prewarm:` section as its prewarm module
/// documents them (`PrewarmConfig`: docs/variants.md): what `--preset
/// nemo-automodel` expands to. The recipe rejects keys it does not know, so
/// keys only some revisions have (`mamba_ssd_autotune`, `dry_run`) are asked
/// for by name: `--preset nemo-automodel:KEY,...`.
pub const NEMO_SECTION: [&str; 3] = ["cublas_backward", "fla_gdn_autotune", "comm_groups"];

/// The NeMo AutoModel keys a `nemo-automodel[:KEY,...]` preset names.
fn nemo_keys(name: &str) -> Result<Option<Vec<&str>>, VariantError> {
    if name == "nemo-automodel" {
        return Ok(Some(NEMO_SECTION.to_vec()));
    }
    let Some(list) = name.strip_prefix("nemo-automodel:") else {
        return Ok(None);
    };
    let nemo = |n: &str| {
        catalog::find(n).is_some_and(|p| p.framework == catalog::Framework::NemoAutoModel)
    };
    let keys: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if keys.is_empty() {
        return Err(VariantError::UnknownPreset(name.to_string()));
    }
    if let Some(bad) = keys.iter().find(|k| !nemo(k)) {
        let known: Vec<&str> = CATALOG
            .iter()
            .filter(|p| p.framework == catalog::Framework::NemoAutoModel)
            .map(|p| p.name)
            .collect();
        return Err(VariantError::UnknownNemoKey {
            preset: name.to_string(),
            key: bad.to_string(),
            known: known.join(", "),
        });
    }
    Ok(Some(keys))
}

/// Expands a preset into variants: a baseline, one per prewarm, and "all".
pub fn preset(name: &str) -> Result<Vec<VariantSpec>, VariantError> {
    let mut out = vec![VariantSpec {
        name: "baseline".into(),
        args: vec![],
        env: vec![],
        prewarms: vec![],
    }];
    if let Some(names) = nemo_keys(name)? {
        let mut all_args = Vec::new();
        for &n in &names {
            let flag = catalog::find(n)
                .and_then(|p| p.flag)
                .expect("catalog has NeMo flags");
            let args = vec![flag.to_string(), "true".to_string()];
            all_args.extend(args.clone());
            out.push(VariantSpec {
                name: n.to_string(),
                args,
                env: vec![],
                prewarms: vec![n.to_string()],
            });
        }
        if names.len() > 1 {
            out.push(VariantSpec {
                name: "all".into(),
                args: all_args,
                env: vec![],
                prewarms: names.iter().map(|s| s.to_string()).collect(),
            });
        }
        return Ok(out);
    }
    if let Some(list) = name.strip_prefix("env:") {
        let names: Vec<&str> = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if names.is_empty() {
            return Err(VariantError::UnknownPreset(name.to_string()));
        }
        let mut all_env = Vec::new();
        for n in &names {
            check_name(n)?;
            let var = catalog::find(n)
                .and_then(|p| p.env)
                .map(str::to_string)
                .unwrap_or_else(|| {
                    format!(
                        "PREWARM_{}",
                        n.to_ascii_uppercase().replace(['-', '.'], "_")
                    )
                });
            let env = vec![(var, "1".to_string())];
            all_env.extend(env.clone());
            out.push(VariantSpec {
                name: n.to_string(),
                args: vec![],
                env,
                prewarms: vec![n.to_string()],
            });
        }
        if names.len() > 1 {
            out.push(VariantSpec {
                name: "all".into(),
                args: vec![],
                env: all_env,
                prewarms: names.iter().map(|s| s.to_string()).collect(),
            });
        }
        return Ok(out);
    }
    Err(VariantError::UnknownPreset(name.to_string()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileVariant {
    name: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    prewarms: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VariantFile {
    #[serde(default)]
    baseline: Option<String>,
    #[serde(default)]
    variant: Vec<FileVariant>,
}

/// Reads a TOML matrix file (docs/variants.md); returns variants and the baseline name.
pub fn from_file(path: &Path) -> Result<(Vec<VariantSpec>, Option<String>), VariantError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| VariantError::File {
        file: file.clone(),
        why: e.to_string(),
    })?;
    from_toml(&text, &file)
}

/// Parses the text of a TOML matrix file; `file` names it in errors. Separate
/// from [`from_file`] so the parser can be fuzzed without touching the disk.
pub fn from_toml(
    text: &str,
    file: &str,
) -> Result<(Vec<VariantSpec>, Option<String>), VariantError> {
    let file = file.to_string();
    let parsed: VariantFile = toml::from_str(text).map_err(|e| VariantError::File {
        file: file.clone(),
        why: e.to_string(),
    })?;
    if parsed.variant.is_empty() {
        return Err(VariantError::File {
            file,
            why: "no [[variant]] tables".into(),
        });
    }
    let mut out = Vec::new();
    for v in parsed.variant {
        check_name(&v.name).map_err(|e| VariantError::File {
            file: file.clone(),
            why: e.to_string(),
        })?;
        out.push(VariantSpec {
            name: v.name,
            args: v.args,
            env: v.env.into_iter().collect(),
            prewarms: v.prewarms,
        });
    }
    Ok((out, parsed.baseline))
}

/// Final checks and inference: unique names, prewarms filled in from flags,
/// env and catalog names; returns the baseline name.
pub fn finish(
    variants: &mut [VariantSpec],
    baseline: Option<&str>,
) -> Result<String, VariantError> {
    let mut seen = std::collections::BTreeSet::new();
    for v in variants.iter_mut() {
        if !seen.insert(v.name.clone()) {
            return Err(VariantError::Duplicate(v.name.clone()));
        }
        if v.prewarms.is_empty() {
            v.prewarms = catalog::infer(&v.args, &v.env);
            if v.prewarms.is_empty()
                && CATALOG.iter().any(|p| p.name == v.name)
                && !(v.args.is_empty() && v.env.is_empty())
            {
                v.prewarms.push(v.name.clone());
            }
        }
    }
    let base = match baseline {
        Some(b) => {
            if !variants.iter().any(|v| v.name == b) {
                return Err(VariantError::UnknownBaseline(b.to_string()));
            }
            b.to_string()
        }
        None => variants
            .iter()
            .find(|v| v.prewarms.is_empty() && v.args.is_empty() && v.env.is_empty())
            .or(variants.first())
            .map(|v| v.name.clone())
            .unwrap_or_default(),
    };
    Ok(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_specs() {
        let v = parse_variant("cublas:--prewarm.cublas_backward true --x 'a b'").unwrap();
        assert_eq!(v.name, "cublas");
        assert_eq!(
            v.args,
            vec!["--prewarm.cublas_backward", "true", "--x", "a b"]
        );
        assert_eq!(
            parse_variant("baseline").unwrap().args,
            Vec::<String>::new()
        );
        assert_eq!(
            parse_variant("bad name").unwrap_err(),
            VariantError::BadName("bad name".into())
        );
        assert!(matches!(
            parse_variant("x:'open").unwrap_err(),
            VariantError::BadArgs { .. }
        ));
    }

    #[test]
    fn env_applies_to_named_variants() {
        let mut vs = vec![parse_variant("a").unwrap()];
        apply_env(&mut vs, "a:K=V=W").unwrap();
        assert_eq!(vs[0].env, vec![("K".to_string(), "V=W".to_string())]);
        assert!(matches!(
            apply_env(&mut vs, "b:K=V"),
            Err(VariantError::UnknownVariant(..))
        ));
        assert!(matches!(
            apply_env(&mut vs, "a:novalue"),
            Err(VariantError::BadEnv(..))
        ));
    }

    #[test]
    fn presets_expand() {
        let nemo = preset("nemo-automodel").unwrap();
        let names: Vec<_> = nemo.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "baseline",
                "cublas_backward",
                "fla_gdn_autotune",
                "comm_groups",
                "all"
            ]
        );
        assert_eq!(nemo[3].args, vec!["--prewarm.comm_groups", "true"]);
        assert_eq!(nemo[4].prewarms.len(), 3);
        assert_eq!(
            nemo[4].args,
            [
                "--prewarm.cublas_backward",
                "true",
                "--prewarm.fla_gdn_autotune",
                "true",
                "--prewarm.comm_groups",
                "true"
            ]
        );
        // Keys only some revisions accept are asked for by name.
        let picked = preset("nemo-automodel:mamba_ssd_autotune, dry_run").unwrap();
        assert_eq!(picked[1].args, ["--prewarm.mamba_ssd_autotune", "true"]);
        assert_eq!(picked[2].prewarms, ["dry_run"]);
        assert_eq!(picked[3].name, "all");
        let err = preset("nemo-automodel:cublas_backward,nccl_comm").unwrap_err();
        assert!(
            err.to_string()
                .contains("'nccl_comm' is not a NeMo AutoModel prewarm key")
                && err.to_string().contains("mamba_ssd_autotune"),
            "{err}"
        );
        assert!(preset("nemo-automodel:").is_err());
        let env = preset("env:cublas,nccl_comm").unwrap();
        assert_eq!(
            env[1].env,
            vec![("PREWARM_CUBLAS".to_string(), "1".to_string())]
        );
        assert_eq!(env[3].name, "all");
        assert!(preset("bogus").is_err());
    }

    #[test]
    fn finish_infers_and_picks_baseline() {
        let mut vs = vec![
            parse_variant("base").unwrap(),
            parse_variant("c:--prewarm.cublas_backward true").unwrap(),
        ];
        let b = finish(&mut vs, None).unwrap();
        assert_eq!(b, "base");
        assert_eq!(vs[1].prewarms, vec!["cublas_backward"]);
        let mut dup = vec![parse_variant("a").unwrap(), parse_variant("a").unwrap()];
        assert_eq!(
            finish(&mut dup, None).unwrap_err(),
            VariantError::Duplicate("a".into())
        );
        assert!(finish(&mut vs, Some("zzz")).is_err());
    }

    #[test]
    fn toml_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.toml");
        std::fs::write(&p, "baseline = \"b\"\n[[variant]]\nname = \"b\"\n[[variant]]\nname = \"c\"\nargs = [\"--prewarm-cublas\"]\nenv = { X = \"1\" }\n").unwrap();
        let (vs, base) = from_file(&p).unwrap();
        assert_eq!(base.as_deref(), Some("b"));
        assert_eq!(vs[1].env, vec![("X".to_string(), "1".to_string())]);
        std::fs::write(&p, "[[variant]]\nnam = \"b\"\n").unwrap();
        let err = from_file(&p).unwrap_err().to_string();
        assert!(err.contains("m.toml"), "{err}");
    }
}

#[cfg(test)]
mod prescription_tests {
    use super::*;

    #[test]
    fn at_file_declares_a_prescribed_variant_with_the_absolute_path() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.py");
        std::fs::write(&file, "").unwrap();
        let v = parse_variant(&format!("rx:@{}", file.display())).unwrap();
        assert_eq!(v.name, "rx");
        assert!(v.args.is_empty());
        assert_eq!(v.prewarms, ["prescribed"]);
        let canonical = std::fs::canonicalize(&file).unwrap();
        assert_eq!(
            v.env,
            [(
                "PREWARM_DOCTOR_PRESCRIPTION".to_string(),
                canonical.display().to_string()
            )]
        );
        let missing = parse_variant("rx:@/no/such/file.py").unwrap_err();
        assert!(
            missing
                .to_string()
                .contains("--variant 'rx:@/no/such/file.py'")
        );
        assert!(crate::prewarm::catalog::find("prescribed").is_some());
    }
}
