use super::*;

#[test]
fn long_lines_wrap_at_spaces_within_72_columns() {
    let long = format!("job:      x: fio {}", "--opt=value ".repeat(12));
    let w = wrap(&long);
    assert!(w.lines().count() > 1);
    assert!(w.lines().all(|l| l.chars().count() <= WIDTH), "{w}");
    assert!(w.lines().nth(1).unwrap().starts_with("    "));
    assert_eq!(wrap("short\n"), "short\n");
    // A tag to copy and a trailer are kept whole.
    let tag = format!("{TAG}Closes: https://lore.kernel.org/r/{}", "x".repeat(60));
    assert_eq!(wrap(&tag), format!("{tag}\n"));
    let trailer = format!("Tested-by: {} <t@example.net>", "A Long Name ".repeat(6));
    assert_eq!(wrap(&trailer), format!("{trailer}\n"));
    assert!(fits(&format!("Subject: x\n\n{tag}\n{trailer}\n")));
    assert!(!fits(&format!("Subject: x\n\n{}\n", "x ".repeat(40))));
    assert!(is_trailer("Tested-by: A <a@b.c>") && !is_trailer("  Tested-by: A <a@b.c>"));
}

/// A mail of `subject` with a config attached, from a session of a reporter.
fn sample(subject: &str, body: &str) -> String {
    let session = Session {
        started: "20261202T060724Z".into(),
        reporter: Some("A Tester <tester@example.net>".into()),
        ..Session::default()
    };
    let e = Envelope {
        what: "patch-fix".into(),
        subject: subject.into(),
        to: vec!["A Developer <dev@example.org>".into()],
        cc: vec!["linux-mm@kvack.org".into()],
        reply_to: Some("20261201-fix-1-dev@example.org".into()),
    };
    let config = Attachment {
        name: "config-7.3.4-patch-fix".into(),
        text: "CONFIG_64BIT=y\n".into(),
    };
    message(&session, &e, body, &[config]).unwrap()
}

/// What python3 prints running `script` on `input`, or None (with the
/// reason) when python3 is not here.
fn python(script: &str, input: &str) -> Option<String> {
    use std::io::Write;
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| eprintln!("skipped: no python3 ({e})"))
        .ok()?;
    child.stdin.take()?.write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "python3 failed on:\n{input}");
    Some(String::from_utf8(out.stdout).unwrap())
}

/// Python's mail parser reads what lettre wrote: the long subject folded
/// and read back whole, the threading, the text part in 8bit with its
/// `±`, the config as an attachment of its own.
#[test]
fn pythons_mail_parser_reads_the_mail_and_its_attachment() {
    let subject = "Re: [PATCH v2 3/7] mm: start writeback for memcg domains whose \
                   statistics are stale, a subject longer than a line";
    let text = sample(
        subject,
        "Findings: 1.68 ± 17%\n\nTested-by: A Tester <tester@example.net>\n",
    );
    assert!(text.lines().all(|l| l.len() <= 998), "{text}");
    assert!(
        text.contains("Date: Wed, 02 Dec 2026 06:07:24 +0000\n"),
        "{text}"
    );
    let Some(out) = python(
        "import email, email.policy, sys\n\
         m = email.message_from_bytes(sys.stdin.buffer.read(), policy=email.policy.default)\n\
         print(m['subject']); print(m['in-reply-to']); print(m['cc'])\n\
         body = m.get_body(('plain',))\n\
         print(body['content-transfer-encoding'], body.get_content().splitlines()[0])\n\
         for a in m.iter_attachments(): print(a.get_filename(), a.get_content().strip())\n",
        &text,
    ) else {
        return;
    };
    assert_eq!(
        out,
        format!(
            "{subject}\n<20261201-fix-1-dev@example.org>\nlinux-mm@kvack.org\n\
             8bit Findings: 1.68 ± 17%\nconfig-7.3.4-patch-fix CONFIG_64BIT=y\n"
        )
    );
}

/// b4 takes a reply's trailer only at the margin and whole: the mails'
/// `Tested-by:` is one; the form of before (indented, wrapped past the
/// name) is none. Runs b4's own parser where `cargo xtask ci` installed it.
#[test]
fn b4_collects_the_tested_by_and_not_a_wrapped_one() {
    let Ok(venv) = crate::util::cache_dir().map(|c| c.join(B4_VENV)) else {
        return;
    };
    let py = venv.join("bin/python");
    if !py.is_file() {
        eprintln!(
            "skipped: needs b4 installed by `cargo xtask ci` in {}",
            venv.display()
        );
        return;
    }
    let trailers = |body: &str| -> String {
        let out = std::process::Command::new(&py)
            .args([
                "-c",
                "import sys, b4\n\
                 t, _ = b4.LoreMessage.find_trailers(sys.argv[1], followup=True)\n\
                 print('; '.join(f'{x.name}: {x.value}' for x in t))",
                body,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let from = "Seed 3b06360e maintainers <maintainers@users.noreply.a-seed-3b06360e.example>";
    let body = wrap(&format!("The patch passed.\n\nTested-by: {from}\n"));
    assert_eq!(trailers(&body), format!("Tested-by: {from}"));
    let old = "The patch passed.\n\n  Tested-by: Seed 3b06360e maintainers\n      \
               <maintainers@users.noreply.a-seed-3b06360e.example>\n";
    assert_eq!(trailers(old), "");
}

/// The venv `cargo xtask ci` installs b4 into, under the cache.
const B4_VENV: &str = "b4";
