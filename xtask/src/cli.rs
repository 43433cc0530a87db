//! What a developer sees of the command line, kept honest by tests: the
//! task list, the flags each task offers, and how they read in `--help`.

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use crate::{Cli, Task};

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
}
