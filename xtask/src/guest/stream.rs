//! The results stream the guest writes on the virtio-serial port
//! `wbstall.results` (see `qemu/lib.sh`):
//!
//! ```text
//! WBSTALL-FILE <name> <length>\n<length bytes>\n
//! WBSTALL-END ok\n            or   WBSTALL-END fail <reason>\n
//! ```

use std::collections::BTreeMap;

/// How the guest ended its stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    Ok,
    Fail(String),
}

/// A parsed stream. A stream cut short keeps every complete file before the cut.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stream {
    pub files: BTreeMap<String, Vec<u8>>,
    pub end: Option<End>,
    /// Why parsing stopped before an END record, if it did.
    pub truncated: Option<String>,
}

impl Stream {
    pub fn text(&self, name: &str) -> Option<String> {
        self.files
            .get(name)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }
}

/// Where a cut stream stopped, for its message: after which whole file (the
/// last that arrived), so that the guest's last step can be found.
fn after(last: Option<&str>) -> String {
    match last {
        Some(name) => format!("after `{name}`, the last whole file"),
        None => "before any whole file".to_string(),
    }
}

pub fn parse(bytes: &[u8]) -> Stream {
    let mut s = Stream::default();
    let mut pos = 0;
    let mut last: Option<String> = None;
    while pos < bytes.len() {
        let Some(nl) = bytes[pos..].iter().position(|&b| b == b'\n') else {
            s.truncated = Some(format!(
                "partial header at byte {pos}, {}",
                after(last.as_deref())
            ));
            return s;
        };
        let header = String::from_utf8_lossy(&bytes[pos..pos + nl]).into_owned();
        pos += nl + 1;
        if let Some(rest) = header.strip_prefix("WBSTALL-END ") {
            s.end = Some(match rest.trim() {
                "ok" => End::Ok,
                other => End::Fail(
                    other
                        .strip_prefix("fail")
                        .unwrap_or(other)
                        .trim()
                        .to_string(),
                ),
            });
            return s;
        }
        let mut words = header
            .strip_prefix("WBSTALL-FILE ")
            .unwrap_or("")
            .split(' ');
        let (Some(name), Some(len), None) = (words.next(), words.next(), words.next()) else {
            s.truncated = Some(format!(
                "unexpected record `{header}` at byte {}, {}",
                pos - nl - 1,
                after(last.as_deref())
            ));
            return s;
        };
        let Ok(len) = len.parse::<usize>() else {
            s.truncated = Some(format!("bad length in `{header}`"));
            return s;
        };
        // `pos + len + 1` overflows for a length near usize::MAX: a truncated
        // stream, never a panic.
        if pos
            .checked_add(len)
            .and_then(|e| e.checked_add(1))
            .is_none_or(|e| bytes.len() < e)
        {
            s.truncated = Some(format!(
                "file `{name}` cut short ({} of {len} bytes; the stream ends at byte {}, {})",
                bytes.len() - pos,
                bytes.len(),
                after(last.as_deref())
            ));
            return s;
        }
        s.files
            .insert(name.to_string(), bytes[pos..pos + len].to_vec());
        last = Some(name.to_string());
        pos += len + 1; // and the newline after the data
    }
    s.truncated = Some(format!(
        "no WBSTALL-END record: the stream ends at byte {pos}, {}",
        after(last.as_deref())
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(name: &str, body: &str) -> String {
        format!("WBSTALL-FILE {name} {}\n{body}\n", body.len())
    }

    #[test]
    fn a_complete_stream() {
        let text = format!(
            "{}{}WBSTALL-END ok\n",
            rec("bdi", "0:45\n"),
            rec("empty", "")
        );
        let s = parse(text.as_bytes());
        assert_eq!(s.end, Some(End::Ok));
        assert_eq!(s.text("bdi").as_deref(), Some("0:45\n"));
        assert_eq!(s.text("empty").as_deref(), Some(""));
        assert_eq!(s.truncated, None);
    }

    #[test]
    fn contents_that_look_like_records_are_data() {
        let body = "WBSTALL-END ok\nWBSTALL-FILE x 3\n";
        let text = format!(
            "{}WBSTALL-END fail fio exited with status 1\n",
            rec("dmesg", body)
        );
        let s = parse(text.as_bytes());
        assert_eq!(s.text("dmesg").as_deref(), Some(body));
        assert_eq!(s.end, Some(End::Fail("fio exited with status 1".into())));
    }

    #[test]
    fn a_cut_stream_keeps_what_arrived() {
        let full = format!("{}{}", rec("a", "1\n"), rec("b", "22222\n"));
        let s = parse(&full.as_bytes()[..full.len() - 3]);
        assert_eq!(s.text("a").as_deref(), Some("1\n"));
        assert!(!s.files.contains_key("b"));
        // The message names the last whole file and where the bytes end.
        assert_eq!(
            s.truncated.as_deref(),
            Some(
                "file `b` cut short (4 of 6 bytes; the stream ends at byte 41, \
                 after `a`, the last whole file)"
            )
        );
        let s = parse(rec("a", "1").as_bytes());
        assert_eq!(s.end, None);
        assert_eq!(
            s.truncated.as_deref(),
            Some(
                "no WBSTALL-END record: the stream ends at byte 19, after `a`, the last whole file"
            )
        );
        assert_eq!(
            parse(b"").truncated.as_deref(),
            Some("no WBSTALL-END record: the stream ends at byte 0, before any whole file")
        );
        assert_eq!(
            parse(b"WBSTALL-FILE a 1\nx\nWBSTALL-FI")
                .truncated
                .as_deref(),
            Some("partial header at byte 19, after `a`, the last whole file")
        );
    }

    #[test]
    fn an_absurd_length_is_a_truncated_stream_not_a_panic() {
        for len in [
            "18446744073709551615",
            "18446744073709551614",
            "99999999999",
        ] {
            let s = parse(format!("WBSTALL-FILE a {len}\nx\n").as_bytes());
            assert!(s.end.is_none() && s.files.is_empty());
            assert!(
                s.truncated.as_deref().unwrap().contains("cut short"),
                "{s:?}"
            );
        }
    }
}

/// Property tests (proptest): the parser never panics, whatever the guest (or
/// a cut port) sends; a well-formed stream reads back exactly; a stream cut
/// anywhere keeps exactly the files that arrived whole. Run longer with
/// `PROPTEST_CASES=100000 cargo test -p xtask stream::fuzz`.
#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::prelude::*;

    fn encode(files: &[(String, Vec<u8>)], end: &str) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, body) in files {
            out.extend_from_slice(format!("WBSTALL-FILE {name} {}\n", body.len()).as_bytes());
            out.extend_from_slice(body);
            out.push(b'\n');
        }
        out.extend_from_slice(end.as_bytes());
        out
    }

    fn files() -> impl Strategy<Value = Vec<(String, Vec<u8>)>> {
        // Distinct names (a later file of the same name replaces the earlier).
        proptest::collection::btree_map(
            "[a-z][a-z0-9-]{0,12}",
            proptest::collection::vec(any::<u8>(), 0..300),
            0..6,
        )
        .prop_map(|m| m.into_iter().collect())
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let s = parse(&bytes);
            prop_assert!(s.end.is_some() || s.truncated.is_some());
        }

        #[test]
        fn record_like_garbage_never_panics(
            lines in proptest::collection::vec(
                prop_oneof![
                    "WBSTALL-FILE [a-z]{1,4} [0-9]{1,25}",
                    "WBSTALL-FILE [a-z ]{0,6}",
                    "WBSTALL-END [a-z ]{0,8}",
                    ".{0,20}",
                ],
                0..12,
            )
        ) {
            let text = lines.join("\n");
            let _ = parse(text.as_bytes());
        }

        #[test]
        fn any_length_is_data_or_a_truncated_stream(
            len in prop_oneof![any::<usize>(), (usize::MAX - 64)..=usize::MAX, 0usize..64],
            body in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut bytes = format!("WBSTALL-FILE a {len}\n").into_bytes();
            bytes.extend_from_slice(&body);
            let s = parse(&bytes);
            if let Some(got) = s.files.get("a") {
                prop_assert_eq!(got.len(), len);
            } else {
                prop_assert!(s.truncated.is_some());
            }
        }

        #[test]
        fn a_whole_stream_reads_back_exactly(files in files()) {
            let s = parse(&encode(&files, "WBSTALL-END ok\n"));
            prop_assert_eq!(s.end, Some(End::Ok));
            prop_assert_eq!(s.truncated, None);
            let want: BTreeMap<String, Vec<u8>> = files.into_iter().collect();
            prop_assert_eq!(s.files, want);
        }

        #[test]
        fn a_cut_stream_keeps_the_whole_files_and_no_end(files in files(), cut in any::<prop::sample::Index>()) {
            let bytes = encode(&files, "WBSTALL-END ok\n");
            let at = cut.index(bytes.len());
            let s = parse(&bytes[..at]);
            prop_assert_eq!(s.end, None);
            prop_assert!(s.truncated.is_some());
            // Every file it kept is one that was sent, whole.
            for (name, body) in &s.files {
                prop_assert!(files.iter().any(|(n, b)| n == name && b == body));
            }
            // And it kept every file that ended before the cut.
            let mut end = 0;
            for (name, body) in &files {
                end += format!("WBSTALL-FILE {name} {}\n", body.len()).len() + body.len() + 1;
                if end <= at {
                    prop_assert!(s.files.contains_key(name), "{} lost", name);
                }
            }
        }
    }
}
