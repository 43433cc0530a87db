//! Repository rules kept honest by tests: the size of files and functions.
//! Generated or data files are not Rust and are not counted; test modules are
//! left out of both limits.

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// Lines of non-test code one file may hold.
    const MAX_FILE_LINES: usize = 600;
    /// Lines one function may span, signature to closing brace.
    const MAX_FN_LINES: usize = 80;

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                rust_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    /// The directories whose Rust files the size limits hold: the xtask and
    /// the guest's programs.
    const SIZED_DIRS: &[&str] = &[
        "xtask/src",
        "qemu/wbstall-fuse/src",
        "qemu/wbstall-sample/src",
    ];

    /// The lines of a file without its `#[cfg(test)] mod tests { ... }` block:
    /// the attribute, any attributes after it, and the module to its closing
    /// brace. Everything else is code, other `#[cfg(test)]` items included
    /// (a test-only helper or `mod fuzz` is still read and kept up to date).
    fn code(text: &str) -> Vec<&str> {
        let lines: Vec<&str> = text.lines().collect();
        let mut out = Vec::new();
        let mut i = 0;
        while i < lines.len() {
            match test_module_len(&lines[i..]) {
                Some(len) => i += len,
                None => {
                    out.push(lines[i]);
                    i += 1;
                }
            }
        }
        out
    }

    /// When `lines` opens with `#[cfg(test)]`, perhaps more attributes, then
    /// `mod tests {` (maybe `pub`): the number of lines through the module's closing brace.
    fn test_module_len(lines: &[&str]) -> Option<usize> {
        if lines.first()?.trim() != "#[cfg(test)]" {
            return None;
        }
        let m = 1 + lines[1..]
            .iter()
            .position(|l| !l.trim_start().starts_with("#["))?;
        let t = lines[m].trim_start();
        let vis = t.strip_suffix("mod tests {")?;
        if !["", "pub ", "pub(crate) ", "pub(super) "].contains(&vis) {
            return None;
        }
        let close = format!("{}}}", &lines[m][..lines[m].len() - t.len()]);
        let end = lines[m..].iter().position(|l| l.trim_end() == close)?;
        Some(m + end + 1)
    }

    /// (name, first line, length) of each `fn` whose body is a `{ ... }` block.
    fn functions(lines: &[&str]) -> Vec<(String, usize, usize)> {
        let mut out = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            let t = l.trim_start();
            let Some(rest) = [
                "fn ",
                "pub fn ",
                "pub(crate) fn ",
                "pub(super) fn ",
                "const fn ",
                "pub const fn ",
            ]
            .iter()
            .find_map(|p| t.strip_prefix(p)) else {
                continue;
            };
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let indent = l.len() - t.len();
            let close = format!("{}}}", " ".repeat(indent));
            if let Some(end) = lines[i..]
                .iter()
                .position(|x| *x == close || x.starts_with(&format!("{close} ")))
            {
                out.push((name, i + 1, end + 1));
            }
        }
        out
    }

    #[test]
    fn files_and_functions_stay_small() {
        let mut files = Vec::new();
        for dir in SIZED_DIRS {
            rust_files(&crate::util::project_root().join(dir), &mut files);
        }
        files.sort();
        let mut over = Vec::new();
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap();
            let lines = code(&text);
            let rel = f
                .strip_prefix(crate::util::project_root())
                .unwrap()
                .display()
                .to_string();
            if lines.len() > MAX_FILE_LINES {
                over.push(format!(
                    "{rel}: {} lines of code (max {MAX_FILE_LINES})",
                    lines.len()
                ));
            }
            for (name, at, len) in functions(&lines) {
                if len > MAX_FN_LINES {
                    over.push(format!(
                        "{rel}:{at}: fn {name} is {len} lines (max {MAX_FN_LINES})"
                    ));
                }
            }
        }
        assert!(over.is_empty(), "split these:\n{}", over.join("\n"));
    }

    /// The user hears from one place: events go through `progress` (stderr),
    /// results are printed by the tasks (stdout). `reaper` prints from its
    /// signal thread, where nothing else runs any more.
    /// Every xtask source file: (path relative to the repository, its code
    /// without the tests).
    fn sources() -> Vec<(String, String)> {
        let mut files = Vec::new();
        let root = crate::util::project_root();
        rust_files(&root.join("xtask/src"), &mut files);
        files
            .iter()
            .map(|f| {
                let rel = f.strip_prefix(&root).unwrap().display().to_string();
                (rel, code(&std::fs::read_to_string(f).unwrap()).join("\n"))
            })
            .collect()
    }

    #[test]
    fn only_the_ui_and_the_tasks_print() {
        let mut bad = Vec::new();
        for (rel, code) in sources() {
            let ui = rel == "xtask/src/progress.rs" || rel == "xtask/src/reaper.rs";
            if !ui && code.contains("eprintln!") {
                bad.push(format!("{rel}: eprintln! (emit a progress::Event)"));
            }
            if !rel.starts_with("xtask/src/tasks/") && code.contains("println!(") && !ui {
                bad.push(format!("{rel}: println! outside a task"));
            }
        }
        assert!(bad.is_empty(), "{}", bad.join("\n"));
    }

    /// The pipeline's stages, lowest first; a stage may use only the ones
    /// before it (and itself).
    const STAGES: &[&str] = &[
        "reaper", "util", "progress", "deps", "kernel", "guest", "results", "analysis", "report",
        "tasks",
    ];

    fn stage_of(rel: &str) -> Option<usize> {
        let first = rel.strip_prefix("xtask/src/")?.split(['/', '.']).next()?;
        STAGES.iter().position(|s| *s == first)
    }

    #[test]
    fn lower_stages_never_use_higher_ones() {
        let mut bad = Vec::new();
        for (rel, code) in sources() {
            let Some(own) = stage_of(&rel) else { continue };
            // Every `crate::x` path, and the first segment of each item of a
            // `use crate::{...}` list.
            let mut used: Vec<String> = code
                .split("crate::")
                .skip(1)
                .map(|r| {
                    r.chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect()
                })
                .collect();
            for block in code.split("use crate::{").skip(1) {
                let mut depth = 0;
                let mut item = String::new();
                for ch in block.chars() {
                    match ch {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            used.push(item.trim().split("::").next().unwrap_or("").to_string());
                            item.clear();
                            continue;
                        }
                        _ => {}
                    }
                    if depth == 0 {
                        item.push(ch);
                    }
                }
                used.push(item.trim().split("::").next().unwrap_or("").to_string());
            }
            for u in used {
                if let Some(rank) = STAGES.iter().position(|s| *s == u) {
                    if rank > own {
                        bad.push(format!("{rel} uses crate::{u}"));
                    }
                }
            }
        }
        bad.sort();
        bad.dedup();
        assert!(
            bad.is_empty(),
            "a lower stage uses a higher one:\n{}",
            bad.join("\n")
        );
    }

    #[test]
    fn the_function_scanner_measures_what_it_should() {
        let src =
            "fn a() {\n    x();\n}\n\nimpl S {\n    pub fn b(&self) -> u8 {\n        1\n    }\n}\n";
        let f = functions(&src.lines().collect::<Vec<_>>());
        assert_eq!(f, [("a".to_string(), 1, 3), ("b".to_string(), 6, 3)]);
    }

    /// A `#[cfg(test)]` on one item no longer hides the rest of the file: the
    /// long function after it is measured (the old scanner stopped reading at
    /// the attribute and passed the file); only `mod tests` is left out.
    #[test]
    fn a_stray_cfg_test_hides_nothing_after_it() {
        let body = "    x();\n".repeat(MAX_FN_LINES);
        let src = format!(
            "#[cfg(test)]\nfn helper() {{\n    y();\n}}\n\nfn long() {{\n{body}}}\n\n\
             #[cfg(test)]\nmod tests {{\n    fn t() {{\n    }}\n}}\n"
        );
        let old: Vec<&str> = src
            .lines()
            .take_while(|l| l.trim() != "#[cfg(test)]")
            .collect();
        assert!(functions(&old).is_empty());
        let lines = code(&src);
        // helper and a blank line, long and a blank line; no `mod tests`.
        assert_eq!(lines.len(), 4 + 1 + MAX_FN_LINES + 2 + 1);
        let f = functions(&lines);
        assert_eq!(
            f,
            [
                ("helper".to_string(), 2, 3),
                ("long".to_string(), 6, MAX_FN_LINES + 2)
            ]
        );
        assert!(f[1].2 > MAX_FN_LINES);
    }
}
