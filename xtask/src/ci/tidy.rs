//! Repository rules kept honest by tests: the size of files and functions,
//! who prints, the layering between folders, no circles between the files
//! of one folder, renderers that read the judgement only, times and boot
//! failures typed until printed, and what lies at the repository's root.
//! Generated or data files are not Rust and are not counted; test modules
//! are left out, inline or in files of their own (`foo_tests.rs`,
//! `x/tests.rs`), which only the tests compile.

#[cfg(test)]
mod tests {
    use std::{
        collections::{BTreeMap, BTreeSet},
        path::{Path, PathBuf},
    };

    /// Lines of non-test code one file may hold.
    const MAX_FILE_LINES: usize = 600;
    /// Lines one function may span, signature to closing brace.
    const MAX_FN_LINES: usize = 80;

    /// A file of tests: `tests.rs`, or `foo_tests.rs` beside `foo.rs` (or
    /// `mod foo_tests;` of the folder), declared under `#[cfg(test)]`.
    fn is_test_file(path: &str) -> bool {
        let name = path.rsplit('/').next().unwrap_or(path);
        name == "tests.rs" || name.ends_with("_tests.rs")
    }

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        files_with_extension(dir, "rs", out);
    }

    /// Every file under `dir` whose extension is `ext`.
    fn files_with_extension(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                files_with_extension(&p, ext, out);
            } else if p.extension().is_some_and(|x| x == ext) {
                out.push(p);
            }
        }
    }

    /// The directories whose Rust files the size limits hold: the xtask, the
    /// guest's programs and the kernel module (its KUnit suite is `tests.rs`).
    const SIZED_DIRS: &[&str] = &[
        "xtask/src",
        "qemu/wbstall-fuse/src",
        "qemu/wbstall-sample/src",
        "rust-module",
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
    /// `mod tests {` (maybe `pub`): the number of lines through the module's closing brace;
    /// then `mod tests;` (its file beside, `#[path]` among the attributes): through that line.
    fn test_module_len(lines: &[&str]) -> Option<usize> {
        if lines.first()?.trim() != "#[cfg(test)]" {
            return None;
        }
        let m = 1 + lines[1..]
            .iter()
            .position(|l| !l.trim_start().starts_with("#["))?;
        let t = lines[m].trim_start();
        if let Some(vis) = t.strip_suffix("mod tests;") {
            return ["", "pub ", "pub(crate) ", "pub(super) "]
                .contains(&vis)
                .then_some(m + 1);
        }
        let vis = t.strip_suffix("mod tests {")?;
        if !["", "pub ", "pub(crate) ", "pub(super) "].contains(&vis) {
            return None;
        }
        let close = format!("{}}}", &lines[m][..lines[m].len() - t.len()]);
        let end = lines[m..].iter().position(|l| l.trim_end() == close)?;
        Some(m + end + 1)
    }

    /// What follows `fn ` when `t` opens a function's signature: a
    /// visibility, then any of `const`, `async`, `unsafe` and `extern "abi"`
    /// (the kernel module's probes are `unsafe extern "C" fn`).
    fn after_fn_keyword(t: &str) -> Option<&str> {
        let mut rest = ["pub(crate) ", "pub(super) ", "pub "]
            .iter()
            .find_map(|v| t.strip_prefix(v))
            .unwrap_or(t);
        loop {
            if let Some(r) = rest.strip_prefix("fn ") {
                return Some(r);
            }
            let abi = rest
                .strip_prefix("extern \"")
                .and_then(|r| r.split_once("\" "))
                .map(|(_, r)| r);
            rest = ["const ", "async ", "unsafe "]
                .iter()
                .find_map(|q| rest.strip_prefix(q))
                .or(abi)?;
        }
    }

    /// (name, first line, length) of each `fn` whose body is a `{ ... }` block.
    fn functions(lines: &[&str]) -> Vec<(String, usize, usize)> {
        let mut out = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            let t = l.trim_start();
            let Some(rest) = after_fn_keyword(t) else {
                continue;
            };
            // A declaration without a body (in an `extern` block or a trait).
            if t.trim_end().ends_with(';') {
                continue;
            }
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

    /// What of `sources` (path relative to the repository, full text) is over
    /// [`MAX_FILE_LINES`] or [`MAX_FN_LINES`], files of tests left out.
    fn over_the_limits(sources: &[(String, String)]) -> Vec<String> {
        let mut over = Vec::new();
        for (rel, text) in sources {
            if is_test_file(rel) {
                continue;
            }
            let lines = code(text);
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
        over
    }

    #[test]
    fn files_and_functions_stay_small() {
        let sources: Vec<(String, String)> = SIZED_DIRS
            .iter()
            .flat_map(|dir| sources_under(dir))
            .collect();
        assert!(
            sources
                .iter()
                .any(|(rel, _)| rel == "rust-module/wbstall_main.rs"),
            "the size rules read no kernel module source"
        );
        let over = over_the_limits(&sources);
        assert!(over.is_empty(), "split these:\n{}", over.join("\n"));
    }

    /// The code lines (not blank, not comments, tests left out) the tasks
    /// may hold in all: a task is its flags and one call into the stages
    /// (1,194 when each task became so, 6,464 before).
    const MAX_TASKS_LINES: usize = 1300;

    /// The code lines one file of `tasks/` may hold: a subcommand's flags,
    /// their request, and one call (qemu-test's, the most flags, is 148).
    const MAX_TASK_FILE_LINES: usize = 160;

    /// The code lines of each file of `tasks/`, counted as
    /// [`MAX_TASKS_LINES`] says.
    fn task_file_lines(sources: &[(String, String)]) -> Vec<(&str, usize)> {
        (sources.iter())
            .filter(|(rel, _)| rel.starts_with("xtask/src/tasks/"))
            .map(|(rel, code)| {
                let n = code.lines().filter(|l| !l.trim().is_empty()).count();
                (rel.as_str(), n)
            })
            .collect()
    }

    /// The code lines of `tasks/` in all.
    fn tasks_lines(sources: &[(String, String)]) -> usize {
        task_file_lines(sources).iter().map(|(_, n)| n).sum()
    }

    /// The files of `tasks/` over [`MAX_TASK_FILE_LINES`], with their lines.
    fn task_files_over(sources: &[(String, String)]) -> Vec<String> {
        (task_file_lines(sources).into_iter())
            .filter(|(_, n)| *n > MAX_TASK_FILE_LINES)
            .map(|(rel, n)| format!("{rel}: {n}"))
            .collect()
    }

    #[test]
    fn the_tasks_stay_flags_and_calls() {
        let sources = sources_with(code_without_tests);
        let n = tasks_lines(&sources);
        assert!(
            n <= MAX_TASKS_LINES,
            "tasks/ holds {n} lines of code (at most {MAX_TASKS_LINES}): move what is not \
             flags and a call into the stage it belongs to (session/, analysis/, report/...)"
        );
        let over = task_files_over(&sources);
        assert!(
            over.is_empty(),
            "a task is its flags and one call (at most {MAX_TASK_FILE_LINES} lines a file): \
             move the rest into the stage it belongs to (session/, analysis/, report/...):\n{}",
            over.join("\n")
        );
    }

    #[test]
    fn tasks_over_their_lines_are_counted_and_the_rest_are_not() {
        let src = |rel: &str, code: String| (format!("xtask/src/{rel}"), code);
        let many = "let x = 1;\n\n".repeat(MAX_TASKS_LINES - 1);
        let sources = [
            src("tasks/qemu_test/mod.rs", many),
            src("tasks/merge.rs", "fn a() {}\nfn b() {}\n".into()),
            src("session/boot_all.rs", "fn c() {}\n".repeat(100)),
        ];
        assert_eq!(tasks_lines(&sources), MAX_TASKS_LINES + 1);
        // One file over its own limit is named; one at it is not.
        let at = "let x = 1;\n".repeat(MAX_TASK_FILE_LINES);
        let sources = [
            src("tasks/hunt/mod.rs", format!("{at}let y = 2;\n")),
            src("tasks/merge.rs", at),
            src("session/boot_all.rs", "fn c() {}\n".repeat(500)),
        ];
        assert_eq!(
            task_files_over(&sources),
            [format!(
                "xtask/src/tasks/hunt/mod.rs: {}",
                MAX_TASK_FILE_LINES + 1
            )]
        );
    }

    /// The kernel module is held to the same limits: a file one line over is
    /// named, and so is a long probe (`unsafe extern "C" fn`, which the
    /// scanner once did not see); its KUnit suite, `tests.rs`, is not counted,
    /// nor is a function declared without a body (`extern "C"` of `helpers.c`),
    /// which has no closing brace to measure to.
    #[test]
    fn a_long_module_file_or_probe_is_named() {
        let src = |rel: &str, code: String| (format!("rust-module/{rel}"), code);
        let body = "    x();\n".repeat(MAX_FN_LINES);
        let sources = [
            src("table.rs", "const A: u8 = 0;\n".repeat(MAX_FILE_LINES + 1)),
            src("slot.rs", "const A: u8 = 0;\n".repeat(MAX_FILE_LINES)),
            src(
                "probes.rs",
                format!("unsafe extern \"C\" fn probe_x(_data: *mut c_void) {{\n{body}}}\n"),
            ),
            src(
                "probes/ffi.rs",
                format!(
                    "extern \"C\" {{\n    fn helper(wb: *mut c_void);\n}}\n\
                     impl P {{\n    pub(super) const unsafe fn new() -> Self {{\n\
                     {body}    }}\n}}\n"
                ),
            ),
            src("tests.rs", "const A: u8 = 0;\n".repeat(2 * MAX_FILE_LINES)),
        ];
        let n = MAX_FN_LINES + 2;
        assert_eq!(
            over_the_limits(&sources),
            [
                format!(
                    "rust-module/table.rs: {} lines of code (max {MAX_FILE_LINES})",
                    MAX_FILE_LINES + 1
                ),
                format!("rust-module/probes.rs:1: fn probe_x is {n} lines (max {MAX_FN_LINES})"),
                format!("rust-module/probes/ffi.rs:5: fn new is {n} lines (max {MAX_FN_LINES})"),
            ]
        );
    }

    /// The user hears from one place: events go through `progress` (stderr),
    /// results are printed by the tasks (stdout). `reaper` prints from its
    /// signal thread, where nothing else runs any more.
    /// Every xtask source file: (path relative to the repository, its code
    /// without the tests).
    fn sources() -> Vec<(String, String)> {
        sources_with(|text| code(text).join("\n"))
    }

    /// Every xtask source file but the files of tests: (path relative to the
    /// repository, `keep` of its text), in order.
    fn sources_with(keep: impl Fn(&str) -> String) -> Vec<(String, String)> {
        sources_of_every_file()
            .into_iter()
            .filter(|(rel, _)| !is_test_file(rel))
            .map(|(rel, text)| (rel, keep(&text)))
            .collect()
    }

    /// Every xtask source file, the files of tests too, with its full text.
    fn sources_of_every_file() -> Vec<(String, String)> {
        sources_under("xtask/src")
    }

    /// Every kernel module source file but its KUnit suite (`tests.rs`): (path
    /// relative to the repository, its code without the tests), in order.
    fn module_sources() -> Vec<(String, String)> {
        sources_under("rust-module")
            .into_iter()
            .filter(|(rel, _)| !is_test_file(rel))
            .map(|(rel, text)| (rel, code_without_tests(&text)))
            .collect()
    }

    /// Every Rust file under `dir` (relative to the repository), in order:
    /// (path relative to the repository, its full text).
    fn sources_under(dir: &str) -> Vec<(String, String)> {
        let mut files = Vec::new();
        let root = crate::util::project_root();
        rust_files(&root.join(dir), &mut files);
        files.sort();
        files
            .iter()
            .map(|f| {
                let rel = f.strip_prefix(&root).unwrap().display().to_string();
                (rel, std::fs::read_to_string(f).unwrap())
            })
            .collect()
    }

    /// The files that `mod x;` lines of `sources` (each with its full text)
    /// declare, each with whether `#[cfg(test)]` is among the attributes
    /// above its declaration: `#[path = "p"]` is beside the declaring file,
    /// `mod x;` of a `mod.rs` or `main.rs` is `x.rs` (or `x/mod.rs`) beside it,
    /// of `foo.rs` it is `foo/x.rs`.
    fn declared_files(sources: &[(String, String)]) -> BTreeMap<String, bool> {
        let mut out = BTreeMap::new();
        for (rel, text) in sources {
            let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
            let lines: Vec<&str> = text.lines().collect();
            for (i, l) in lines.iter().enumerate() {
                let Some(m) = l
                    .trim()
                    .strip_suffix(';')
                    .and_then(|t| t.split_once("mod "))
                    .filter(|(vis, _)| vis.is_empty() || vis.starts_with("pub"))
                    .map(|(_, m)| m)
                else {
                    continue;
                };
                let attrs: Vec<&str> = lines[..i]
                    .iter()
                    .rev()
                    .map(|a| a.trim())
                    .take_while(|a| a.starts_with("#["))
                    .collect();
                let path = attrs.iter().find_map(|a| {
                    a.strip_prefix("#[path = \"")
                        .and_then(|p| p.strip_suffix("\"]"))
                });
                let base = match name {
                    "mod.rs" | "main.rs" => dir.to_string(),
                    _ => format!("{dir}/{}", name.trim_end_matches(".rs")),
                };
                let files = match path {
                    Some(p) => vec![format!("{dir}/{p}")],
                    None => vec![format!("{base}/{m}.rs"), format!("{base}/{m}/mod.rs")],
                };
                for f in files {
                    out.insert(f, attrs.contains(&"#[cfg(test)]"));
                }
            }
        }
        out
    }

    /// The files of tests ([`is_test_file`]) that no `#[cfg(test)]` module
    /// declares: they would be built into xtask, unchecked by the rules above.
    fn test_files_outside_cfg_test(sources: &[(String, String)]) -> Vec<String> {
        let declared = declared_files(sources);
        sources
            .iter()
            .map(|(rel, _)| rel)
            .filter(|rel| is_test_file(rel) && declared.get(*rel) != Some(&true))
            .cloned()
            .collect()
    }

    #[test]
    fn files_of_tests_are_built_for_the_tests_only() {
        let found = test_files_outside_cfg_test(&sources_of_every_file());
        assert!(
            found.is_empty(),
            "files named as tests that are not declared under #[cfg(test)] (declare them \
             so, or rename them): {found:?}"
        );
    }

    #[test]
    fn a_file_of_tests_built_into_xtask_is_named() {
        let src = |rel: &str, code: &str| (format!("xtask/src/{rel}"), code.to_string());
        let sources = [
            src("main.rs", "mod a;\nmod b;\nmod c;\n"),
            src(
                "a/mod.rs",
                "pub mod x;\n#[cfg(test)]\nmod lib_tests;\n#[cfg(test)]\nmod tests;\n",
            ),
            src(
                "a/x.rs",
                "#[cfg(test)]\n#[path = \"x_tests.rs\"]\nmod tests;\n",
            ),
            src("a/x_tests.rs", "fn t() {}\n"),
            src("a/lib_tests.rs", "fn t() {}\n"),
            src("a/tests.rs", "fn t() {}\n"),
            // Declared without #[cfg(test)], and not declared at all.
            src("b.rs", "#[path = \"b_tests.rs\"]\nmod tests;\n"),
            src("b_tests.rs", "fn t() {}\n"),
            src("c/mod.rs", "pub mod y;\n"),
            src("c/y.rs", "pub fn y() {}\n"),
            src("c/y_tests.rs", "fn t() {}\n"),
        ];
        assert_eq!(
            test_files_outside_cfg_test(&sources),
            ["xtask/src/b_tests.rs", "xtask/src/c/y_tests.rs"]
        );
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
    /// before it (and itself). `ci` runs the tasks, so it comes after them.
    const STAGES: &[&str] = &[
        "exit", "reaper", "util", "progress", "distro", "deps", "kernel", "guest", "results",
        "analysis", "report", "session", "tasks", "ci",
    ];

    /// The modules docs/design.md's map names in its second column, row by
    /// row (`kernel/` as `kernel`, `exit.rs` as `exit`).
    fn design_map(text: &str) -> Vec<Vec<String>> {
        let table = text
            .split("| stage | folder | what |")
            .nth(1)
            .unwrap_or("")
            .lines()
            .skip(2)
            .take_while(|l| l.starts_with('|'));
        table
            .map(|row| {
                let folder = row.split('|').nth(2).unwrap_or("");
                (folder.split('`').skip(1).step_by(2))
                    .map(|m| {
                        let m = m.trim_end_matches('/');
                        m.strip_suffix(".rs").unwrap_or(m).to_string()
                    })
                    .collect()
            })
            .collect()
    }

    /// What the map gets wrong against the modules of `xtask/src/` (`main`
    /// and the tests' own left out) and [`STAGES`]' order.
    fn map_drift(map: &[Vec<String>], modules: &[String]) -> Vec<String> {
        let named: Vec<&String> = map.iter().flatten().collect();
        let mut out: Vec<String> = (modules.iter())
            .filter(|m| !named.contains(m))
            .map(|m| format!("{m} is not in the map"))
            .collect();
        out.extend(
            (named.iter())
                .filter(|n| !modules.contains(n))
                .map(|n| format!("{n} is in the map but not in xtask/src")),
        );
        let ranks: Vec<usize> = (map.iter())
            .filter_map(|row| {
                row.iter()
                    .filter_map(|m| STAGES.iter().position(|s| s == m))
                    .max()
            })
            .collect();
        if ranks.windows(2).any(|w| w[0] > w[1]) {
            out.push(format!(
                "the map's rows are not in the stages' order: {STAGES:?}"
            ));
        }
        out
    }

    #[test]
    fn the_design_map_names_every_module_in_the_stages_order() {
        let root = crate::util::project_root();
        let text = std::fs::read_to_string(root.join("docs/design.md")).unwrap();
        let mut modules: Vec<String> = std::fs::read_dir(root.join("xtask/src"))
            .unwrap()
            .map(|e| crate::util::file_name(&e.unwrap().path()))
            .map(|n| n.strip_suffix(".rs").unwrap_or(&n).to_string())
            .filter(|n| n != "main" && !n.ends_with("_tests") && n != "test_support")
            .collect();
        modules.sort();
        let drift = map_drift(&design_map(&text), &modules);
        assert!(
            drift.is_empty(),
            "docs/design.md's map:\n{}",
            drift.join("\n")
        );
    }

    #[test]
    fn a_map_that_misses_a_module_or_the_order_is_named() {
        let text = "| stage | folder | what |\n|---|---|---|\n\
                    | tasks | `tasks/` | x |\n| kernel | `kernel/`, `old.rs` | y |\n\nmore\n";
        let modules = ["kernel", "session", "tasks"].map(String::from);
        assert_eq!(
            map_drift(&design_map(text), &modules),
            [
                "session is not in the map".to_string(),
                "old is in the map but not in xtask/src".to_string(),
                format!("the map's rows are not in the stages' order: {STAGES:?}"),
            ]
        );
    }

    fn stage_of(rel: &str) -> Option<usize> {
        let first = rel.strip_prefix("xtask/src/")?.split(['/', '.']).next()?;
        STAGES.iter().position(|s| *s == first)
    }

    /// Each use of a higher stage by a file of a lower one, as `file uses
    /// crate::stage`, in order.
    fn upward_uses(sources: &[(String, String)]) -> Vec<String> {
        let mut bad = Vec::new();
        for (rel, code) in sources {
            let Some(own) = stage_of(rel) else { continue };
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
        bad
    }

    #[test]
    fn lower_stages_never_use_higher_ones() {
        let bad = upward_uses(&sources());
        assert!(
            bad.is_empty(),
            "a lower stage uses a higher one:\n{}",
            bad.join("\n")
        );
    }

    #[test]
    fn a_task_that_uses_ci_is_a_lower_stage_using_a_higher_one() {
        let src = |rel: &str, code: &str| (format!("xtask/src/{rel}"), code.to_string());
        let sources = [
            src("tasks/qemu_test.rs", "use crate::ci::step;\n"),
            src("report/mod.rs", "fn f() { crate::tasks::args() }\n"),
            // CI runs the tasks; the tasks run the pipeline.
            src("ci/mod.rs", "use crate::{tasks::args, report};\n"),
            src(
                "tasks/merge.rs",
                "use crate::{analysis::judge, session::merge};\n",
            ),
            // The session stage runs below the tasks that call it.
            src(
                "session/resume.rs",
                "use crate::{results::dir, tasks::merge};\n",
            ),
        ];
        assert_eq!(
            upward_uses(&sources),
            [
                "xtask/src/report/mod.rs uses crate::tasks",
                "xtask/src/session/resume.rs uses crate::tasks",
                "xtask/src/tasks/qemu_test.rs uses crate::ci",
            ]
        );
    }

    /// A file's code without its comment lines and its `#[cfg(test)] mod x
    /// { .. }` blocks (`tests`, `fuzz`): what the build of xtask itself uses.
    fn code_without_tests(text: &str) -> String {
        let lines: Vec<&str> = text.lines().collect();
        let mut out = Vec::new();
        let mut i = 0;
        while i < lines.len() {
            let l = lines[i];
            let next = lines.get(i + 1).map(|n| n.trim_start()).unwrap_or("");
            if l.trim() == "#[cfg(test)]" && next.contains("mod ") && next.ends_with('{') {
                let indent = &l[..l.len() - l.trim_start().len()];
                let close = format!("{indent}}}");
                i += lines[i..]
                    .iter()
                    .position(|x| *x == close)
                    .unwrap_or(lines.len())
                    + 1;
                continue;
            }
            if !l.trim_start().starts_with("//") {
                out.push(l);
            }
            i += 1;
        }
        out.join("\n")
    }

    fn is_ident(c: char) -> bool {
        c.is_alphanumeric() || c == '_'
    }

    /// The paths of one use tree (`a::{b, c::{d, e}}`, `a::b::f(`), each as
    /// its segments, with the lists expanded; `s` moves past what was read.
    fn use_tree(s: &mut &str) -> Vec<Vec<String>> {
        *s = s.trim_start();
        if let Some(r) = s.strip_prefix('{') {
            *s = r;
            let mut out = Vec::new();
            loop {
                let before = s.len();
                out.extend(use_tree(s));
                *s = s.trim_start();
                if let Some(r) = s.strip_prefix(',') {
                    *s = r;
                }
                *s = s.trim_start();
                if let Some(r) = s.strip_prefix('}') {
                    *s = r;
                    return out;
                }
                if s.len() == before {
                    return out;
                }
            }
        }
        if let Some(r) = s.strip_prefix('*') {
            *s = r;
            return vec![vec![]];
        }
        let n = s.find(|c| !is_ident(c)).unwrap_or(s.len());
        let seg = s[..n].to_string();
        *s = &s[n..];
        match s.strip_prefix("::") {
            Some(r) if n > 0 => {
                *s = r;
                let mut paths = use_tree(s);
                for p in &mut paths {
                    p.insert(0, seg.clone());
                }
                paths
            }
            _ => vec![vec![seg]],
        }
    }

    /// Every path a piece of code names (`crate::a::b`, `super::c`, `self::d`,
    /// `use x::{..}`), as written: the segments up to the first that is not a
    /// module path (a call, a generic, the end of the list).
    fn paths_named(code: &str) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        let mut prev = ' ';
        let mut rest = code;
        while let Some(c) = rest.chars().next() {
            let starts = is_ident(c) && !is_ident(prev) && prev != ':';
            let n = rest.find(|c| !is_ident(c)).unwrap_or(rest.len());
            if starts && rest[n..].starts_with("::") {
                let mut cur = rest;
                out.extend(use_tree(&mut cur));
                prev = ':';
                rest = cur;
            } else {
                prev = c;
                rest = &rest[c.len_utf8()..];
            }
        }
        out
    }

    /// The module path of a source file: `xtask/src/results/record.rs` is
    /// `results::record`, `xtask/src/results/mod.rs` is `results`.
    fn module_of(rel: &str) -> Vec<String> {
        let rel = rel.strip_prefix("xtask/src/").unwrap_or(rel);
        let mut m: Vec<String> = rel
            .trim_end_matches(".rs")
            .split('/')
            .map(String::from)
            .collect();
        if matches!(m.last().map(String::as_str), Some("mod" | "main")) {
            m.pop();
        }
        m
    }

    /// A path as the file that names it sees it, made absolute (without
    /// `crate`): `super` and `self` resolved, a bare first name read through
    /// `names` (a `mod.rs`'s children, the modules a file imported). None for
    /// paths outside the crate.
    fn absolute(
        own: &[String],
        names: &BTreeMap<String, Vec<String>>,
        path: &[String],
    ) -> Option<Vec<String>> {
        let (first, rest) = path.split_first()?;
        let mut base = own.to_vec();
        match first.as_str() {
            "crate" => base.clear(),
            "self" => {}
            "super" => {
                base.pop()?;
                let mut up = rest;
                while up.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    up = &up[1..];
                }
                base.extend(up.iter().cloned());
                return Some(base);
            }
            name => base = names.get(name)?.clone(),
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// Every path a file names, made absolute: the bare names of its
    /// children (in a `mod.rs`) and of the modules it imports (`use
    /// crate::report;` then `report::num`) read as theirs.
    fn absolute_paths(
        own: &[String],
        is_mod: bool,
        modules: &[Vec<String>],
        code: &str,
    ) -> Vec<Vec<String>> {
        let mut names = BTreeMap::new();
        for m in modules {
            if is_mod && m.len() == own.len() + 1 && m.starts_with(own) {
                names.insert(m[own.len()].clone(), m.clone());
            }
        }
        let named = paths_named(code);
        for p in &named {
            let Some(mut to) = absolute(own, &names, p) else {
                continue;
            };
            if to.last().is_some_and(|s| s == "self") {
                to.pop();
            }
            if let Some(last) = to.last().filter(|_| modules.contains(&to)) {
                names.insert(last.clone(), to.clone());
            }
        }
        named
            .iter()
            .filter_map(|p| absolute(own, &names, p))
            .collect()
    }

    /// Per folder (`results`, `tasks/bisect`), which of its files use which:
    /// a file is named by its stem (a subfolder by its name, `mod` for
    /// `mod.rs`); a path to an item of the folder that is not one of its
    /// files leads to `mod`. A `pub mod x;` declares, it does not use.
    fn file_graphs(
        sources: &[(String, String)],
    ) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
        let modules: Vec<Vec<String>> = sources.iter().map(|(rel, _)| module_of(rel)).collect();
        let children = |folder: &[String]| -> Vec<String> {
            modules
                .iter()
                .filter(|m| m.len() > folder.len() && m.starts_with(folder))
                .map(|m| m[folder.len()].clone())
                .collect()
        };
        let mut graphs: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
        for ((rel, code), own) in sources.iter().zip(&modules) {
            let is_mod = rel.ends_with("/mod.rs") || rel.ends_with("/main.rs");
            let folder_depth = if is_mod { own.len() } else { own.len() - 1 };
            for to in absolute_paths(own, is_mod, &modules, code) {
                // Each folder above the file, the crate's root left to the
                // layering test.
                for depth in 1..=folder_depth {
                    let folder = &own[..depth];
                    if to.len() <= depth || !to.starts_with(folder) {
                        continue;
                    }
                    let node = |m: &[String]| m.get(depth).cloned().unwrap_or_else(|| "mod".into());
                    let from = node(own);
                    let target = if children(folder).contains(&to[depth]) {
                        to[depth].clone()
                    } else {
                        "mod".to_string()
                    };
                    if from != target {
                        graphs
                            .entry(folder.join("/"))
                            .or_default()
                            .entry(from)
                            .or_default()
                            .insert(target);
                    }
                }
            }
        }
        graphs
    }

    /// Every elementary cycle of a graph, each from its smallest node back to
    /// it (`a -> c -> b -> a`), in order.
    fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
        fn walk(
            edges: &BTreeMap<String, BTreeSet<String>>,
            path: &mut Vec<String>,
            out: &mut Vec<Vec<String>>,
        ) {
            let (start, last) = (path[0].clone(), path.last().unwrap().clone());
            for next in edges.get(&last).into_iter().flatten() {
                if *next == start {
                    let mut c = path.clone();
                    c.push(next.clone());
                    out.push(c);
                } else if *next > start && !path.contains(next) {
                    path.push(next.clone());
                    walk(edges, path, out);
                    path.pop();
                }
            }
        }
        let mut out = Vec::new();
        for start in edges.keys() {
            walk(edges, &mut vec![start.clone()], &mut out);
        }
        out
    }

    /// The circles between the files of each folder, as `folder: a -> b -> a`.
    fn circles(sources: &[(String, String)]) -> Vec<String> {
        let mut out = Vec::new();
        for (folder, edges) in file_graphs(sources) {
            for c in cycles(&edges) {
                out.push(format!("{folder}: {}", c.join(" -> ")));
            }
        }
        out
    }

    #[test]
    fn files_of_a_folder_never_use_each_other_in_a_circle() {
        let sources: Vec<(String, String)> = sources_with(code_without_tests);
        let found = circles(&sources);
        assert!(
            found.is_empty(),
            "files that use each other (move what both need into a file of its own):\n{}",
            found.join("\n")
        );
    }

    /// What the renderers (`report/`) may not use: they read the one
    /// `analysis::judge::Judgement`, never recompute statistics or the
    /// evidence rule.
    const BEHIND_THE_JUDGEMENT: &[&[&str]] = &[&["analysis", "stats"], &["results", "problems"]];

    /// Each use of [`BEHIND_THE_JUDGEMENT`] by a file of `report/`, as
    /// `file uses a::b`.
    fn past_the_judgement(sources: &[(String, String)]) -> Vec<String> {
        let modules: Vec<Vec<String>> = sources.iter().map(|(rel, _)| module_of(rel)).collect();
        let mut out = BTreeSet::new();
        for ((rel, code), own) in sources.iter().zip(&modules) {
            if own.first().map(String::as_str) != Some("report") {
                continue;
            }
            let is_mod = rel.ends_with("/mod.rs");
            for path in absolute_paths(own, is_mod, &modules, code) {
                for banned in BEHIND_THE_JUDGEMENT {
                    if path.len() >= banned.len() && path.iter().zip(*banned).all(|(a, b)| a == b) {
                        out.insert(format!("{rel} uses {}", banned.join("::")));
                    }
                }
            }
        }
        out.into_iter().collect()
    }

    #[test]
    fn renderers_read_the_judgement_only() {
        let found = past_the_judgement(&sources_with(code_without_tests));
        assert!(
            found.is_empty(),
            "a renderer reaches past the judgement (read `analysis::judge::Judgement`; compute \
             what it lacks in `analysis::judge`):\n{}",
            found.join("\n")
        );
    }

    /// Type names defined twice in the crate, each with the two things it
    /// names. At most three: a name means one thing (README's glossary),
    /// and a reader who meets it knows which.
    const ONE_NAME_TWO_THINGS: &[(&str, &str)] = &[(
        "Class",
        "exit::Class is how xtask exits (fails, usage, harness); analysis::expected::Class \
         what a cell is expected to show, or showed (ok, stall, idle)",
    )];

    /// `t` without its `pub`, `pub(crate)`, `pub(super)` in front.
    fn without_visibility(t: &str) -> &str {
        let t = t.strip_prefix("pub ").unwrap_or(t);
        match t.strip_prefix("pub(") {
            Some(r) => r.split_once(") ").map_or(t, |(_, r)| r),
            None => t,
        }
    }

    /// Each type (struct, enum, trait, type alias; not an associated type)
    /// defined in more than one place, with the files that define it.
    fn twice_named_types(sources: &[(String, String)]) -> BTreeMap<String, Vec<String>> {
        let mut defs = type_definitions(sources);
        defs.retain(|_, files| files.len() > 1);
        defs
    }

    /// Each type (struct, enum, trait, type alias; not an associated type)
    /// `sources` define, with the files that define it.
    fn type_definitions(sources: &[(String, String)]) -> BTreeMap<String, Vec<String>> {
        let mut defs: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (rel, code) in sources {
            for line in code.lines() {
                let t = line.trim_start();
                let indented = t.len() != line.len();
                let t = without_visibility(t);
                for kind in ["struct ", "enum ", "trait ", "type "] {
                    let Some(rest) = t.strip_prefix(kind) else {
                        continue;
                    };
                    if kind == "type " && indented {
                        continue; // an associated type: `type Err = ...` in an impl
                    }
                    let name: String = rest.chars().take_while(|c| is_ident(*c)).collect();
                    if name.starts_with(|c: char| c.is_ascii_uppercase()) {
                        defs.entry(name).or_default().push(rel.clone());
                    }
                }
            }
        }
        defs
    }

    /// Type names the kernel module and xtask both define for one thing: xtask
    /// reads what the module writes or declares. Any other name is the
    /// module's or xtask's alone. At most three, each with why it is one thing.
    const ONE_THING_ON_BOTH_SIDES: &[(&str, &str)] = &[
        (
            "SleepClass",
            "how a throttle sleep is classed: the module classes each sleep \
             (table/sleep_class.rs) and counts it by class; xtask reads those counts and \
             classes the trace's sleeps into the same classes (results/classes.rs)",
        ),
        (
            "Probe",
            "a tracepoint and the module's probe function for it: the module pairs them to \
             register (probes/ffi.rs), xtask reads those `Probe::new` calls from probes.rs to \
             check each function against the tree's TP_PROTO (kernel/tracepoints.rs)",
        ),
    ];

    /// What breaks "a name names one thing" between the kernel module and
    /// xtask: a type the module defines twice, a type both define that
    /// `same` does not list, and a name `same` lists that is not on both sides.
    fn names_across(
        module: &[(String, String)],
        xtask: &[(String, String)],
        same: &[(&str, &str)],
    ) -> Vec<String> {
        let mut out: Vec<String> = (twice_named_types(module).iter())
            .map(|(n, files)| format!("{n}: {}", files.join(", ")))
            .collect();
        let (in_module, in_xtask) = (type_definitions(module), type_definitions(xtask));
        for (name, files) in &in_module {
            let listed = same.iter().any(|(n, _)| n == name);
            if let Some(x) = in_xtask.get(name).filter(|_| !listed) {
                out.push(format!("{name}: {}, {}", files.join(", "), x.join(", ")));
            }
        }
        for (name, _) in same {
            if !(in_module.contains_key(*name) && in_xtask.contains_key(*name)) {
                out.push(format!(
                    "{name} is not named on both sides now: take it out of \
                     ONE_THING_ON_BOTH_SIDES"
                ));
            }
        }
        out
    }

    #[test]
    fn a_type_name_names_one_thing() {
        assert!(
            ONE_NAME_TWO_THINGS.len() <= 3,
            "at most three names kept twice"
        );
        assert!(
            ONE_THING_ON_BOTH_SIDES.len() <= 3,
            "at most three names kept on both sides"
        );
        let xtask = sources_with(code_without_tests);
        let module = module_sources();
        assert!(
            module
                .iter()
                .any(|(rel, _)| rel == "rust-module/wbstall_main.rs"),
            "the names rule reads no kernel module source"
        );
        let mut twice = twice_named_types(&xtask);
        for (name, _) in ONE_NAME_TWO_THINGS {
            assert!(
                twice.remove(*name).is_some(),
                "{name} is named once now: take it out of ONE_NAME_TWO_THINGS"
            );
        }
        let mut found: Vec<String> = twice
            .iter()
            .map(|(n, files)| format!("{n}: {}", files.join(", ")))
            .collect();
        found.extend(names_across(&module, &xtask, ONE_THING_ON_BOTH_SIDES));
        assert!(
            found.is_empty(),
            "a type name defined twice, in xtask, in the kernel module or in both (name each \
             for what it holds; one thing on both sides goes in ONE_THING_ON_BOTH_SIDES, with \
             why):\n{}",
            found.join("\n")
        );
    }

    #[test]
    fn a_type_defined_twice_is_named() {
        let src = |rel: &str, code: &str| (format!("xtask/src/{rel}"), code.to_string());
        let sources = [
            src("report/terminal.rs", "struct Row<'a> {\n    a: u32,\n}\n"),
            src("tasks/flush_cost.rs", "pub(crate) struct Row {\n}\n"),
            src("guest/plan.rs", "pub enum Phase { A }\n"),
            src("results/phases.rs", "pub type Phase = u32;\n"),
            // An associated type and a local one of another name are neither.
            src(
                "a.rs",
                "impl FromStr for A {\n    type Err = E;\n}\nstruct Once;\n",
            ),
            src("b.rs", "impl FromStr for B {\n    type Err = E;\n}\n"),
        ];
        let twice = twice_named_types(&sources);
        assert_eq!(twice.keys().collect::<Vec<_>>(), ["Phase", "Row"]);
        assert_eq!(
            twice["Row"],
            [
                "xtask/src/report/terminal.rs",
                "xtask/src/tasks/flush_cost.rs"
            ]
        );
    }

    /// Across the kernel module and xtask: a name the module defines twice is
    /// named, and so is one both define that the list of one thing on both
    /// sides lacks; a listed name defined on both is not, and a listed name
    /// gone from one side is named for taking out of the list.
    #[test]
    fn a_type_named_twice_in_the_module_or_on_both_sides_is_named() {
        let src = |rel: &str, code: &str| (rel.to_string(), code.to_string());
        let module = [
            src("rust-module/format.rs", "pub(crate) struct Summary {\n}\n"),
            src("rust-module/wbstall_main.rs", "struct Summary;\n"),
            src("rust-module/table/snapshot.rs", "pub(crate) struct Busy;\n"),
            src(
                "rust-module/table/sleep_class.rs",
                "pub(crate) enum SleepClass {}\n",
            ),
        ];
        let xtask = [
            src("xtask/src/util.rs", "pub struct Busy {\n}\n"),
            src("xtask/src/results/classes.rs", "pub enum SleepClass {}\n"),
        ];
        let same = [("SleepClass", "one thing"), ("Probe", "one thing, once")];
        assert_eq!(
            names_across(&module, &xtask, &same),
            [
                "Summary: rust-module/format.rs, rust-module/wbstall_main.rs",
                "Busy: rust-module/table/snapshot.rs, xtask/src/util.rs",
                "Probe is not named on both sides now: take it out of ONE_THING_ON_BOTH_SIDES",
            ]
        );
    }

    /// What a renderer may not do: open a file or a directory's listing, or
    /// judge for itself. What it shows is in the `Judgement`, the files of
    /// the results directory too (`Judgement::files`, read once by the
    /// session that judged).
    const A_RENDERER_DOES_NOT: &[&str] = &[
        "fs::read",
        "read_to_string",
        "read_dir",
        "File::open",
        ".load()",
        "analysis::judge(",
        "judge::judge(",
        "verdict_of(",
    ];

    /// Each line of a file of `report/` (its tests left out) that does what
    /// [`A_RENDERER_DOES_NOT`] names, as `file: pattern`.
    fn renderers_that_read(sources: &[(String, String)]) -> Vec<String> {
        let mut out = BTreeSet::new();
        for (rel, code) in sources {
            if !rel.starts_with("xtask/src/report/") {
                continue;
            }
            for banned in A_RENDERER_DOES_NOT {
                if code.contains(banned) {
                    out.insert(format!("{rel}: {banned}"));
                }
            }
        }
        out.into_iter().collect()
    }

    #[test]
    fn renderers_open_no_file_and_judge_nothing() {
        let found = renderers_that_read(&sources_with(code_without_tests));
        assert!(
            found.is_empty(),
            "a renderer reads a file or judges (load it in `results::files::RunFiles`, which \
             the judgement carries):\n{}",
            found.join("\n")
        );
    }

    #[test]
    fn a_renderer_that_reads_a_file_or_judges_is_named() {
        let src = |rel: &str, code: &str| (format!("xtask/src/{rel}"), code.to_string());
        let sources = [
            src(
                "report/plots.rs",
                "fn f(d: &Path) { let t = std::fs::read_to_string(d.join(\"x.samples.txt\")); }\n",
            ),
            src(
                "report/kcidb.rs",
                "fn g(d: &Path) { let (s, r) = ResultsDir::new(d).load()?; \
                 crate::analysis::judge(&s, &r, &e) }\n",
            ),
            // Writing its output is what a renderer is for; other stages read.
            src("report/mod.rs", "fn h() { util::write_atomic(&p, t) }\n"),
            src(
                "session/boot_all.rs",
                "fn k() { RunFiles::load(d, s, r); x.load() }\n",
            ),
        ];
        assert_eq!(
            renderers_that_read(&sources),
            [
                "xtask/src/report/kcidb.rs: .load()",
                "xtask/src/report/kcidb.rs: analysis::judge(",
                "xtask/src/report/plots.rs: fs::read",
                "xtask/src/report/plots.rs: read_to_string",
            ]
        );
    }

    /// The one file that reads a recorded time from its text: `stamp.rs`,
    /// through serde where the file holding it is read (`stamp::time_field!`).
    const PARSES_TIMES: &str = "xtask/src/stamp.rs";

    /// A field holding a time by its name: `started`, `ended`, `resumed`,
    /// `staged`, `*_at`.
    fn names_a_time(field: &str) -> bool {
        ["started", "ended", "resumed", "staged"].contains(&field) || field.ends_with("_at")
    }

    /// The `why: String`s of `results/` that are sentences, not a failure
    /// read back: each item with what its `why` says.
    const TEXT_WHY: &[(&str, &str)] = &[(
        "MoreRuns",
        "what `analysis::judge` found undecided, said to the user, never read back",
    )];

    /// Where a time or a boot's failure is text past the file it is read
    /// from: a `Stamp::parse(` outside [`PARSES_TIMES`]; a time field
    /// ([`names_a_time`]) typed `String` (or an option or list of one); a
    /// `why` of `results/` typed so, but the [`TEXT_WHY`] ones. Each as
    /// `file: what`.
    fn times_and_failures_as_text(sources: &[(String, String)]) -> Vec<String> {
        let mut out = BTreeSet::new();
        let text = ["String", "Option<String>", "Vec<String>"];
        for (rel, code) in sources {
            if rel != PARSES_TIMES && code.contains("Stamp::parse(") {
                out.insert(format!("{rel}: parses a time (Stamp::parse)"));
            }
            let mut item = String::new();
            for line in code.lines() {
                let t = without_visibility(line.trim_start());
                for kind in ["struct ", "enum "] {
                    if let Some(rest) = t.strip_prefix(kind) {
                        item = rest.chars().take_while(|c| is_ident(*c)).collect();
                    }
                }
                for field in line.split(['{', '}', ',', '(', ')']) {
                    let field = without_visibility(field.trim());
                    let Some((name, ty)) = field.split_once(": ") else {
                        continue;
                    };
                    if !text.contains(&ty.trim()) {
                        continue;
                    }
                    let why = name == "why"
                        && rel.starts_with("xtask/src/results/")
                        && !TEXT_WHY.iter().any(|(i, _)| *i == item);
                    if names_a_time(name) || why {
                        out.insert(format!("{rel}: {item}'s {name} is text ({})", ty.trim()));
                    }
                }
            }
        }
        out.into_iter().collect()
    }

    #[test]
    fn times_and_boot_failures_stay_typed_until_printed() {
        let found = times_and_failures_as_text(&sources_with(code_without_tests));
        assert!(
            found.is_empty(),
            "a time or a boot's failure kept as text past the file it is read from (type it: \
             `Stamp`, read by serde with `stamp::time_field!` where its file is read; \
             `BootError`; print it by its methods):\n{}",
            found.join("\n")
        );
    }

    #[test]
    fn a_time_or_a_failure_kept_as_text_is_named() {
        let src = |rel: &str, code: &str| (format!("xtask/src/{rel}"), code.to_string());
        let sources = [
            src(
                "results/session.rs",
                "pub struct BootFailure {\n    pub run: RunId,\n    pub why: String,\n}\n\
                 pub struct MoreRuns {\n    pub why: String,\n}\n\
                 enum Failure {\n    Typed { run: RunId, why: String },\n}\n",
            ),
            src(
                "results/record.rs",
                "pub struct BootFacts {\n    pub started: Option<String>,\n    \
                 pub console_log: String,\n}\n",
            ),
            src(
                "kernel/build.rs",
                "pub(crate) struct VariantMeta {\n    pub(crate) built_at: String,\n}\n",
            ),
            src(
                "report/kcidb.rs",
                "fn f(v: &VariantMeta) -> Result<Stamp> { Stamp::parse(&v.built_at) }\n",
            ),
            // The loader's own parse, a Slurm time limit, a why outside
            // results/ and the typed fields are none.
            src(
                "stamp.rs",
                "impl FieldTimes for Stamp {\n    fn read(t: String) -> Result<Stamp> { \
                 Stamp::parse(&t) }\n}\n",
            ),
            src(
                "session/slurm.rs",
                "pub struct Jobs {\n    pub time: Option<String>,\n}\n",
            ),
            src(
                "kernel/build_failure.rs",
                "pub struct Diagnosis {\n    pub why: String,\n}\n",
            ),
            src(
                "results/typed.rs",
                "pub struct Session {\n    pub started: Stamp,\n    pub resumed: Vec<Stamp>,\n}\n",
            ),
        ];
        assert_eq!(
            times_and_failures_as_text(&sources),
            [
                "xtask/src/kernel/build.rs: VariantMeta's built_at is text (String)",
                "xtask/src/report/kcidb.rs: parses a time (Stamp::parse)",
                "xtask/src/results/record.rs: BootFacts's started is text (Option<String>)",
                "xtask/src/results/session.rs: BootFailure's why is text (String)",
                "xtask/src/results/session.rs: Failure's why is text (String)",
            ]
        );
    }

    #[test]
    fn the_judgement_rule_rejects_a_renderer_that_computes_for_itself() {
        let src = |rel: &str, code: &str| (format!("xtask/src/{rel}"), code.to_string());
        let sources = [
            src("analysis/mod.rs", "pub mod judge;\npub mod stats;\n"),
            src("analysis/stats.rs", "pub fn median() {}\n"),
            src("results/mod.rs", "pub mod problems;\n"),
            src("results/problems.rs", "pub fn problems() {}\n"),
            src(
                "report/mod.rs",
                "pub mod a;\npub mod b;\npub mod c;\npub mod d;\n",
            ),
            src(
                "report/a.rs",
                "use crate::analysis::stats::median;\nfn f() { median() }\n",
            ),
            src(
                "report/b.rs",
                "fn g() { crate::results::problems::problems() }\n",
            ),
            src(
                "report/c.rs",
                "use crate::analysis::{judge::Judgement, stats};\n",
            ),
            src(
                "report/d.rs",
                "use crate::analysis::judge::Judgement;\nfn h(j: &Judgement) {}\n",
            ),
            // Outside report/ the analysis may use its own statistics.
            src(
                "analysis/judge.rs",
                "use super::stats;\nfn k() { stats::median() }\n",
            ),
        ];
        assert_eq!(
            past_the_judgement(&sources),
            [
                "xtask/src/report/a.rs uses analysis::stats",
                "xtask/src/report/b.rs uses results::problems",
                "xtask/src/report/c.rs uses analysis::stats",
            ]
        );
    }

    #[test]
    fn the_circle_check_finds_a_circle_and_only_a_circle() {
        let src = |files: &[(&str, &str)]| -> Vec<(String, String)> {
            files
                .iter()
                .map(|(f, c)| (format!("xtask/src/{f}"), code_without_tests(c)))
                .collect()
        };
        let m = (
            "results/mod.rs",
            "pub mod a;\npub mod b;\npub mod c;\npub struct Ctx;\n",
        );
        let a = ("results/a.rs", "use crate::results::{b::B, c};\n");
        let c = ("results/c.rs", "pub fn f(x: super::Ctx) {}\n");
        // b uses a back, through `super` and a list.
        let b_back = ("results/b.rs", "use super::{a::{self, A}};\n");
        assert_eq!(circles(&src(&[m, a, b_back, c])), ["results: a -> b -> a"]);
        // Only the tests of b use a, and the comments: no circle.
        let b_tests = (
            "results/b.rs",
            "// see crate::results::a::A\n#[cfg(test)]\npub(super) mod tests {\n    use crate::results::a::A;\n}\n",
        );
        assert!(circles(&src(&[m, a, b_tests, c])).is_empty());
        // mod.rs using c (not just declaring it), c using an item of mod.rs.
        let m_uses = (
            "results/mod.rs",
            "pub mod a;\npub mod c;\npub struct Ctx;\nfn g() { c::f(Ctx) }\n",
        );
        assert_eq!(circles(&src(&[m_uses, c])), ["results: c -> mod -> c"]);
        // A module imported by name, then used through it.
        let r = [
            (
                "report/mod.rs",
                "pub mod p;\npub fn num() {}\nfn r() { p::plot() }\n",
            ),
            (
                "report/p.rs",
                "use crate::{report, util};\nfn plot() { report::num() }\n",
            ),
        ];
        assert_eq!(circles(&src(&r)), ["report: mod -> p -> mod"]);
        // Three files around a subfolder, seen from the folder above.
        let t = [
            ("tasks/mod.rs", "pub mod x;\npub mod y;\n"),
            ("tasks/x.rs", "use super::y::run;\n"),
            ("tasks/y/mod.rs", "mod z;\n"),
            ("tasks/y/z.rs", "fn f() { crate::tasks::x::g() }\n"),
        ];
        assert_eq!(circles(&src(&t)), ["tasks: x -> y -> x"]);
    }

    /// The tests in a file of their own leave their declaration out of the
    /// code too; another module under `#[cfg(test)]` is code.
    #[test]
    fn a_test_module_s_declaration_is_not_code() {
        let src = "fn a() {}\n#[cfg(test)]\n#[path = \"a_tests.rs\"]\nmod tests;\n\
                   #[cfg(test)]\nmod helpers;\n";
        assert_eq!(code(src), ["fn a() {}", "#[cfg(test)]", "mod helpers;"]);
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

    /// What may sit directly in `tasks/` besides the commands: its `mod.rs`,
    /// and `args/`, the flag groups the commands share.
    const TASKS_BESIDE_THE_COMMANDS: &[&str] = &["mod.rs", "args"];

    /// The entries directly in `tasks/` (a file `x.rs`, a folder `x`, the
    /// tests `x_tests.rs` of a file) that are not a command: `main.rs`'s
    /// `enum Task` names no `tasks::x::`, and
    /// [`TASKS_BESIDE_THE_COMMANDS`] does not allow them.
    fn not_commands<'a>(entries: impl IntoIterator<Item = &'a str>, main: &str) -> Vec<String> {
        let task_enum = main
            .split_once("enum Task {")
            .and_then(|(_, rest)| rest.split_once("\n}"))
            .map_or("", |(body, _)| body);
        let commands: BTreeSet<String> = task_enum
            .split("tasks::")
            .skip(1)
            .map(|r| r.chars().take_while(|c| is_ident(*c)).collect())
            .collect();
        let mut out: Vec<String> = entries
            .into_iter()
            .filter(|e| !TASKS_BESIDE_THE_COMMANDS.contains(e))
            .filter(|e| {
                let stem = e.trim_end_matches(".rs");
                !commands.contains(stem.strip_suffix("_tests").unwrap_or(stem))
            })
            .map(str::to_string)
            .collect();
        out.sort();
        out
    }

    #[test]
    fn each_file_or_folder_of_tasks_is_a_command() {
        let root = crate::util::project_root().join("xtask/src");
        let entries: Vec<String> = std::fs::read_dir(root.join("tasks"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let main = std::fs::read_to_string(root.join("main.rs")).unwrap();
        assert!(main.contains("enum Task {"), "main.rs has no `enum Task`");
        let found = not_commands(entries.iter().map(String::as_str), &main);
        assert!(
            found.is_empty(),
            "files of tasks/ that are no command of `cargo xtask` (move them into the \
             folder of the command that uses them, or into args/ if they are flags \
             several commands share): {found:?}"
        );
    }

    #[test]
    fn a_helper_directly_in_tasks_is_named() {
        let main = "enum Task {\n    Deps(tasks::deps::Deps),\n    \
                    QemuTest(Box<tasks::qemu_test::QemuTest>),\n}\n\
                    fn run() { tasks::boot_all::boot_all() }\n";
        let entries = [
            "mod.rs",
            "args",
            "deps.rs",
            "deps_tests.rs",
            "qemu_test",
            "boot_all.rs",
            "boot_all_tests.rs",
            "bisect",
        ];
        assert_eq!(
            not_commands(entries, main),
            ["bisect", "boot_all.rs", "boot_all_tests.rs"]
        );
    }

    /// What may lie at the repository's root (a name, or a prefix ending in
    /// `*`); anything else is a file a run or an editor left there.
    const ROOT_ENTRIES: &[&str] = &[
        ".cargo",
        ".ci",
        ".github",
        ".gitignore",
        "Cargo.lock",
        "Cargo.toml",
        "Kconfig.*",
        "README.md",
        "docs",
        "patches",
        "qemu",
        "rust-module",
        "xtask",
    ];

    /// The first components of `paths` that [`ROOT_ENTRIES`] does not allow.
    fn strays<'a>(paths: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
        let allowed = |name: &str| {
            ROOT_ENTRIES.iter().any(|e| match e.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => name == *e,
            })
        };
        paths
            .into_iter()
            .filter_map(|p| p.split('/').next())
            .filter(|name| !allowed(name))
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn the_root_holds_only_what_belongs_there() {
        // What a commit would take: the tracked files and the untracked ones
        // git does not ignore.
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(crate::util::project_root())
            .args([
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ])
            .output()
            .expect("git is required for this test: apt-get install git");
        assert!(
            out.status.success(),
            "git ls-files: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let listing = String::from_utf8(out.stdout).unwrap();
        let paths: Vec<&str> = listing.split('\0').filter(|p| !p.is_empty()).collect();
        assert!(paths.contains(&"README.md"), "git listed no README.md");
        let found = strays(paths);
        assert!(
            found.is_empty(),
            "files at the repository's root that belong elsewhere (remove them, or add \
             the name to ROOT_ENTRIES if it belongs there): {found:?}"
        );
    }

    #[test]
    fn a_stray_file_at_the_root_is_named() {
        let found = strays([
            "README.md",
            "Kconfig.debug",
            "xtask/src/main.rs",
            "local-verify-0-verify.state",
            "docs/x.md",
        ]);
        assert_eq!(
            found,
            BTreeSet::from(["local-verify-0-verify.state".to_string()])
        );
        assert!(strays(["Kconfig"]).contains("Kconfig"));
    }

    /// Words a writer leaves for a number or a sentence still to come.
    const PLACEHOLDERS: &[&str] = &["TODO", "TBD", "FIXME", "XXX", "MIN2", "NNN"];

    /// The placeholders in `text`, as `line: word`.
    fn placeholders(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let words = line.split(|c: char| !c.is_ascii_alphanumeric());
            for w in words.filter(|w| PLACEHOLDERS.contains(w)) {
                out.push(format!("{}: {w}", i + 1));
            }
        }
        out
    }

    #[test]
    fn the_docs_hold_no_placeholder() {
        let root = crate::util::project_root();
        let mut files = vec![root.join("README.md"), root.join("rust-module/README.md")];
        files_with_extension(&root.join("docs"), "md", &mut files);
        let mut found = Vec::new();
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap();
            for p in placeholders(&text) {
                found.push(format!("{}:{p}", f.strip_prefix(&root).unwrap().display()));
            }
        }
        assert!(
            found.is_empty(),
            "placeholders left in the docs (write the number or the sentence): {found:?}"
        );
    }

    #[test]
    fn a_placeholder_is_named_and_a_word_that_contains_one_is_not() {
        assert_eq!(
            placeholders("ok\nthe matrix took **MIN2 minutes** (TBD)\n"),
            ["2: MIN2", "2: TBD"]
        );
        assert!(placeholders("MIN20 XXXL todo TODOS").is_empty());
    }
}
