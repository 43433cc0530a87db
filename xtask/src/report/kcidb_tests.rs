use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::{
    kernel::mirror::GitState, report::kcidb_boots::test_path, results::record::RunRecord,
    results::session::BootFailure,
};

/// The example report's session and records.
fn example() -> (Session, Vec<RunRecord>) {
    let docs = crate::util::project_root().join("docs/example-report");
    ResultsDir::new(&docs).load().unwrap()
}

/// The document of a session, without files to point to.
fn doc_of(session: &Session, records: &[RunRecord]) -> Value {
    let expected = crate::analysis::verdict::session_expectations(session, None).unwrap();
    let j = crate::analysis::judge(session, records, &expected).unwrap();
    document(&j, &Artifacts::none()).unwrap()
}

/// The example as if run again later on the same kernels: another start,
/// every boot at another time.
fn again() -> (Session, Vec<RunRecord>) {
    let (mut session, mut records) = example();
    session.started = "20261207T080000Z".into();
    for r in &mut records {
        r.boot.started = Some("20261207T080100Z".into());
        r.boot.wall_secs += 1.0;
    }
    (session, records)
}

/// What a database holds after taking `docs` (KCIDB merges objects by id,
/// issues by id and version): the ids of each kind.
fn merged(docs: &[&Value]) -> BTreeMap<&'static str, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for kind in ["checkouts", "builds", "tests", "issues", "incidents"] {
        let ids: BTreeSet<String> = (docs.iter())
            .flat_map(|d| d[kind].as_array().unwrap().iter())
            .map(|o| format!("{}@{}", o["id"].as_str().unwrap(), o["version"]))
            .collect();
        out.insert(kind, ids);
    }
    out
}

/// What the KCIDB document cannot say is an error, not a default: a bad
/// path node, no compiler, a bad hash, a record without its start time
/// (a session always has one: `Session::started` is a time).
#[test]
fn what_the_document_cannot_say_is_an_error() {
    let e = test_path(&["wbstall", "fuse.1"]).unwrap_err().to_string();
    assert!(e.contains("`fuse.1` cannot be a node"), "{e}");
    assert_eq!(test_path(&["wbstall", "fuse-x"]).unwrap(), "wbstall.fuse-x");
    assert!(compiler(&Toolchain::default()).is_err());
    assert!(sha256("ABC", "x").is_err());
    let (session, mut records) = example();
    records[3].boot.started = None;
    let expected = crate::analysis::verdict::session_expectations(&session, None).unwrap();
    let j = crate::analysis::judge(&session, &records, &expected).unwrap();
    let e = format!("{:#}", document(&j, &Artifacts::none()).unwrap_err());
    assert!(
        e.contains("record of fuse-strictlimit/upstream #1 has no start time"),
        "{e}"
    );
}

/// The patchset hash is KCIDB's: `sha256sum *.patch | cut -c-64 | sha256sum`
/// over the repository's 0001 and 0002 (computed so by hand).
#[test]
fn the_patchset_hash_is_the_one_sha256sum_gives() {
    let root = crate::util::project_root().join("patches");
    let patches: Vec<PatchMeta> = ["0001-", "0002-"]
        .iter()
        .map(|prefix| {
            let e = std::fs::read_dir(&root)
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| crate::util::file_name(p).starts_with(prefix))
                .unwrap();
            PatchMeta {
                file: e.display().to_string(),
                sha256: crate::util::sha256_file(&e).unwrap(),
            }
        })
        .collect();
    assert_eq!(
        patchset_hash(&patches),
        "b33a14a268f74c3f6ee6d8e65888bfcf11ea0492818ff263010ddd5b919a8595"
    );
    assert_eq!(patchset_hash(&[]), "");
}

/// Two sessions on the same kernels, merged by id as KCIDB merges them:
/// one checkout and one build per kernel, every run's tests twice (none
/// overwritten), the known stalls one issue each with the incidents of
/// both sessions.
#[test]
fn two_sessions_merge_into_one_checkout_and_build_per_kernel() {
    let (s1, r1) = example();
    let (s2, r2) = again();
    let (d1, d2) = (doc_of(&s1, &r1), doc_of(&s2, &r2));
    let one = merged(&[&d1]);
    let both = merged(&[&d1, &d2]);
    assert_eq!(both["checkouts"].len(), 4, "{:?}", both["checkouts"]);
    assert_eq!(both["builds"].len(), 4, "{:?}", both["builds"]);
    assert_eq!(both["checkouts"], one["checkouts"]);
    assert_eq!(both["tests"].len(), 2 * one["tests"].len());
    assert_eq!(
        one["tests"].len(),
        2 * 50,
        "a boot and a measurement per run"
    );
    assert_eq!(both["issues"], one["issues"]);
    assert_eq!(both["issues"].len(), 2, "{:?}", both["issues"]);
    assert_eq!(both["incidents"].len(), 2 * one["incidents"].len());
    // Rendered again, a directory gives the same ids.
    assert_eq!(merged(&[&doc_of(&s1, &r1)]), one);
    // Another kernel (a rebuilt bzImage) is another build of the same checkout.
    let (mut s3, r3) = again();
    s3.variants[0].bzimage_sha256 = "0".repeat(64);
    let three = merged(&[&d1, &doc_of(&s3, &r3)]);
    assert_eq!((three["checkouts"].len(), three["builds"].len()), (4, 5));
}

/// The path names the scenario and the job's length; every run also has a
/// `boot` test; the A/A control's tests are of its variant's build.
#[test]
fn each_run_has_a_boot_test_and_a_measurement_on_a_stable_path() {
    let (s, r) = example();
    let doc = doc_of(&s, &r);
    let tests = doc["tests"].as_array().unwrap();
    let paths: BTreeSet<&str> = tests.iter().map(|t| t["path"].as_str().unwrap()).collect();
    assert_eq!(
        paths.into_iter().collect::<Vec<_>>(),
        [
            "boot",
            "wbstall.ext4-global.20s",
            "wbstall.fuse-nostrict.20s",
            "wbstall.fuse-strictlimit.20s",
            "wbstall.memcg-ext4.20s"
        ]
    );
    assert!(tests
        .iter()
        .all(|t| t["start_time"].is_string()
            && t["environment"]["misc"]["platform"] == "qemu-x86_64"));
    let boots = tests.iter().filter(|t| t["path"] == "boot");
    assert!(boots.clone().all(|t| t["status"] == "PASS"));
    let failed = tests.iter().filter(|t| t["status"] == "FAIL").count();
    assert_eq!(failed, 2 + 3 + 3);
    let upstream = build_id(s.variants.iter().find(|v| v.variant == "upstream").unwrap());
    assert!(tests
        .iter()
        .filter(|t| t["misc"]["variant"] == "upstream-aa")
        .all(|t| t["build_id"] == upstream.as_str()));
    let builds = doc["builds"].as_array().unwrap();
    assert!(builds.iter().all(|b| b["architecture"] == "x86_64"
        && b["checkout_id"]
            .as_str()
            .unwrap()
            .starts_with("wbstall:checkout-")));
    let c = &doc["checkouts"][0];
    assert_eq!(c["tree_name"], "debian");
    assert!(c["git_commit_hash"].is_null());
    assert_eq!(
        c["patchset_files"][0]["name"],
        "0001-regressed-restore-64dd89ae01f2-balance_dirty_pages.patch"
    );
}

/// A kernel that crashes: its boot FAILs with the console's lines as the
/// excerpt, its measurement FAILs (the kernel's failure, not the test's),
/// and the crash is an issue by its signature.
#[test]
fn a_crashed_kernel_fails_its_boot_with_an_excerpt_and_is_an_issue() {
    let (mut s, mut r) = example();
    let run = r.remove(0).id;
    let why = "oops: the guest kernel oopsed: kernel BUG at mm/page-writeback.c:1958! in \
               balance_dirty_pages+0x672/0x680 (QEMU killed 2 s after)";
    s.failures = vec![BootFailure {
        run: run.clone(),
        why: why.into(),
    }];
    let doc = doc_of(&s, &r);
    let of_run: Vec<&Value> = (doc["tests"].as_array().unwrap().iter())
        .filter(|t| {
            t["misc"]["variant"] == run.variant.as_str()
                && t["misc"]["scenario"] == run.scenario.as_str()
                && t["misc"]["run"] == 1
        })
        .collect();
    assert_eq!(of_run.len(), 2);
    for t in &of_run {
        assert_eq!(t["status"], "FAIL", "{t}");
        assert_eq!(t["log_excerpt"], why);
    }
    let crash: Vec<&Value> = (doc["issues"].as_array().unwrap().iter())
        .filter(|i| i["id"].as_str().unwrap().starts_with("wbstall:crash/"))
        .collect();
    assert_eq!(crash.len(), 1);
    assert_eq!(crash[0]["categories"][0], "runtime.oops");
    let boot = of_run.iter().find(|t| t["path"] == "boot").unwrap();
    assert!(doc["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["test_id"] == boot["id"] && i["issue_id"] == crash[0]["id"]));
    // A boot that failed in the harness is an ERROR, not the kernel's.
    s.failures[0].why = "QEMU exited with 1: could not open kernel file".into();
    let doc = doc_of(&s, &r);
    let boot = (doc["tests"].as_array().unwrap().iter())
        .find(|t| t["path"] == "boot" && t["status"] != "PASS")
        .unwrap();
    assert_eq!(boot["status"], "ERROR");
    assert!(boot["log_excerpt"].is_null());
}

/// A revision of a git tree is its commit; a tree's HEAD with patches is
/// the commit and the patchset, named by its repository and branch.
#[test]
fn a_git_tree_gives_its_repository_branch_and_commit() {
    let (mut s, r) = example();
    let head = "1".repeat(40);
    for v in &mut s.variants {
        v.base.git = Some(GitState {
            commit: head.clone(),
            branch: Some("master".into()),
            url: Some("https://example.org/pub/scm/linux.git".into()),
            dirty: false,
        });
    }
    let doc = doc_of(&s, &r);
    let c = &doc["checkouts"][0];
    assert_eq!(c["git_commit_hash"], head.as_str());
    assert_eq!(c["git_repository_branch"], "master");
    assert_eq!(c["tree_name"], "linux");
    assert!(!c["patchset_hash"].as_str().unwrap().is_empty());
    assert_eq!(
        tree_name(None, Some("/home/me/src/linux-next")),
        "linux-next"
    );
    assert_eq!(tree_name(Some("git@host:me/fs.git"), None), "fs");
    // A revision: its own commit, no patchset.
    let rev = "2".repeat(40);
    s.under_test.push(crate::kernel::variants::UnderTest {
        variant: "regressed".into(),
        base: "the working tree".into(),
        file: "HEAD~1 (222222222222)".into(),
        subjects: vec!["mm: x".into()],
        other_base: String::new(),
        posted: Default::default(),
        commit: Some(rev.clone()),
        ..Default::default()
    });
    let v = &s.variants[0];
    let epoch = Stamp::from("19700101T000000Z");
    let c = checkout(&s, v, epoch).unwrap();
    assert_eq!(c["git_commit_hash"], rev.as_str());
    assert_eq!(c["patchset_hash"], "");
    // A commit that is not one is an error, not a field.
    s.under_test[0].commit = Some("abc".into());
    assert!(checkout(&s, &s.variants[0], epoch).is_err());
}

/// A file is pointed to only when the directory has it.
#[test]
fn a_url_only_for_a_file_that_is_there() {
    let dir = crate::util::testdir::Dir::new("kcidb-files");
    std::fs::write(dir.path().join("regressed.config"), "CONFIG_X=y\n").unwrap();
    let names = || {
        crate::results::dir::ResultsDir::new(dir.path())
            .file_names()
            .unwrap()
    };
    let f = Artifacts::new(dir.path(), names(), Some("https://example.org/r/1/")).unwrap();
    assert_eq!(
        f.url("regressed.config").as_deref(),
        Some("https://example.org/r/1/regressed.config")
    );
    assert_eq!(f.url("v1.config"), None);
    assert_eq!(Artifacts::none().url("regressed.config"), None);
    let local = Artifacts::new(dir.path(), names(), None).unwrap();
    assert!(local
        .url("regressed.config")
        .unwrap()
        .starts_with("file:///"));
}

/// The issues' wording is tied to [`ISSUE_VERSION`]: a change of the text
/// without a new version would make a database keep two texts under one
/// version. Change both, and this hash.
#[test]
fn the_issues_wording_is_pinned_to_its_version() {
    let (s, r) = example();
    let doc = doc_of(&s, &r);
    let bodies = serde_json::to_string(&doc["issues"]).unwrap();
    let hash = &crate::util::sha256_hex(bodies.as_bytes())[..16];
    assert_eq!(
        (super::super::kcidb_issues::ISSUE_VERSION, hash),
        (1, "f647e7d2035fd97e"),
        "the issues' text changed: bump ISSUE_VERSION and pin the new hash"
    );
}

/// The golden test: the KCIDB document of `docs/example-report/` is the
/// committed `kcidb.json` (`WBSTALL_BLESS=1` writes what renders now).
#[test]
fn the_example_report_kcidb_document_renders_the_same() {
    let docs = crate::util::project_root().join("docs/example-report");
    let (s, r) = example();
    let text = text(&doc_of(&s, &r)).unwrap();
    let golden = docs.join(ResultsDir::KCIDB);
    if std::env::var_os("WBSTALL_BLESS").is_some() {
        std::fs::write(&golden, &text).unwrap();
    }
    let want = std::fs::read_to_string(&golden).unwrap();
    assert!(text == want, "{} renders differently", golden.display());
}

/// A patch under test has a test per judged cost under its scenario's
/// path: a `worse` FAILs with the change as its number, a scenario without
/// a floor is one SKIP saying why; a session without a patch has none.
#[test]
fn each_cost_of_a_patch_is_a_test_and_a_worse_one_fails() {
    let cost_tests = |doc: &Value| -> Vec<Value> {
        (doc["tests"].as_array().unwrap().iter())
            .filter(|t| t["path"].as_str().unwrap().contains(".cost"))
            .cloned()
            .collect()
    };
    let (mut s, mut records) = example();
    assert!(cost_tests(&doc_of(&s, &records)).is_empty());
    s.under_test.push(crate::kernel::variants::UnderTest {
        variant: "v1".into(),
        base: "regressed".into(),
        ..Default::default()
    });
    s.floors = crate::test_support::floors(0.0025, &["fuse-strictlimit", "fuse-nostrict"]);
    for r in
        (records.iter_mut()).filter(|r| r.id.variant == "v1" && r.id.scenario == "fuse-nostrict")
    {
        r.fio.bw_mib_s *= 0.9;
    }
    let tests = cost_tests(&doc_of(&s, &records));
    let at = |path: &str| {
        (tests.iter())
            .find(|t| t["path"] == path)
            .unwrap_or_else(|| panic!("no {path} in {tests:#?}"))
    };
    let bw = at("wbstall.fuse-nostrict.20s.cost.fio_write_bw_MiB_s");
    assert_eq!(bw["status"], "FAIL", "{bw:#}");
    let pct = bw["number"]["value"].as_f64().unwrap();
    assert!((pct + 10.0).abs() < 0.5, "{bw:#}");
    assert_eq!(bw["number"]["unit"], "%");
    assert_eq!(
        at("wbstall.fuse-strictlimit.20s.cost.fio_write_bw_MiB_s")["status"],
        "PASS"
    );
    let none = at("wbstall.ext4-global.20s.cost");
    assert_eq!(none["status"], "SKIP");
    assert!(
        none["comment"]
            .as_str()
            .unwrap()
            .contains("costs not judged"),
        "{none:#}"
    );
}
