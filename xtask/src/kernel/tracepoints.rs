//! Before the module is built against a tree: every tracepoint the module
//! attaches to must have, in that tree's headers ([`HEADERS`]: the writeback
//! events, and the scheduler's `sched_entry_tp`/`sched_exit_tp`, which bracket
//! a throttle sleep), the `TP_PROTO` its Rust probe is written for. The kernel
//! calls a probe through a `void *` and the module finds tracepoints by name at
//! run time, so no compiler sees a mismatch; a probe reading arguments that are
//! not there is memory corruption. This check turns it into a build error naming both sides.
//!
//! The probes are read from `rust-module/probes.rs` (`Probe::new(c"<tracepoint>",
//! probe_<x> ...)` and each `extern "C" fn probe_<x>(...)`), the prototypes from
//! the header (`TRACE_EVENT`, `DEFINE_EVENT`, `DECLARE_TRACE` (whose tracepoint
//! is `<name>_tp`), or a wrapper macro such as
//! `DEFINE_WRITEBACK_EVENT(name)` whose definition holds the `TP_PROTO`).

use std::{fs, path::Path};

use anyhow::{bail, Context, Result};

/// The headers the module's tracepoints are declared in, relative to the tree.
pub const HEADERS: [&str; 2] = [
    "include/trace/events/writeback.h",
    "include/trace/events/sched.h",
];
/// The module file with the probes.
pub const PROBES_RS: &str = "probes.rs";

/// A tracepoint the module attaches to, and the argument types its probe takes
/// (after the `data` pointer), as written in Rust.
#[derive(Debug, PartialEq, Eq)]
pub struct Probe {
    pub tracepoint: String,
    pub function: String,
    pub rust_args: Vec<String>,
}

/// Checks the module in `module_dir` against the tree's header.
pub fn check(tree: &Path, module_dir: &Path) -> Result<()> {
    let mut header = String::new();
    for h in HEADERS {
        let path = tree.join(h);
        header +=
            &fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    }
    let probes_path = module_dir.join(PROBES_RS);
    let probes = fs::read_to_string(&probes_path)
        .with_context(|| format!("reading {}", probes_path.display()))?;
    let mismatches = mismatches(&header, &probes)?;
    if !mismatches.is_empty() {
        bail!(
            "the wbstall module's probes do not match this tree's tracepoints \
             ({} in {}):\n{}\nUpdate the probe functions in rust-module/{PROBES_RS} to the \
             tree's TP_PROTO (and what they read), or build another tree.",
            HEADERS.join(", "),
            tree.display(),
            mismatches.join("\n")
        );
    }
    Ok(())
}

/// One line per probe whose tracepoint is missing or has other arguments.
pub fn mismatches(header: &str, probes_rs: &str) -> Result<Vec<String>> {
    let probes = probes(probes_rs)?;
    let mut out = Vec::new();
    for p in &probes {
        let Some(proto) = tp_proto(header, &p.tracepoint) else {
            out.push(format!(
                "  {}: no such tracepoint in the header (probe {})",
                p.tracepoint, p.function
            ));
            continue;
        };
        let c_types: Vec<String> = proto.iter().map(|a| c_type(a)).collect();
        let same = c_types.len() == p.rust_args.len()
            && c_types
                .iter()
                .zip(&p.rust_args)
                .all(|(c, r)| compatible(c, r));
        if !same {
            out.push(format!(
                "  {}: TP_PROTO({}) but {} takes (data, {})",
                p.tracepoint,
                proto.join(", "),
                p.function,
                p.rust_args.join(", ")
            ));
        }
    }
    Ok(out)
}

/// The module's probes: tracepoint name, function, Rust argument types.
pub fn probes(src: &str) -> Result<Vec<Probe>> {
    let flat: String = src.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    for part in flat.split("Probe::new(").skip(1) {
        let Some(rest) = part.trim_start().strip_prefix("c\"") else {
            continue;
        };
        let Some((tracepoint, rest)) = rest.split_once('"') else {
            continue;
        };
        let function: String = rest
            .trim_start_matches([',', ' '])
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let sig = flat
            .split(&format!("extern \"C\" fn {function}("))
            .nth(1)
            .with_context(|| format!("{PROBES_RS}: no `extern \"C\" fn {function}(`"))?;
        let args = balanced(sig).context("unbalanced parentheses in a probe signature")?;
        let mut rust_args: Vec<String> = args
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(|a| a.split_once(':').map_or(a, |(_, t)| t).trim().to_string())
            .collect();
        if rust_args.is_empty() || rust_args.remove(0) != "*mut c_void" {
            bail!("{PROBES_RS}: {function} must take the tracepoint's `data: *mut c_void` first");
        }
        out.push(Probe {
            tracepoint: tracepoint.to_string(),
            function,
            rust_args,
        });
    }
    if out.is_empty() {
        bail!("{PROBES_RS}: no `Probe::new(c\"<tracepoint>\", <function> ...)` found");
    }
    Ok(out)
}

/// The text up to the `)` that closes an already opened `(`.
fn balanced(s: &str) -> Option<&str> {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return Some(&s[..i]),
            ')' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// The `TP_PROTO` arguments of tracepoint `name`, as declared (`struct
/// bdi_writeback *wb`), whitespace normalised.
pub fn tp_proto(header: &str, name: &str) -> Option<Vec<String>> {
    // Continuation lines joined, whitespace collapsed: macros become one line.
    let flat: String = header
        .replace("\\\n", " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let proto_after = |pos: usize| -> Option<Vec<String>> {
        let rest = &flat[pos..];
        let open = rest.find("TP_PROTO(")? + "TP_PROTO(".len();
        let args = balanced(&rest[open..])?;
        Some(args.split(',').map(|a| a.trim().to_string()).collect())
    };
    // `DECLARE_TRACE(sched_entry, ...)` defines the tracepoint `sched_entry_tp`
    // (include/linux/tracepoint.h appends `_tp`).
    let bare = name
        .strip_suffix("_tp")
        .map(|b| format!("DECLARE_TRACE({b},"));
    let direct = [format!("TRACE_EVENT({name},")]
        .into_iter()
        .chain(bare)
        .collect::<Vec<_>>();
    if let Some(pos) = direct.iter().find_map(|d| flat.find(d.as_str())) {
        return proto_after(pos);
    }
    // DEFINE_EVENT(class, name, TP_PROTO(...), ...)
    if let Some(pos) = flat
        .match_indices("DEFINE_EVENT(")
        .map(|(i, _)| i)
        .find(|&i| {
            flat[i + "DEFINE_EVENT(".len()..]
                .split(',')
                .nth(1)
                .is_some_and(|n| n.trim() == name)
        })
    {
        return proto_after(pos);
    }
    // WRAPPER(name); where `#define WRAPPER(name) DEFINE_EVENT(..., TP_PROTO(...))`
    let call = format!("({name});");
    let at = flat.find(&call)?;
    let wrapper: String = flat[..at]
        .chars()
        .rev()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let def = flat.find(&format!("#define {wrapper}("))?;
    proto_after(def)
}

/// `struct bdi_writeback *wb` → `struct bdi_writeback *`; `long pause` → `long`.
pub fn c_type(decl: &str) -> String {
    let d = decl.trim();
    let name_len = d
        .chars()
        .rev()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .count();
    let ty = d[..d.len() - name_len].trim();
    ty.replace(" *", "*").replace('*', " *").trim().to_string()
}

/// Whether a probe argument of Rust type `rust` receives a C `c` correctly.
pub fn compatible(c: &str, rust: &str) -> bool {
    if let Some(pointee) = c.strip_suffix(" *") {
        // A pointer: to the same bindgen struct, or untyped.
        return rust == "*mut c_void"
            || pointee
                .strip_prefix("struct ")
                .is_some_and(|s| rust == format!("*mut bindings::{s}"));
    }
    matches!(
        (c, rust),
        ("unsigned long", "c_ulong")
            | ("long", "c_long")
            | ("int", "c_int")
            | ("unsigned int", "c_uint")
            | ("bool", "bool")
            | ("u64", "u64")
            | ("u32", "u32")
            | ("int", "i32")
            | ("unsigned int", "u32")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        fs::read_to_string(
            crate::util::project_root()
                .join("xtask/fixtures/tracepoints")
                .join(name),
        )
        .unwrap()
    }

    fn module_probes() -> String {
        fs::read_to_string(
            crate::util::project_root()
                .join("rust-module")
                .join(PROBES_RS),
        )
        .unwrap()
    }

    #[test]
    fn the_three_prototypes_are_found_however_declared() {
        let h = fixture("writeback-7.3.h");
        assert_eq!(
            tp_proto(&h, "writeback_wake_background").unwrap(),
            ["struct bdi_writeback *wb"]
        );
        assert_eq!(
            tp_proto(&h, "writeback_start").unwrap(),
            ["struct bdi_writeback *wb", "struct wb_writeback_work *work"]
        );
        let bdp = tp_proto(&h, "balance_dirty_pages").unwrap();
        assert_eq!(bdp.len(), 8);
        assert_eq!(bdp[6], "long pause");
        assert_eq!(tp_proto(&h, "no_such_event"), None);
        // A bare tracepoint: `DECLARE_TRACE(sched_entry, ...)` is `sched_entry_tp`.
        let sched = fixture("sched-7.3.h");
        assert_eq!(
            tp_proto(&sched, "sched_entry_tp").unwrap(),
            ["bool preempt"]
        );
        assert_eq!(
            tp_proto(&sched, "sched_exit_tp").unwrap(),
            ["bool is_switch"]
        );
        assert_eq!(tp_proto(&sched, "sched_entry"), None);
    }

    #[test]
    fn the_module_matches_7_3() {
        let p = probes(&module_probes()).unwrap();
        let names: Vec<&str> = p.iter().map(|p| p.tracepoint.as_str()).collect();
        assert_eq!(
            names,
            [
                "sched_entry_tp",
                "sched_exit_tp",
                "sched_wakeup",
                "writeback_wake_background",
                "balance_dirty_pages",
                "writeback_start",
                "writeback_pages_written",
                "track_foreign_dirty",
            ]
        );
        let headers = fixture("writeback-7.3.h") + &fixture("sched-7.3.h");
        let m = mismatches(&headers, &module_probes()).unwrap();
        assert!(m.is_empty(), "{m:#?}");
    }

    #[test]
    fn a_changed_prototype_is_a_build_error_naming_both_sides() {
        // `pause` became unsigned and an argument was added; writeback_start is gone.
        let headers = fixture("writeback-changed.h") + &fixture("sched-7.3.h");
        let m = mismatches(&headers, &module_probes()).unwrap();
        assert_eq!(m.len(), 2, "{m:#?}");
        assert!(m[0].contains("balance_dirty_pages: TP_PROTO("), "{}", m[0]);
        assert!(m[0].contains("probe_balance_dirty_pages takes"), "{}", m[0]);
        assert!(
            m[1].contains("writeback_start: no such tracepoint"),
            "{}",
            m[1]
        );
    }

    #[test]
    fn types_compare_by_meaning() {
        assert_eq!(c_type("struct bdi_writeback *wb"), "struct bdi_writeback *");
        assert_eq!(c_type("struct bdi_writeback* wb"), "struct bdi_writeback *");
        assert_eq!(c_type("unsigned long start_time"), "unsigned long");
        assert!(compatible(
            "struct bdi_writeback *",
            "*mut bindings::bdi_writeback"
        ));
        assert!(compatible("struct wb_writeback_work *", "*mut c_void"));
        assert!(!compatible(
            "struct bdi_writeback *",
            "*mut bindings::backing_dev_info"
        ));
        assert!(!compatible("unsigned long", "c_long"));
        assert!(!compatible("long", "c_ulong"));
    }
}
