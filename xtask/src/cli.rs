//! What a developer sees of the command line, kept honest by tests: the
//! task list, the flags each task offers, and how they read in `--help`.

/// The groups of `--help`, in the order `qemu-test` shows them: what a
/// measurement is made of first, the harness's own debugging last.
pub mod heading {
    /// Which kernels, from which source, built how.
    pub const KERNELS: &str = "Kernels";
    /// The machine QEMU makes.
    pub const GUEST: &str = "Guest";
    /// What runs in the guest: the scenarios, the runs, the fio job.
    pub const JOB: &str = "Job";
    /// What the runs are held to, and how they are classed and compared.
    pub const JUDGING: &str = "Judging";
    /// Where the results go, a session taken up again, a plan split up.
    pub const SESSIONS: &str = "Sessions and fleets";
    /// The harness itself debugged: another init, raw kernel arguments, the
    /// fault hook.
    pub const DEBUGGING: &str = "Debugging";
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use crate::{
        guest::scenario, kernel::variants::Variants,
        report::reproduce::first_command as reproducer, util, Cli, Task,
    };

    /// `command` as a user pastes it: valid bash (`bash -n`), a `cargo
    /// xtask qemu-test` whose flags parse, naming scenarios and variants that
    /// exist. The error says which.
    fn runs_as_written(command: &str) -> anyhow::Result<()> {
        use anyhow::{bail, Context};
        let sh = xshell::Shell::new().context("a shell for bash -n")?;
        let out = xshell::cmd!(sh, "bash -n")
            .stdin(command)
            .quiet()
            .ignore_status()
            .output()
            .context("cannot run bash -n (is bash installed?)")?;
        if !out.status.success() {
            bail!(
                "bash -n rejects the command: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        if command.contains(['\'', '"']) {
            bail!("quoted words: this check splits at white space only");
        }
        let words: Vec<&str> = command.split_whitespace().filter(|w| *w != "\\").collect();
        let Some(args) = words.strip_prefix(&["cargo", "xtask"]) else {
            bail!("not a `cargo xtask` command: {words:?}");
        };
        let cli = Cli::try_parse_from(std::iter::once("cargo xtask").chain(args.iter().copied()))
            .context("cargo xtask rejects the flags")?;
        let Some(Task::QemuTest(q)) = cli.task else {
            bail!("not a qemu-test command");
        };
        for s in &q.scenarios {
            scenario::any(s)?;
        }
        q.selection.resolve(&Variants::repo()?)?;
        Ok(())
    }

    #[test]
    fn the_findings_reproducers_run_as_written() {
        // The finding's README prints the command that reproduces it: it
        // must be the command as it runs.
        let file = util::project_root().join("docs/findings/memcg-stale-stats/README.md");
        let text = std::fs::read_to_string(&file).unwrap();
        let command = reproducer(&text).unwrap_or_else(|| panic!("{file:?}: no reproducer"));
        if let Err(e) = runs_as_written(&command) {
            panic!("{file:?}: {e:#}\n{command}");
        }
    }

    #[test]
    fn a_reproducer_that_would_not_run_is_refused() {
        let ok = "    cargo xtask qemu-test --scenario memcg-stale-stats \\\n        --variant upstream --runs 4\n";
        assert!(runs_as_written(&reproducer(ok).unwrap()).is_ok());
        // A flag qemu-test lacks, an unknown variant, a broken quote, a
        // continuation the text never ends.
        for (bad, why) in [
            (
                "cargo xtask qemu-test --scenario memcg-stale-stats --run 4\n",
                "rejects the flags",
            ),
            ("cargo xtask qemu-test --variant upstrem\n", "upstrem"),
            (
                "cargo xtask qemu-test --scenario 'memcg-stale-stats\n",
                "bash -n",
            ),
            ("cargo xtask qemu-test --scenario nosuch\n", "nosuch"),
        ] {
            let e = runs_as_written(bad).unwrap_err();
            assert!(format!("{e:#}").contains(why), "{bad}: {e:#}");
        }
        assert_eq!(reproducer("    cargo xtask qemu-test \\\n"), None);
    }

    /// `--help` of `task`, as the user reads it.
    fn help(task: &str) -> String {
        let mut cli = Cli::command();
        let cmd = cli.find_subcommand_mut(task).unwrap();
        cmd.render_long_help().to_string()
    }

    #[test]
    fn bisect_step_is_plumbing_hidden_from_the_list_but_still_runs() {
        // git bisect run calls it; people call `bisect`.
        let list = Cli::command().render_help().to_string();
        assert!(
            list.contains("  bisect ") && !list.contains("bisect-step"),
            "{list}"
        );
        let cli = Cli::try_parse_from([
            "cargo xtask",
            "bisect-step",
            "--kernel-src",
            "/k",
            "--log",
            "/l",
        ])
        .unwrap();
        assert!(matches!(cli.task, Some(Task::BisectStep(_))));
    }

    #[test]
    fn version_is_a_top_level_flag_alone() {
        for flag in ["--version", "-V"] {
            let cli = Cli::try_parse_from(["cargo xtask", flag]).unwrap();
            assert!(cli.version && cli.task.is_none(), "{flag}");
        }
        assert!(Cli::try_parse_from(["cargo xtask", "--version", "deps"]).is_err());
    }

    #[test]
    fn no_flag_states_its_default_twice() {
        // clap prints `[default: X]`: a doc comment saying "Default: X" again
        // is noise (one that says what an unset flag means is not).
        let mut twice = Vec::new();
        for task in Cli::command().get_subcommands() {
            for a in task.get_arguments() {
                let doc = a.get_long_help().or(a.get_help()).map(|h| h.to_string());
                if !a.get_default_values().is_empty()
                    && !a.is_hide_default_value_set()
                    && doc.is_some_and(|d| d.contains("Default:"))
                {
                    twice.push(format!("{} --{}", task.get_name(), a.get_id()));
                }
            }
        }
        assert!(twice.is_empty(), "said twice: {twice:?}");
        assert!(help("qemu-test").contains("[default: 2G]"));
    }

    #[test]
    fn flags_a_task_refuses_are_not_offered_there() {
        // module-stress needs the module (--no-rust kernels have none),
        // bench-fuse measures wbstall's own /init, a bisect step builds its
        // own commit: each still refuses the flag, naming the fix.
        for (task, flag) in [
            ("module-stress", "--no-rust"),
            ("bench-fuse", "--rdinit"),
            ("bisect", "--no-build"),
        ] {
            let offers = |task: &str| help(task).lines().any(|l| l.trim().starts_with(flag));
            assert!(!offers(task), "{task} offers {flag}");
            assert!(offers("qemu-test"), "qemu-test lacks {flag}");
        }
        // --no-build names where the kernels of another configuration are.
        let h = help("qemu-test");
        assert!(
            h.contains("target/wbstall/kernels-<tag> with --kernel-src"),
            "{h}"
        );
        // bisect says --patch as every other task does; --variant-patch still works.
        let h = help("bisect");
        assert!(
            h.contains("--patch <FILE>") && !h.contains("variant-patch"),
            "{h}"
        );
    }

    /// The flags that debug the harness itself, which no measurement needs.
    const DEBUGGING_FLAGS: [&str; 2] = ["rdinit", "kernel-arg"];

    /// The flags of `cmd` without a `--help` group, and those in the wrong
    /// one: a debugging flag outside [`super::heading::DEBUGGING`], or
    /// another flag in it.
    fn misplaced(cmd: &clap::Command) -> Vec<String> {
        let mut out = Vec::new();
        for a in cmd.get_arguments() {
            let (Some(long), false) = (a.get_long(), a.is_hide_set()) else {
                continue;
            };
            if long == "help" {
                continue;
            }
            let debugging = DEBUGGING_FLAGS.contains(&long);
            match a.get_help_heading() {
                None => out.push(format!("--{long} has no heading")),
                Some(h) if (h == super::heading::DEBUGGING) != debugging => {
                    out.push(format!("--{long} is under {h}"))
                }
                Some(_) => {}
            }
        }
        out
    }

    #[test]
    fn every_qemu_test_flag_is_in_a_group_and_debugging_comes_last() {
        let mut cli = Cli::command();
        cli.build();
        let cmd = cli.find_subcommand("qemu-test").unwrap();
        assert_eq!(misplaced(cmd), Vec::<String>::new());
        // The groups as the user reads them: the everyday ones first.
        let h = help("qemu-test");
        let groups: Vec<&str> = h
            .lines()
            .filter(|l| !l.starts_with(' ') && l.ends_with(':'))
            .collect();
        assert_eq!(
            groups,
            [
                "Options:",
                "Kernels:",
                "Job:",
                "Judging:",
                "Sessions and fleets:",
                "Guest:",
                "Debugging:"
            ]
        );
        let rdinit = h.find("--rdinit <PATH>").unwrap();
        assert!(rdinit > h.find("Debugging:").unwrap(), "{h}");
    }

    #[test]
    fn a_flag_without_a_group_or_in_the_wrong_one_is_named() {
        use clap::Arg;
        let cmd = clap::Command::new("t")
            .arg(Arg::new("runs").long("runs"))
            .arg(
                Arg::new("rdinit")
                    .long("rdinit")
                    .help_heading(super::heading::GUEST),
            )
            .arg(
                Arg::new("cpus")
                    .long("cpus")
                    .help_heading(super::heading::DEBUGGING),
            )
            .arg(
                Arg::new("memory")
                    .long("memory")
                    .help_heading(super::heading::GUEST),
            )
            .arg(
                Arg::new("kernel-arg")
                    .long("kernel-arg")
                    .help_heading(super::heading::DEBUGGING),
            );
        assert_eq!(
            misplaced(&cmd),
            [
                "--runs has no heading",
                "--rdinit is under Guest",
                "--cpus is under Debugging"
            ]
        );
    }
}
