//! Every `leaseq …` command README.md prints works when pasted: run on an
//! SQLite file (`--features sqlite`), each is accepted and reaches the
//! store (exit code 0, or 3 or 4 where the file lacks the queue or item it
//! names), never a usage error. Commands that run until interrupted
//! (`dashboard`, `demo`, `schedules run`) are only parsed with `--help`.
#![cfg(feature = "sqlite")]

mod common;

/// The `leaseq` commands in `text`: inline code spans (which may wrap over
/// a line break) and lines of shell code blocks that start with `leaseq `,
/// each without a trailing `# comment`.
fn commands_in(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut prose = String::new();
    // The open block's language, while in one.
    let mut fence: Option<&str> = None;
    for line in text.lines() {
        if let Some(lang) = line.trim_start().strip_prefix("```") {
            fence = if fence.is_some() {
                None
            } else {
                Some(lang.trim())
            };
            prose.push('\n');
        } else if let Some(lang) = fence {
            let shell = matches!(lang, "sh" | "bash" | "console" | "");
            if let Some(cmd) = line.trim_start().strip_prefix("leaseq ").filter(|_| shell) {
                found.push(cmd.split(" #").next().unwrap_or(cmd).trim().to_owned());
            }
            prose.push('\n');
        } else {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    for (i, span) in prose.split('`').enumerate() {
        if let Some(cmd) = span.replace('\n', " ").strip_prefix("leaseq ") {
            if i % 2 == 1 {
                found.push(cmd.trim().to_owned());
            }
        }
    }
    found
}

/// Runs until a signal: parsed only. `events` follows a queue until
/// interrupted unless `--count` bounds it.
fn runs_until_interrupted(args: &[&str]) -> bool {
    matches!(
        args,
        ["dashboard", ..] | ["demo", ..] | ["schedules", "run", ..]
    ) || (args.first() == Some(&"events") && !args.contains(&"--count"))
}

/// How long one pasted command may run: a command that follows until
/// interrupted, and is not known to, fails the test instead of hanging it.
const COMMAND_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

#[test]
fn every_leaseq_command_in_the_readme_works_when_pasted() {
    let readme = include_str!("../../README.md");
    let commands = commands_in(readme);
    for needed in [
        "cancel", "pause", "resume", "run-now", "workers", "item", "stats",
    ] {
        assert!(
            commands
                .iter()
                .any(|c| c.split_whitespace().next() == Some(needed)),
            "README prints no `leaseq {needed}` (found {commands:?}): is the parser blind?"
        );
    }
    let db = common::SqliteFile::migrated("readme");
    let mut failures = Vec::new();
    for cmd in &commands {
        let args: Vec<&str> = cmd.split_whitespace().collect();
        let mut run = db.leaseq();
        run.args(&args);
        if runs_until_interrupted(&args) {
            run.arg("--help");
        }
        run.timeout(COMMAND_LIMIT);
        let out = run.output().expect("run leaseq");
        let code = out.status.code();
        if code.is_none() {
            failures.push(format!(
                "`leaseq {cmd}`: did not end within {COMMAND_LIMIT:?}: if it follows until \
                 interrupted, list it in runs_until_interrupted"
            ));
        } else if !matches!(code, Some(0 | 3 | 4)) {
            failures.push(format!(
                "`leaseq {cmd}`: exit code {code:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_reader_finds_spans_blocks_and_wrapped_spans() {
    let text = "Run `leaseq run-now q\n--all` or `cargo run`.\n```sh\nleaseq stats   # counts\n$ other\n```\n\
                ```toml\nleaseq = { path = \"..\" }\n```\n";
    assert_eq!(commands_in(text), vec!["stats", "run-now q --all"]);
}
