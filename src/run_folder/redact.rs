//! Secret-looking values kept out of everything a run folder records and a
//! report shows (environment variables, command-line flags).

use std::collections::BTreeMap;

const SECRET_WORDS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "KEY",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "SESSION",
    "PRIVATE",
];

/// True when an environment variable's name suggests its value is a secret.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_WORDS.iter().any(|w| upper.contains(w))
}

/// The environment with secret-looking values replaced, for run metadata.
pub fn redacted(env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    env.iter()
        .map(|(k, v)| {
            (
                k.clone(),
                if looks_secret(k) {
                    "<redacted>".to_string()
                } else {
                    v.clone()
                },
            )
        })
        .collect()
}

/// Removes secret-looking `--flag=value` / `--flag value` arguments' values from a command line.
pub fn redact_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut hide_next = false;
    for a in args {
        if hide_next {
            out.push("<redacted>".to_string());
            hide_next = false;
            continue;
        }
        if let Some((flag, _)) = a.split_once('=') {
            if flag.starts_with('-') && looks_secret(flag) {
                out.push(format!("{flag}=<redacted>"));
                continue;
            }
        } else if a.starts_with('-') && looks_secret(a) {
            hide_next = true;
        }
        out.push(a.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted() {
        let env: BTreeMap<String, String> = [
            ("HF_TOKEN".into(), "abc".into()),
            ("WANDB_API_KEY".into(), "k".into()),
            ("PATH".into(), "/bin".into()),
        ]
        .into();
        let r = redacted(&env);
        assert_eq!(r["HF_TOKEN"], "<redacted>");
        assert_eq!(r["WANDB_API_KEY"], "<redacted>");
        assert_eq!(r["PATH"], "/bin");
        let args: Vec<String> = [
            "train.py",
            "--api-key",
            "s3cr3t",
            "--hf_token=xyz",
            "--lr",
            "1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            redact_args(&args),
            vec![
                "train.py",
                "--api-key",
                "<redacted>",
                "--hf_token=<redacted>",
                "--lr",
                "1"
            ]
        );
    }
}
