//! The KCIDB issues of a session: what went wrong, as a database keeps it
//! across sessions. Each issue's id names what it is, never the session
//! (its scenario, the culprit, the kernel's source, a crash's signature), so
//! that the same stall seen again is the same issue with one more incident;
//! its text is made of the same names, so that it changes only when they do
//! or when wbstall words it anew ([`ISSUE_VERSION`], which a test ties to
//! the text). Each run that shows an issue is an incident on its test:
//!
//! - the known stall of a scenario, where cells are expected to stall (the
//!   culprit named when the session has one): an incident per stalling run;
//! - a kernel that does not meet its expectation in a scenario: an incident
//!   per run that fails it, saying why;
//! - a kernel crash (an oops, a panic, a hang), by its signature (the
//!   console's line without addresses): an incident on each crashed boot.

use std::collections::BTreeMap;

use anyhow::Result;
use serde_json::{json, Value};

use super::{
    kcidb_ids::{Objects, ORIGIN},
    kcidb_runs::{self, KcidbStatus, RunStatus},
};
use crate::analysis::{expected::Class, judge::Judgement, judgement::CellVerdict};

/// The version of every issue's wording: bump it when the text of an issue
/// changes (the test `the_issues_wording_is_pinned_to_its_version` says when).
pub const ISSUE_VERSION: u32 = 1;

/// The issues seen so far, by id: each one's body and its incidents (the
/// test, what the run showed).
pub struct Issues<'a> {
    j: &'a Judgement<'a>,
    found: BTreeMap<String, (Value, Vec<(String, String)>)>,
}

impl<'a> Issues<'a> {
    pub fn new(j: &'a Judgement<'a>) -> Issues<'a> {
        Issues {
            j,
            found: BTreeMap::new(),
        }
    }

    fn add(&mut self, id: String, body: impl FnOnce() -> Value, test: &str, comment: String) {
        let entry = self.found.entry(id).or_insert_with(|| (body(), Vec::new()));
        entry.1.push((test.to_string(), comment));
    }

    /// The issues run `r` (its test `test`, of the kernel checked out as
    /// `checkout`) shows.
    pub fn run(&mut self, test: &str, checkout: &str, cell: Option<&CellVerdict>, r: &RunStatus) {
        let (s, v) = (r.run.scenario.as_str(), r.run.variant.as_str());
        let expected = cell.and_then(|c| c.expected);
        if expected.map(|e| e.class) == Some(Class::Stall) && r.status == KcidbStatus::Fail {
            if let Some(rv) = r.verdict {
                let j = self.j;
                let comment = format!(
                    "{v} {}: {:.1}% of writer time {}",
                    r.run.short(),
                    rv.stall_fraction() * 100.0,
                    rv.basis().stall_words()
                );
                self.add(known_id(j, s), || known_stall(j, s), test, comment);
            }
        }
        let judged_failing = cell.is_some_and(|c| c.judged && !c.failures.is_empty());
        if let (Some(e), true) = (expected, judged_failing) {
            if r.held == Some(false) || r.verdict.is_none() {
                let id = format!(
                    "{ORIGIN}:unexpected/{s}/{v}/{}/{}",
                    checkout.rsplit('-').next().unwrap_or(checkout),
                    e.class
                );
                let subject = format!("{v} on {s} does not meet its expectation ({e})");
                let body = move || {
                    json!({
                        "report_subject": subject,
                        "culprit": {"code": true, "tool": false, "harness": false},
                        "comment": format!(
                            "The kernel of {v} ({checkout}) is expected {e} on {s}: each run \
                             that is not (or has no usable record) is an incident, saying why."
                        ),
                        "misc": {"scenario": s, "variant": v, "expected": e},
                    })
                };
                let why = format!("{} {}: {}", v, r.run.short(), r.why.join("; "));
                self.add(id, body, test, why);
            }
        }
        if let Some((kind, excerpt)) = kcidb_runs::crash(r) {
            let signature = signature(&excerpt);
            let id = format!(
                "{ORIGIN}:crash/{}",
                &crate::util::sha256_hex(signature.as_bytes())[..16]
            );
            let body = move || {
                json!({
                    "report_subject": format!("The kernel crashed: {signature}"),
                    "culprit": {"code": true, "tool": false, "harness": false},
                    "categories": [format!("runtime.{}", kind.word())],
                    "comment": "A kernel under test crashed (an oops, a panic or a hang): each \
                                boot it crashed is an incident on its boot test.",
                    "misc": {"signature": signature},
                })
            };
            self.add(id, body, &format!("{test}/boot"), excerpt);
        }
    }

    /// Every issue and its incidents, into `out`.
    pub fn finish(self, out: &mut Objects) -> Result<()> {
        for (id, (mut body, incidents)) in self.found {
            body["id"] = json!(id);
            body["version"] = json!(ISSUE_VERSION);
            body["origin"] = json!(ORIGIN);
            let kind = id.split([':', '/']).nth(1).unwrap_or("issue").to_string();
            for (test, comment) in incidents {
                out.incidents.push(json!({
                    "id": format!("{test}/incident/{kind}"),
                    "origin": ORIGIN,
                    "issue_id": id,
                    "issue_version": ISSUE_VERSION,
                    "test_id": test,
                    "present": true,
                    "comment": comment,
                }));
            }
            out.issues.push(body);
        }
        Ok(())
    }
}

/// A crash's signature: its first line, without the addresses and offsets
/// that differ between builds (`balance_dirty_pages+0x672/0x680`) and what
/// the harness did after (`(QEMU killed 2 s after)`).
pub fn signature(excerpt: &str) -> String {
    let first = excerpt.lines().next().unwrap_or(excerpt);
    let first = first.split(" (QEMU").next().unwrap_or(first);
    let words: Vec<String> = (first.split_whitespace())
        .map(|w| match w.find("+0x") {
            Some(at) => w[..at].to_string(),
            None => w.to_string(),
        })
        .collect();
    words.join(" ")
}

/// The known stall's id: the scenario, and the culprit's commit when the
/// session names one.
fn known_id(j: &Judgement, s: &str) -> String {
    match &j.roles.culprit {
        Some(c) => format!("{ORIGIN}:stall/{s}/{}", c.commit),
        None => format!("{ORIGIN}:stall/{s}"),
    }
}

/// The known stall of scenario `s`: the writers of the cells expected to
/// stall there stall; the culprit named when the session has one.
fn known_stall(j: &Judgement, s: &str) -> Value {
    let (subject, culprit) = match &j.roles.culprit {
        Some(c) => (
            format!("Writers stall in balance_dirty_pages() on {s}: {c}"),
            format!("The culprit: commit {c}. "),
        ),
        None => (
            format!("Writers stall in balance_dirty_pages() on {s}"),
            String::new(),
        ),
    };
    json!({
        "report_subject": subject,
        "culprit": {"code": j.roles.culprit.is_some(), "tool": false, "harness": false},
        "categories": ["runtime.stall"],
        "comment": format!(
            "{culprit}Writers sleep in balance_dirty_pages() while no writeback runs on their \
             wb, until the periodic flusher. Each stalling run is an incident."
        ),
        "misc": {"scenario": s, "culprit": j.roles.culprit},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_signature_drops_what_differs_between_builds() {
        assert_eq!(
            signature(
                "oops: the guest kernel oopsed: kernel BUG at mm/page-writeback.c:1958! in \
                 balance_dirty_pages+0x672/0x680 (QEMU killed 2 s after)\nRIP: ..."
            ),
            "oops: the guest kernel oopsed: kernel BUG at mm/page-writeback.c:1958! in \
             balance_dirty_pages"
        );
    }
}
