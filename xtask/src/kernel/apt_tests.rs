use super::*;

const ONE_LINE: &str = include_str!("../../fixtures/apt/sources.list");
const DEB822: &str = include_str!("../../fixtures/apt/debian.sources");
const UBUNTU: &str = include_str!("../../fixtures/apt/ubuntu.sources");

#[test]
fn one_line_format() {
    let s = parse_one_line(ONE_LINE);
    // deb-src and commented lines are skipped; options are parsed.
    assert_eq!(s.len(), 3, "{s:#?}");
    assert_eq!(s[0].uri, "http://mirror.example.org/debian");
    assert_eq!(s[0].suites, ["bookworm"]);
    assert_eq!(s[0].components, ["main", "contrib"]);
    assert_eq!(s[0].signed_by, None);
    assert_eq!(s[1].signed_by.as_deref(), Some("/usr/share/keyrings/x.gpg"));
    assert_eq!(s[1].suites, ["bookworm-security"]);
}

#[test]
fn deb822_format() {
    let s = parse_deb822(DEB822);
    // The disabled stanza and the deb-src-only stanza are skipped; an inline
    // key does not become a keyring path.
    let uris: Vec<&str> = s.iter().map(|s| s.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            "http://deb.mirror.example/debian",
            "http://deb.mirror.example/debian-security",
            "https://vendor.example/apt"
        ]
    );
    assert_eq!(s[0].suites, ["bookworm", "bookworm-updates"]);
    assert_eq!(
        s[0].signed_by.as_deref(),
        Some("/usr/share/keyrings/debian-archive-keyring.gpg")
    );
    assert_eq!(s[2].signed_by, None);
}

#[test]
fn mirror_is_the_main_archive_not_security_or_vendor() {
    let s = parse_deb822(DEB822);
    assert_eq!(
        debian_mirror(&s).unwrap().uri,
        "http://deb.mirror.example/debian"
    );
    let s = parse_one_line(ONE_LINE);
    assert_eq!(
        debian_mirror(&s).unwrap().uri,
        "http://mirror.example.org/debian"
    );
    let vendor_only = parse_one_line("deb https://vendor.example/apt stable-vendor main\n");
    assert!(debian_mirror(&vendor_only).is_none());
}

#[test]
fn a_given_mirror_beats_the_variable_which_beats_the_hosts() {
    let host = parse_one_line(ONE_LINE);
    let flag = "http://flag.example/debian/";
    let env = "http://env.example/debian";
    let a = debian_archive(Some(flag), Some(env), &host).unwrap();
    assert_eq!(
        (a.uri.as_str(), a.origin.as_str()),
        ("http://flag.example/debian", "--debian-mirror")
    );
    // A given mirror is Debian's archive: its keyring, the caller's suites.
    assert_eq!(a.keyring.as_deref(), Some(DEBIAN_KEYRING));
    assert!(a.suites.is_empty());
    let a = debian_archive(None, Some(env), &host).unwrap();
    assert_eq!(
        (a.uri.as_str(), a.origin.as_str()),
        (env, "$WBSTALL_DEBIAN_MIRROR")
    );
    // An empty variable (a workflow's unset one) is no mirror.
    for env in [None, Some(""), Some("  ")] {
        let a = debian_archive(None, env, &host).unwrap();
        assert_eq!(
            (a.uri.as_str(), a.origin.as_str()),
            ("http://mirror.example.org/debian", "/etc/apt")
        );
    }
    // The variable gives a mirror to a host without one.
    let ubuntu = parse_deb822(UBUNTU);
    assert_eq!(debian_archive(None, Some(env), &ubuntu).unwrap().uri, env);
}

#[test]
fn no_mirror_anywhere_says_both_ways_to_give_one() {
    let e = debian_archive(None, Some(""), &parse_deb822(UBUNTU)).unwrap_err();
    let e = format!("{e:#}");
    for want in [
        "no Debian mirror",
        "--debian-mirror URL",
        "WBSTALL_DEBIAN_MIRROR=URL",
        "--kernel-src DIR",
    ] {
        assert!(e.contains(want), "{want}: {e}");
    }
    for bad in [
        "mirror.example/debian",
        "ftp://x.example/debian",
        "http://a b",
    ] {
        let e = debian_archive(None, Some(bad), &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("$WBSTALL_DEBIAN_MIRROR `") && e.contains("is not a mirror URL"),
            "{bad}: {e}"
        );
    }
}

#[test]
fn the_hosts_own_packages_come_from_its_release_archive() {
    // Debian: its mirror, as before.
    let a = host_archive(&parse_deb822(DEB822), Some("bookworm")).unwrap();
    assert_eq!(a.uri, "http://deb.mirror.example/debian");
    assert_eq!(a.suites, ["bookworm", "bookworm-updates"]);
    // Ubuntu: the stanza of its release, with universe (where fio is).
    let a = host_archive(&parse_deb822(UBUNTU), Some("noble")).unwrap();
    assert_eq!(a.uri, "http://archive.ubuntu.example/ubuntu/");
    assert_eq!(a.suites, ["noble", "noble-updates", "noble-backports"]);
    assert!(a.components.iter().any(|c| c == "universe"));
    assert_eq!(
        a.keyring.as_deref(),
        Some("/usr/share/keyrings/ubuntu-archive-keyring.gpg")
    );
    let e = host_archive(&parse_deb822(UBUNTU), None).unwrap_err();
    assert!(e.to_string().contains("VERSION_CODENAME"), "{e}");
}

#[test]
fn the_private_list_names_the_archive_and_refuses_a_missing_keyring() {
    let dir = util::testdir::Dir::new("apt");
    let keyring = dir.path().join("k.gpg");
    let archive = Archive {
        uri: "http://m.example/debian".into(),
        suites: Vec::new(),
        components: vec!["main".into()],
        keyring: Some(keyring.display().to_string()),
        origin: "--debian-mirror".into(),
    };
    let apt = PrivateApt::new(dir.path().join("apt"), archive);
    let e = apt.write_sources("deb", &["sid"]).unwrap_err().to_string();
    // Not Debian's keyring: the message says how to fix the source.
    assert!(
        e.contains("k.gpg") && e.contains("is missing") && e.contains("install it"),
        "{e}"
    );

    assert!(e.contains("install it"), "{e}");
    std::fs::write(&keyring, "").unwrap();
    apt.write_sources("deb", &["sid", "trixie-backports"])
        .unwrap();
    let list = std::fs::read_to_string(dir.path().join("apt/sources.list")).unwrap();
    let k = keyring.display();
    assert_eq!(
        list.lines().skip(1).collect::<Vec<_>>(),
        [
            format!("deb [signed-by={k}] http://m.example/debian sid main"),
            format!("deb [signed-by={k}] http://m.example/debian trixie-backports main"),
        ]
    );
}
