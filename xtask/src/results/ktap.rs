//! A KTAP parser for KUnit results (`/sys/kernel/debug/kunit/<suite>/results`),
//! strict about what a crash leaves behind: a missing plan, fewer results than
//! planned, a parent without its result line.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
    Skip,
}

/// One result line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Case {
    pub name: String,
    pub status: Status,
    /// Nesting depth (0 = top level).
    pub depth: usize,
}

/// A parsed KTAP document.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ktap {
    /// Leaf test cases.
    pub cases: Vec<Case>,
    /// Tests that had subtests (suites, parameterised tests).
    pub parents: Vec<Case>,
    /// What makes the document untrustworthy (truncation, missing plan).
    pub problems: Vec<String>,
}

impl Ktap {
    pub fn count(&self, status: Status) -> usize {
        self.cases.iter().filter(|c| c.status == status).count()
    }

    /// True when at least one case ran, none failed, and the output is complete.
    pub fn passed(&self) -> bool {
        self.problems.is_empty()
            && !self.cases.is_empty()
            && self.count(Status::Fail) == 0
            && self.parents.iter().all(|p| p.status != Status::Fail)
    }

    /// `8 passed, 0 failed, 0 skipped` plus any problem.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} passed, {} failed, {} skipped",
            self.count(Status::Pass),
            self.count(Status::Fail),
            self.count(Status::Skip)
        );
        for p in &self.problems {
            s.push_str(&format!("; {p}"));
        }
        for c in self.cases.iter().filter(|c| c.status == Status::Fail) {
            s.push_str(&format!("; FAILED: {}", c.name));
        }
        s
    }
}

/// `ok 3 name # SKIP why` → (status, name).
fn result_line(line: &str) -> Option<(Status, String)> {
    let (ok, rest) = if let Some(r) = line.strip_prefix("not ok ") {
        (false, r)
    } else {
        (true, line.strip_prefix("ok ")?)
    };
    let (num, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    num.parse::<usize>().ok()?;
    let (name, directive) = match rest.split_once(" # ") {
        Some((n, d)) => (n, d),
        None => (rest.strip_prefix("- ").unwrap_or(rest), ""),
    };
    let name = name.strip_prefix("- ").unwrap_or(name).trim().to_string();
    let status = if !ok {
        Status::Fail
    } else if directive
        .trim_start()
        .to_ascii_uppercase()
        .starts_with("SKIP")
    {
        Status::Skip
    } else {
        Status::Pass
    };
    Some((status, name))
}

pub fn parse(text: &str) -> Ktap {
    let mut out = Ktap::default();
    // (planned, seen) per depth.
    let mut plans: Vec<Option<(usize, usize)>> = Vec::new();
    let mut saw_header = false;
    let slot = |plans: &mut Vec<Option<(usize, usize)>>, d: usize| {
        if plans.len() <= d {
            plans.resize(d + 1, None);
        }
    };
    for raw in text.lines() {
        let trimmed = raw.trim_start_matches(' ');
        let depth = (raw.len() - trimmed.len()) / 4;
        let line = trimmed.trim_end();
        if line.starts_with("KTAP version") || line.starts_with("TAP version") {
            saw_header = true;
            slot(&mut plans, depth);
            plans[depth] = None;
        } else if let Some(n) = line
            .strip_prefix("1..")
            .and_then(|n| n.trim().parse::<usize>().ok())
        {
            slot(&mut plans, depth);
            plans[depth] = Some((n, 0));
        } else if let Some((status, name)) = result_line(line) {
            slot(&mut plans, depth + 1);
            if let Some((_, seen)) = plans[depth].as_mut() {
                *seen += 1;
            }
            let case = Case {
                name: name.clone(),
                status,
                depth,
            };
            match plans[depth + 1].take() {
                Some((planned, seen)) => {
                    if seen < planned {
                        out.problems.push(format!(
                            "`{name}` planned {planned} subtests but reported {seen} (crashed or truncated)"
                        ));
                    }
                    plans.truncate(depth + 1);
                    out.parents.push(case);
                }
                None => out.cases.push(case),
            }
        }
    }
    if !saw_header {
        out.problems.push("no KTAP header".to_string());
    }
    if plans.iter().all(Option::is_none) && out.cases.is_empty() {
        out.problems.push("no test plan and no results".to_string());
    }
    for (depth, plan) in plans.iter().enumerate() {
        if let Some((planned, seen)) = plan {
            if seen < planned {
                out.problems.push(format!(
                    "planned {planned} results at depth {depth} but found {seen}: output truncated (crash mid-test?)"
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(
            crate::util::project_root()
                .join("xtask/fixtures/ktap")
                .join(name),
        )
        .unwrap()
    }

    #[test]
    fn a_passing_suite() {
        let k = parse(&fixture("pass.ktap"));
        assert!(k.passed(), "{k:?}");
        assert_eq!(k.count(Status::Pass), 4);
        assert_eq!(k.count(Status::Skip), 1);
        assert_eq!(k.parents.len(), 1);
        assert_eq!(k.parents[0].name, "wbstall");
        assert_eq!(k.summary(), "4 passed, 0 failed, 1 skipped");
    }

    #[test]
    fn a_failing_case_fails_the_suite() {
        let k = parse(&fixture("fail.ktap"));
        assert!(!k.passed());
        assert_eq!(k.count(Status::Fail), 1);
        assert!(
            k.summary().contains("FAILED: stall_classification"),
            "{}",
            k.summary()
        );
    }

    #[test]
    fn a_crash_mid_suite_is_a_problem_not_a_pass() {
        // The kernel died during the third case: two results of five, no suite line.
        let k = parse(&fixture("truncated.ktap"));
        assert!(!k.passed());
        assert!(
            k.problems.iter().any(|p| p.contains("planned 5 results")),
            "{:?}",
            k.problems
        );
    }

    #[test]
    fn missing_plan_and_empty_input_are_problems() {
        assert!(!parse("").passed());
        assert!(parse("")
            .problems
            .iter()
            .any(|p| p.contains("no KTAP header")));
        let k = parse("KTAP version 1\n# nothing ran\n");
        assert!(
            k.problems.iter().any(|p| p.contains("no test plan")),
            "{:?}",
            k.problems
        );
    }
}
