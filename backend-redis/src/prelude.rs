//! Each script gets only the part of the shared prelude
//! (`scripts/common.lua`) it uses.
//!
//! A script runs its whole source on every call, and defining a Lua
//! function costs about half a microsecond there (measured on Redis 7.0:
//! the full prelude, some fifty helpers, cost 50–70 µs a call against
//! 10–20 µs for the few a hot script needs). So the prelude is cut into its
//! top-level blocks, and a script keeps the blocks its body names, and the
//! blocks those name, in their order.

use std::collections::BTreeSet;

/// One top-level block of the prelude: its text and the names it defines
/// (none for a block that always runs, such as the slot probe).
struct Block<'a> {
    text: &'a str,
    defines: Vec<&'a str>,
}

/// The names a `local` statement at the start of `line` defines:
/// `local function f` gives `f`, `local a, b = ...` gives `a` and `b`.
fn defined_names(line: &str) -> Vec<&str> {
    let Some(rest) = line.strip_prefix("local ") else {
        return Vec::new();
    };
    if let Some(f) = rest.strip_prefix("function ") {
        return f.split('(').next().map(str::trim).into_iter().collect();
    }
    let names = rest.split('=').next().unwrap_or("");
    names
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .collect()
}

/// The prelude's blocks. A block starts at a line that begins a top-level
/// `local` or `do` statement, with the comment lines right above it; any
/// other line at column 0 (an `end`, a `for`) continues the block before.
fn blocks(prelude: &str) -> Vec<Block<'_>> {
    let mut starts = Vec::new();
    let mut offset = 0;
    let mut comment_start = None;
    for line in prelude.split_inclusive('\n') {
        if line.starts_with("--") {
            comment_start.get_or_insert(offset);
        } else if line.starts_with("local ") || line.starts_with("do") {
            starts.push(comment_start.unwrap_or(offset));
            comment_start = None;
        } else {
            comment_start = None;
        }
        offset += line.len();
    }
    let mut out = Vec::new();
    // Text before the first block (the header comment) is dropped.
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(prelude.len());
        let text = &prelude[start..end];
        let first_code = text
            .lines()
            .find(|l| !l.starts_with("--"))
            .unwrap_or_default();
        out.push(Block {
            text,
            defines: defined_names(first_code),
        });
    }
    out
}

/// The identifiers `code` uses, comments left out.
fn identifiers(code: &str) -> BTreeSet<&str> {
    let mut out = BTreeSet::new();
    for line in code.lines() {
        let line = line.split("--").next().unwrap_or("");
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i].is_ascii_alphabetic() || bytes[i] == b'_' {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                out.insert(&line[start..i]);
            } else {
                i += 1;
            }
        }
    }
    out
}

/// The prelude as `body` needs it, followed by `body`: every block that
/// defines nothing, and every block defining a name that `body` or a kept
/// block uses.
pub(crate) fn link(prelude: &str, body: &str) -> String {
    let blocks = blocks(prelude);
    let mut keep = vec![false; blocks.len()];
    let mut wanted: BTreeSet<&str> = identifiers(body);
    loop {
        let mut grew = false;
        for (i, b) in blocks.iter().enumerate() {
            if !keep[i] && (b.defines.is_empty() || b.defines.iter().any(|n| wanted.contains(n))) {
                keep[i] = true;
                grew = true;
                wanted.extend(identifiers(b.text));
            }
        }
        if !grew {
            break;
        }
    }
    let mut out = String::with_capacity(prelude.len() + body.len());
    for (b, k) in blocks.iter().zip(keep) {
        if k {
            out.push_str(b.text);
        }
    }
    out.push('\n');
    out.push_str(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRELUDE: &str = "-- header\n\nlocal A, B = 1, 2\n-- probe\ndo\n  local x = A\nend\n\
        -- f uses B\nlocal function f()\n  return B\nend\nlocal function g() return f() end\n\
        local T = {}\nfor i = 1, 3 do T[i] = i end\nlocal function unused() return 0 end\n";

    #[test]
    fn a_body_gets_what_it_names_and_what_that_names() {
        let linked = link(PRELUDE, "return g()");
        assert!(linked.contains("local function g()"));
        assert!(linked.contains("local function f()"));
        assert!(
            linked.contains("local A, B = 1, 2"),
            "the probe names A; f names B"
        );
        assert!(linked.contains("do\n  local x = A\nend"));
        assert!(!linked.contains("unused"));
        assert!(!linked.contains("local T = {}"));
        assert!(!linked.contains("-- header"));
        assert!(linked.ends_with("return g()"));
    }

    #[test]
    fn comments_name_nothing_and_a_block_keeps_its_continuation() {
        let linked = link(PRELUDE, "-- g is not called here\nreturn T[1]");
        assert!(!linked.contains("local function g()"));
        assert!(linked.contains("local T = {}\nfor i = 1, 3 do T[i] = i end\n"));
    }

    #[test]
    fn names_of_a_statement_are_read() {
        assert_eq!(defined_names("local function now_ms()"), vec!["now_ms"]);
        assert_eq!(
            defined_names("local K_A, K_B = KEYS[1], KEYS[2]"),
            vec!["K_A", "K_B"]
        );
        assert!(defined_names("for i = 1, 2 do").is_empty());
    }
}
