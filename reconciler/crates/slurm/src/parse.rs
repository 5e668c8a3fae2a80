//! `sacctmgr -P -n show …` output (one record a line, fields split by `|`)
//! read into [`SlurmState`]. The field lists are the `format=` the
//! [`crate::sacctmgr`] client asks for.

use std::collections::{BTreeMap, BTreeSet};

use crate::state::{Account, Qos, SlurmState};

/// The `format=` of `show assoc`.
pub const ASSOC_FORMAT: &str = "Account,User,ParentName,Fairshare,GrpTRES,QOS,DefaultQOS";
/// The `format=` of `show account`.
pub const ACCOUNT_FORMAT: &str = "Account,Organization";
/// The `format=` of `show qos` (Description last: it may hold `|`).
pub const QOS_FORMAT: &str = "Name,Priority,Preempt,PreemptMode,GraceTime,Description";

/// A line sacctmgr printed that is not what was asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sacctmgr show {what}, line {line}: {message}: {text:?}")]
pub struct ParseError {
    /// `assoc`, `account` or `qos`.
    pub what: &'static str,
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
    /// The line.
    pub text: String,
}

fn records<'a>(
    what: &'static str,
    output: &'a str,
    fields: usize,
) -> impl Iterator<Item = Result<(usize, Vec<&'a str>), ParseError>> + 'a {
    output
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(move |(i, l)| {
            let parts: Vec<&str> = l.splitn(fields, '|').collect();
            if parts.len() == fields {
                Ok((i + 1, parts))
            } else {
                Err(ParseError {
                    what,
                    line: i + 1,
                    message: format!("{} fields, expected {fields}", parts.len()),
                    text: l.to_string(),
                })
            }
        })
}

fn list(text: &str) -> BTreeSet<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// `name=count,…` (a `GrpTRES`), gitfleet's own TRES only.
pub fn parse_tres(text: &str) -> Result<BTreeMap<String, u64>, String> {
    let mut map = BTreeMap::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, count) = item
            .rsplit_once('=')
            .ok_or_else(|| format!("TRES `{item}` has no `=`"))?;
        if !crate::state::owned_tres(name) {
            continue;
        }
        let count = count
            .parse()
            .map_err(|_| format!("TRES `{item}`: count is not a number"))?;
        map.insert(name.to_string(), count);
    }
    Ok(map)
}

/// `[D-]HH:MM:SS`, `MM:SS` or seconds, as sacctmgr prints times.
pub fn parse_time(text: &str) -> Result<u64, String> {
    let bad = || format!("`{text}` is not a time");
    let (days, rest) = match text.split_once('-') {
        Some((d, r)) => (d.parse::<u64>().map_err(|_| bad())?, r),
        None => (0, text),
    };
    let mut secs = 0u64;
    for part in rest.split(':') {
        let n: u64 = part.parse().map_err(|_| bad())?;
        secs = secs.saturating_mul(60).saturating_add(n);
    }
    Ok(days.saturating_mul(86_400).saturating_add(secs))
}

/// The accounts, from `show assoc` and `show account` output. Only account
/// associations (no user) are read; `root` is left out.
pub fn parse_accounts(
    assoc: &str,
    accounts: &str,
    root: &str,
) -> Result<BTreeMap<String, Account>, ParseError> {
    let mut organizations = BTreeMap::new();
    for record in records("account", accounts, 2) {
        let (_, f) = record?;
        organizations.insert(f[0].to_string(), f[1].to_string());
    }
    let mut out = BTreeMap::new();
    for record in records("assoc", assoc, 7) {
        let (line, f) = record?;
        if !f[1].is_empty() || f[0] == root || f[0] == "root" {
            continue;
        }
        let grp_tres = parse_tres(f[4]).map_err(|message| ParseError {
            what: "assoc",
            line,
            message,
            text: f.join("|"),
        })?;
        out.insert(
            f[0].to_string(),
            Account {
                name: f[0].to_string(),
                parent: f[2].to_string(),
                fairshare: f[3].to_string(),
                grp_tres,
                qos: list(f[5]),
                default_qos: f[6].to_string(),
                organization: organizations.get(f[0]).cloned().unwrap_or_default(),
            },
        );
    }
    Ok(out)
}

/// The QOS, from `show qos` output.
pub fn parse_qos(output: &str) -> Result<BTreeMap<String, Qos>, ParseError> {
    let mut out = BTreeMap::new();
    for record in records("qos", output, 6) {
        let (line, f) = record?;
        let err = |message: String| ParseError {
            what: "qos",
            line,
            message,
            text: f.join("|"),
        };
        let priority = f[1]
            .parse()
            .map_err(|_| err(format!("Priority `{}` is not a number", f[1])))?;
        let grace_secs = parse_time(f[4]).map_err(err)?;
        out.insert(
            f[0].to_string(),
            Qos {
                name: f[0].to_string(),
                priority,
                preempt: list(f[2]),
                preempt_mode: f[3].to_ascii_lowercase(),
                grace_secs,
                description: f[5].to_string(),
            },
        );
    }
    Ok(out)
}

/// The whole state from the three outputs.
pub fn parse_state(
    assoc: &str,
    accounts: &str,
    qos: &str,
    root: &str,
) -> Result<SlurmState, ParseError> {
    Ok(SlurmState {
        accounts: parse_accounts(assoc, accounts, root)?,
        qos: parse_qos(qos)?,
        partitions: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Recorded from sacctmgr 22.05.8 (tests/slurm/start-cluster.sh).
    const ASSOC: &str = "root|||1||normal|\nroot|root||1||normal|\nnlp||root|7|gres/gpu:a100-sxm4-80gb=4|high,low|low\nresearch||root|40|cpu=64,gres/gpu:a100-sxm4-80gb=32,gres/gpu:h100-sxm-80gb=560|normal|\nnlp|alice|nlp|parent|||\n";
    const ACCOUNTS: &str = "nlp|gitfleet queue nlp|gitfleet\nresearch|research|gitfleet\nroot|default root account|root\n";
    const QOS: &str = "normal|0||cluster|00:00:00|Normal QOS default\nhigh|500|low,normal|requeue|00:05:00|high\nlow|10||cluster|1-00:00:30|a|b\n";

    #[test]
    fn reads_account_associations_only() {
        let accounts = ACCOUNTS
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split('|').collect();
                format!("{}|{}", f[0], f[2])
            })
            .collect::<Vec<_>>()
            .join("\n");
        let got = parse_accounts(ASSOC, &accounts, "root").unwrap();
        assert_eq!(got.keys().collect::<Vec<_>>(), ["nlp", "research"]);
        let nlp = &got["nlp"];
        assert_eq!(nlp.parent, "root");
        assert_eq!(nlp.fairshare, "7");
        assert_eq!(nlp.grp_tres["gres/gpu:a100-sxm4-80gb"], 4);
        assert_eq!(nlp.qos.iter().collect::<Vec<_>>(), ["high", "low"]);
        assert_eq!(nlp.default_qos, "low");
        assert!(nlp.managed());
        // A CPU limit set by hand is not gitfleet's.
        assert_eq!(
            got["research"].grp_tres.keys().collect::<Vec<_>>(),
            ["gres/gpu:a100-sxm4-80gb", "gres/gpu:h100-sxm-80gb"]
        );
    }

    #[test]
    fn reads_qos_with_times_and_pipes_in_descriptions() {
        let got = parse_qos(QOS).unwrap();
        assert_eq!(got["high"].priority, 500);
        assert_eq!(got["high"].grace_secs, 300);
        assert_eq!(got["high"].preempt.len(), 2);
        assert_eq!(got["low"].grace_secs, 86_430);
        assert_eq!(got["low"].description, "a|b");
        assert_eq!(got["normal"].preempt_mode, "cluster");
    }

    #[test]
    fn short_lines_and_bad_numbers_are_errors_with_line_numbers() {
        let err = parse_qos("normal|0\n").unwrap_err();
        assert_eq!((err.what, err.line), ("qos", 1));
        let err = parse_qos("\nx|many||cluster|00:00:00|d\n").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.to_string().contains("Priority `many`"), "{err}");
        let err = parse_accounts("a||root|1|gres/gpu:x=lots||\n", "", "root").unwrap_err();
        assert!(err.message.contains("not a number"), "{err}");
    }

    #[test]
    fn times() {
        assert_eq!(parse_time("00:00:00"), Ok(0));
        assert_eq!(parse_time("05:00"), Ok(300));
        assert_eq!(parse_time("2-01:00:00"), Ok(2 * 86_400 + 3600));
        assert!(parse_time("soon").is_err());
    }
}
